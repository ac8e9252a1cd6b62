package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

func main() {
	if dir := os.Getenv(componentEnv); dir != "" {
		os.Exit(componentMain(dir))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// namespace is the namespace of the demo's ConfigMaps.
const namespace = "kube-system"

// localMaxPods is maxPods in the local config: the kubelet default.
const localMaxPods = kubelet.DefaultMaxPods

// demoConfig is one ConfigMap of the walk-through. Each has its own maxPods,
// so the config a component runs tells which ConfigMap it came from.
type demoConfig struct {
	name      string
	uid       string
	maxPods   int32
	extra     string // more KubeletConfiguration fields, one per line
	trial     time.Duration
	threshold int
}

// The demo's ConfigMaps, in the order the walk-through assigns them.
func demoConfigs() (good1, invalid, crash, good2 demoConfig) {
	good1 = demoConfig{name: "kubelet-v1", uid: "a1f4c2d0-6b1e-4f3a-9c2d-7e5b8a0f1c11", maxPods: 120,
		trial: 5 * time.Second, threshold: 2}
	invalid = demoConfig{name: "kubelet-v2-invalid", uid: "b2e5d3c1-7c2f-4a4b-8d3e-8f6c9b1a2d22", maxPods: 130,
		extra: "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 80\n", trial: 5 * time.Second, threshold: 2}
	// A crash loop only counts during the trial, so this one gets a trial
	// long enough for the adopting start and threshold+1 crash restarts
	// even on a busy machine.
	crash = demoConfig{name: "kubelet-v3-crash", uid: "c3d6e4f2-8d3a-4b5c-9e4f-9a7d0c2b3e33", maxPods: 140,
		extra: "providerID: " + crashProviderID + "\n", trial: 30 * time.Second, threshold: 2}
	good2 = demoConfig{name: "kubelet-v4", uid: "d4e7f5a3-9e4b-4c6d-8f5a-0b8e1d3c4f44", maxPods: 150,
		trial: 5 * time.Second, threshold: 2}
	return good1, invalid, crash, good2
}

// typedUID is the ConfigMap's UID as the status package takes it.
func (c demoConfig) typedUID() types.UID { return types.UID(c.uid) }

// ref is the namespace/name of the config.
func (c demoConfig) ref() string { return namespace + "/" + c.name }

// payload is the KubeletConfiguration the ConfigMap carries.
func (c demoConfig) payload() string {
	return fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: %d\n%s", c.maxPods, c.extra)
}

// configMap is the ConfigMap's YAML, as a file of the directory source.
func (c demoConfig) configMap() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: %s\n  name: %s\n  uid: %s\n", namespace, c.name, c.uid)
	fmt.Fprintf(&b, "  annotations:\n    %s: %q\n    %s: %q\n", components.TrialDurationAnnotation, c.trial.String(),
		components.CrashLoopThresholdAnnotation, fmt.Sprint(c.threshold))
	fmt.Fprintf(&b, "data:\n  %s: |\n", kubelet.PayloadKey)
	for _, line := range strings.SplitAfter(strings.TrimSuffix(c.payload(), "\n"), "\n") {
		b.WriteString("    " + line)
	}
	b.WriteString("\n")
	return b.String()
}

// assignment is the NodeConfigSource that names the config.
func (c demoConfig) assignment() string {
	return fmt.Sprintf("configMap:\n  namespace: %s\n  name: %s\n  uid: %s\n", namespace, c.name, c.uid)
}

// want is the state a step waits for. It must be reported by the running
// component, after Bootstrap returned.
type want struct {
	status       corev1.ConditionStatus
	reasonPrefix string
	message      string
	current      string // the UID current points at; "" is local
	lkg          string // the UID last-known-good points at; "" is local
	anyLKG       bool   // do not look at last-known-good
	// collected waits for the garbage collection that follows a
	// promotion: no checkpoint left that neither pointer references.
	collected bool
}

func (w want) String() string {
	s := fmt.Sprintf("ConfigOK %s, reason %q..., message %q from the running component; current %s", w.status, w.reasonPrefix, w.message, orLocal(w.current))
	if !w.anyLKG {
		s += ", last-known-good " + orLocal(w.lkg)
	}
	if w.collected {
		s += ", no other checkpoint"
	}
	return s
}

func orLocal(uid string) string {
	if uid == "" {
		return "local"
	}
	return "UID " + uid
}

// snapshot is what the walk-through sees at one moment.
type snapshot struct {
	at        time.Time
	livePID   int
	status    componentStatus
	statusErr error
	state     stateView
}

func (w want) matches(s snapshot) bool {
	st := s.status
	return s.statusErr == nil && st.PID != 0 && st.PID == s.livePID && st.Running != nil && st.Condition != nil &&
		st.Condition.Status == w.status && strings.HasPrefix(st.Condition.Reason, w.reasonPrefix) &&
		st.Condition.Message == w.message &&
		s.state.Current.uid() == w.current && (w.anyLKG || s.state.LastKnownGood.uid() == w.lkg) &&
		(!w.collected || s.state.onlyReferenced())
}

// describe words a snapshot for a failure message.
func (s snapshot) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "running component pid %d; ", s.livePID)
	switch {
	case s.statusErr != nil:
		fmt.Fprintf(&b, "status file: %v", s.statusErr)
	case s.status.Condition == nil:
		fmt.Fprintf(&b, "no ConfigOK condition reported (by pid %d)", s.status.PID)
	default:
		c := s.status.Condition
		fmt.Fprintf(&b, "pid %d reported ConfigOK %s, reason %q, message %q", s.status.PID, c.Status, c.Reason, c.Message)
	}
	fmt.Fprintf(&b, "; current %s, last-known-good %s", orLocal(s.state.Current.uid()), orLocal(s.state.LastKnownGood.uid()))
	return b.String()
}

// check is one state a step waits for, and prints.
type check struct {
	intro     string // printed before waiting
	want      want
	timeout   time.Duration
	stateOnly bool // print the state dir only (the condition did not change)
	outro     string
}

// step is one stage of the walk-through.
type step struct {
	title   string
	explain string
	act     func() error
	checks  []check
}

// walkthrough runs the steps and prints what happens.
type walkthrough struct {
	out     io.Writer
	l       layout
	sup     *supervisor
	configs []demoConfig
	shown   int // supervisor events already printed
	err     error
}

// printf writes to out, keeping the first write error.
func (w *walkthrough) printf(format string, args ...any) {
	if w.err != nil {
		return
	}
	_, w.err = fmt.Fprintf(w.out, format, args...)
}

// row prints one label/value line of a step's report.
func (w *walkthrough) row(label, value string) { w.printf("  %-17s%s\n", label, value) }

// name returns the namespace/name of a demo config by UID.
func (w *walkthrough) name(uid string) string {
	for _, c := range w.configs {
		if c.uid == uid {
			return c.ref()
		}
	}
	return "unknown ConfigMap " + uid
}

// ranConfig says which config has maxPods m.
func (w *walkthrough) ranConfig(m int32) string {
	if m == localMaxPods {
		return "the local config"
	}
	for _, c := range w.configs {
		if c.maxPods == m {
			return "the config of " + c.ref()
		}
	}
	return "an unknown config"
}

// snapshot reads the component's status file and the state dir.
func (w *walkthrough) snapshot() snapshot {
	s := snapshot{at: time.Now(), livePID: w.sup.livePID()}
	data, err := readOptional(w.l.statusFile())
	if err == nil {
		s.status, err = decodeStatus(data)
	}
	s.statusErr = err
	s.state = readState(w.l.stateDir(), componentVersion)
	return s
}

// await polls until c.want holds, or fails after c.timeout.
func (w *walkthrough) await(ctx context.Context, c check) (snapshot, error) {
	deadline := time.Now().Add(c.timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s := w.snapshot()
		if c.want.matches(s) {
			return s, nil
		}
		if err := w.sup.failure(); err != nil {
			return s, fmt.Errorf("supervisor stopped: %w", err)
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("not reached within %s: want %s; last seen: %s%s", c.timeout, c.want, s.describe(), w.logTail())
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("waiting for %s: %w", c.want, ctx.Err())
		case <-tick.C:
		}
	}
}

// logTail returns the end of the component log, for failure messages.
func (w *walkthrough) logTail() string {
	data, err := os.ReadFile(w.l.logFile())
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return "\ncomponent log (" + w.l.logFile() + "), last lines:\n  " + strings.Join(lines, "\n  ")
}

// print shows a snapshot: the new supervisor events, the condition, the
// running config and the state dir.
func (w *walkthrough) print(s snapshot, stateOnly bool) {
	events, next := w.sup.eventsFrom(w.shown)
	w.shown = next
	for i, e := range events {
		label := ""
		if i == 0 {
			label = "supervisor"
		}
		w.row(label, e.String())
	}
	if !stateOnly {
		c := s.status.Condition
		w.row("ConfigOK", "status   "+string(c.Status))
		w.row("", "reason   "+c.Reason)
		w.row("", "message  "+c.Message)
		w.row("component", fmt.Sprintf("pid %d runs maxPods=%d, %s", s.status.PID, s.status.Running.MaxPods, w.ranConfig(s.status.Running.MaxPods)))
	}
	for i, r := range s.state.lines(s.at, w.name) {
		label := ""
		if i == 0 {
			label = "state dir"
		}
		w.row(label, fmt.Sprintf("%-17s%s", r[0], r[1]))
	}
}

// write replaces a file of the directory source atomically, so the
// component never reads half of it.
func (w *walkthrough) write(rel, content string) error {
	path := filepath.Join(w.l.sourceDir(), rel)
	if err := atomicfile.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// assign writes c's ConfigMap, then the assignment that names it.
func (w *walkthrough) assign(c demoConfig) error {
	if err := w.write(filepath.Join(source.ConfigMapsDir, c.name+".yaml"), c.configMap()); err != nil {
		return err
	}
	return w.write(source.AssignmentFile, c.assignment())
}

// run is the quickstart: it sets up a work dir, supervises the component
// and walks through the lifecycle, writing to out. It returns an error when
// a step does not reach the state it expects.
func run(ctx context.Context, out io.Writer) (err error) {
	start := time.Now()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run it as the component: %w", err)
	}
	dir, err := os.MkdirTemp("", "dynconfig-quickstart-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove work dir: %w", rerr)
		}
	}()
	l := layout{dir: dir}
	if err := os.MkdirAll(filepath.Join(l.sourceDir(), source.ConfigMapsDir), 0o755); err != nil {
		return err
	}
	pipeline, err := merge.New[kubeletv1beta1.KubeletConfiguration](kubelet.Profile{}, merge.Options{})
	if err != nil {
		return err
	}

	good1, invalid, crash, good2 := demoConfigs()
	w := &walkthrough{
		out:     out,
		l:       l,
		configs: []demoConfig{good1, invalid, crash, good2},
		sup: &supervisor{
			exe:     exe,
			env:     append(os.Environ(), componentEnv+"="+dir),
			logPath: l.logFile(),
		},
	}
	sctx, stopSupervisor := context.WithCancel(ctx)
	var supervised chan struct{}
	defer func() {
		stopSupervisor()
		if supervised != nil {
			<-supervised
		}
	}()
	startSupervisor := func() error {
		supervised = make(chan struct{})
		go func() {
			defer close(supervised)
			_ = w.sup.run(sctx) // its error is reported by failure()
		}()
		return nil
	}

	// Sanity checks of the demo itself: the config meant to fail validation
	// does, and the one meant to crash passes it (it crashes the component,
	// not the validation).
	validation := func(c demoConfig) error {
		_, err := pipeline.Merge(merge.Layers{Base: &merge.Document{Name: "ConfigMap " + c.ref(), Data: []byte(c.payload())}})
		return err
	}
	validationErr := validation(invalid)
	if validationErr == nil {
		return fmt.Errorf("demo config %s passes validation; it is meant to fail it", invalid.ref())
	}
	for _, c := range []demoConfig{good1, crash, good2} {
		if err := validation(c); err != nil {
			return fmt.Errorf("demo config %s: %w", c.ref(), err)
		}
	}

	current := func(c demoConfig) string { return "using current (UID: " + c.uid + ")" }
	lkgMessage := func(c demoConfig) string { return "using last known good: (UID: " + c.uid + ")" }
	steps := []step{{
		title: "local config",
		explain: fmt.Sprintf("Start the supervisor. Nothing is assigned yet (source/%s does not exist), so the\n"+
			"component runs its local config: the kubelet defaults (no init file), maxPods=%d.", source.AssignmentFile, localMaxPods),
		act: startSupervisor,
		checks: []check{{
			want: want{status: corev1.ConditionTrue, reasonPrefix: status.ReasonLocalDefault, message: "using current (default)"},
		}},
	}, {
		title: "assign a good config",
		explain: fmt.Sprintf("Write ConfigMap %s (maxPods=%d; annotations: trial %s, crash-loop threshold %d)\n"+
			"and assign it. The component checkpoints it, makes it current and exits 0; the supervisor\n"+
			"restarts it, and the new process runs the new config, on trial.", good1.ref(), good1.maxPods, good1.trial, good1.threshold),
		act: func() error { return w.assign(good1) },
		checks: []check{{
			want: want{status: corev1.ConditionTrue, reasonPrefix: status.ReasonAllChecksPassed, message: current(good1), current: good1.uid, anyLKG: true},
		}, {
			intro: fmt.Sprintf("Wait for the %s trial to pass: once the process running %s has been up that long, it\n"+
				"promotes it to last-known-good.", good1.trial, good1.name),
			want:      want{status: corev1.ConditionTrue, reasonPrefix: status.ReasonAllChecksPassed, message: current(good1), current: good1.uid, lkg: good1.uid},
			stateOnly: true,
		}},
	}, {
		title: "assign a config that fails validation",
		explain: fmt.Sprintf("Assign ConfigMap %s. The kubelet rules reject it:\n  %v\n"+
			"The running component checkpoints it, makes it current, marks it bad (a perfect signal: it\n"+
			"is never retried) and rolls back to last-known-good, which it already runs: no restart.", invalid.ref(), validationErr),
		act: func() error { return w.assign(invalid) },
		checks: []check{{
			want: want{status: corev1.ConditionFalse, reasonPrefix: status.ValidateFailedReason(invalid.typedUID()), message: lkgMessage(good1), current: invalid.uid, lkg: good1.uid},
		}},
	}, {
		title: "assign a config that crashes the component at startup",
		explain: fmt.Sprintf("Assign ConfigMap %s: it is valid, but it sets providerID to %s,\n"+
			"and the component exits 1 right after Bootstrap. Its annotations give a %s trial and a\n"+
			"crash-loop threshold of %d: the start that adopts the config is not a crash, %d crash restarts\n"+
			"after its first run are tolerated, and start number %d within the trial is one too many. That\n"+
			"process detects the crash loop, marks the config bad (an imperfect signal) and rolls back to\n"+
			"last-known-good.",
			crash.ref(), crashProviderID, crash.trial, crash.threshold, crash.threshold, crash.threshold+2),
		act: func() error { return w.assign(crash) },
		checks: []check{{
			want: want{status: corev1.ConditionFalse, reasonPrefix: status.CrashLoopReason(crash.typedUID()), message: lkgMessage(good1), current: crash.uid, lkg: good1.uid},
		}},
	}, {
		title: "assign a good config and let it pass its trial",
		explain: fmt.Sprintf("Assign ConfigMap %s (maxPods=%d, trial %s). While it is on trial,\n"+
			"last-known-good stays %s: a crash loop now would roll back there.", good2.ref(), good2.maxPods, good2.trial, good1.name),
		act: func() error { return w.assign(good2) },
		checks: []check{{
			want: want{status: corev1.ConditionTrue, reasonPrefix: status.ReasonAllChecksPassed, message: current(good2), current: good2.uid, anyLKG: true},
		}, {
			intro:     fmt.Sprintf("Wait for the %s trial to pass: after that much uptime, %s is promoted to last-known-good.", good2.trial, good2.name),
			want:      want{status: corev1.ConditionTrue, reasonPrefix: status.ReasonAllChecksPassed, message: current(good2), current: good2.uid, lkg: good2.uid, collected: true},
			stateOnly: true,
			outro:     "Checkpoints that neither current nor last-known-good references were garbage-collected.",
		}},
	}, {
		title: "empty assignment",
		explain: "Empty the assignment: the node runs its local config again. The component resets current and\n" +
			"last-known-good to local and drops the checkpoints. The bad marks stay, so the same bad\n" +
			"ConfigMaps are never tried again: roll out a fix as a new ConfigMap, never as an edit.",
		act: func() error { return w.write(source.AssignmentFile, "") },
		checks: []check{{
			want: want{status: corev1.ConditionTrue, reasonPrefix: status.ReasonLocalDefault, message: "using current (default)"},
		}},
	}}

	w.printf("dynconfig quickstart: the config lifecycle of a kubelet-like component, on this machine.\n\n")
	w.printf("Work dir %s (removed at the end):\n", dir)
	w.printf("  source/         the \"cluster\": %s names the ConfigMap to run, %s/ holds ConfigMaps\n", source.AssignmentFile, source.ConfigMapsDir)
	w.printf("  state/          the component's state dir: checkpoints, current and last-known-good, tracking\n")
	w.printf("  component.log   the component's log\n")
	w.printf("The component is this program, run again as a child process; it embeds dynconfig.Controller\n")
	w.printf("with the kubelet profile. A supervisor restarts it whenever it exits (like systemd with\n")
	w.printf("Restart=always): exit 0 is how it restarts onto a new config.\n")

	for i, st := range steps {
		w.printf("\n== Step %d/%d: %s ==\n%s\n", i+1, len(steps), st.title, st.explain)
		if err := st.act(); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, st.title, err)
		}
		for _, c := range st.checks {
			if c.intro != "" {
				w.printf("%s\n", c.intro)
			}
			if c.timeout == 0 {
				c.timeout = 30 * time.Second
			}
			s, err := w.await(ctx, c)
			if err != nil {
				return fmt.Errorf("step %d (%s): %w", i+1, st.title, err)
			}
			w.print(s, c.stateOnly)
			if c.outro != "" {
				w.printf("%s\n", c.outro)
			}
		}
		if w.err != nil {
			return fmt.Errorf("write output: %w", w.err)
		}
	}

	events, _ := w.sup.eventsFrom(0)
	starts, crashes := 0, 0
	for _, e := range events {
		switch {
		case !e.Exited:
			starts++
		case e.Code > 0:
			crashes++
		}
	}
	w.printf("\nDone in %s: %d component processes started, %d crashed.\n", roundDuration(time.Since(start)), starts, crashes)
	if w.err != nil {
		return fmt.Errorf("write output: %w", w.err)
	}
	return w.sup.failure()
}
