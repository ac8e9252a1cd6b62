package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestMain runs the demo component when the quickstart under test starts
// this test binary as its component (run re-executes os.Executable()).
func TestMain(m *testing.M) {
	if dir := os.Getenv(componentEnv); dir != "" {
		os.Exit(componentMain(dir))
	}
	os.Exit(m.Run())
}

// printedCondition is a ConfigOK condition as the walk-through prints it.
type printedCondition struct {
	Status, Reason, Message string
}

// printedStep is what the walk-through printed for one step.
type printedStep struct {
	Title      string
	Conditions []printedCondition
	LKG        []string // the last-known-good row of each state-dir view
	Startups   []string // the startups row of each state-dir view
	Checkpoint []string // the checkpoints row of each state-dir view
	Starts     int      // "pid N started" rows
	Crashes    int      // "exited with code 1" rows
	Restarts   int      // "exited with code 0" rows
}

var (
	stepHeader = regexp.MustCompile(`^== Step (\d+)/(\d+): (.*) ==$`)
	// A row is "  <label><value>" with 17-column labels; the nested rows
	// of ConfigOK and the state dir have a second 17-column label, or 9
	// for the condition's fields.
	statusRow  = regexp.MustCompile(`^  (?:ConfigOK +| {17})status   (.*)$`)
	reasonRow  = regexp.MustCompile(`^ {19}reason   (.*)$`)
	messageRow = regexp.MustCompile(`^ {19}message  (.*)$`)
	stateRow   = regexp.MustCompile(`^  (?:state dir +| {17})(current|last-known-good|bad marks|startups|checkpoints) +(.*)$`)
	startedRow = regexp.MustCompile(`pid \d+ started$`)
)

// parseSteps splits the walk-through output into steps.
func parseSteps(t *testing.T, out string) []printedStep {
	t.Helper()
	var steps []printedStep
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := stepHeader.FindStringSubmatch(line); m != nil {
			steps = append(steps, printedStep{Title: m[3]})
			continue
		}
		if len(steps) == 0 {
			continue
		}
		s := &steps[len(steps)-1]
		switch {
		case statusRow.MatchString(line):
			if i+2 >= len(lines) {
				t.Fatalf("condition cut short at line %d: %q", i, line)
			}
			r, m := reasonRow.FindStringSubmatch(lines[i+1]), messageRow.FindStringSubmatch(lines[i+2])
			if r == nil || m == nil {
				t.Fatalf("status row not followed by reason and message rows:\n%s", strings.Join(lines[i:i+3], "\n"))
			}
			s.Conditions = append(s.Conditions, printedCondition{statusRow.FindStringSubmatch(line)[1], r[1], m[1]})
			i += 2
		case stateRow.MatchString(line):
			m := stateRow.FindStringSubmatch(line)
			switch m[1] {
			case "last-known-good":
				s.LKG = append(s.LKG, m[2])
			case "startups":
				s.Startups = append(s.Startups, m[2])
			case "checkpoints":
				s.Checkpoint = append(s.Checkpoint, m[2])
			}
		case startedRow.MatchString(line):
			s.Starts++
		case strings.HasSuffix(line, "exited with code 1 (crash)"):
			s.Crashes++
		case strings.HasSuffix(line, "exited with code 0 (restart to apply a new config)"):
			s.Restarts++
		}
	}
	return steps
}

// TestQuickstart runs the whole walk-through with real component processes
// and checks what each step printed: the conditions in order, the
// last-known-good before and after each promotion, and the process starts
// and crashes of the crash loop.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 30s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	good1, invalid, crash, good2 := demoConfigs()
	const localReason = "current is set to the local default, and no init config was provided"
	lkgRow := func(c demoConfig) string {
		return fmt.Sprintf("kube-system/%s (UID %s, resourceVersion ", c.name, c.uid)
	}

	type wantStep struct {
		title      string
		conditions []printedCondition
		// lkg holds a prefix of each view's last-known-good row; "" skips
		// that view.
		lkg                       []string
		starts, crashes, restarts int
		startups, checkpoints     string // a substring of the last view's row; "" skips
	}
	wants := []wantStep{{
		title:      "local config",
		conditions: []printedCondition{{"True", localReason, "using current (default)"}},
		lkg:        []string{"local"},
		starts:     1,
		startups:   "1 recorded", checkpoints: "none",
	}, {
		title:      "assign a good config",
		conditions: []printedCondition{{"True", "all checks passed", "using current (UID: " + good1.uid + ")"}},
		lkg:        []string{"", lkgRow(good1)}, // on trial (promotion may race the first view), then promoted
		starts:     1, restarts: 1,
		startups: "1 since current was set, 0 since it first ran",
	}, {
		title: "assign a config that fails validation",
		conditions: []printedCondition{{"False", "failed to validate current (UID: " + invalid.uid + ")",
			"using last known good: (UID: " + good1.uid + ")"}},
		lkg: []string{lkgRow(good1)},
		// The running component rejects it in process: it already runs
		// last-known-good, so it does not restart.
		starts: 0, restarts: 0,
		startups: "0 since current was set",
	}, {
		title: "assign a config that crashes the component at startup",
		conditions: []printedCondition{{"False", "crash loop detected with current (UID: " + crash.uid + ")",
			"using last known good: (UID: " + good1.uid + ")"}},
		lkg: []string{lkgRow(good1)},
		// The start that adopts the crashing config, then threshold+1
		// crash restarts (threshold N tolerates N): the last one detects
		// the loop and runs last-known-good, the others crash.
		starts: crash.threshold + 2, crashes: crash.threshold + 1, restarts: 1,
		startups: fmt.Sprintf("%d since current was set, %d since it first ran (crash restarts; %d tolerated)",
			crash.threshold+2, crash.threshold+1, crash.threshold),
	}, {
		title:      "assign a good config and let it pass its trial",
		conditions: []printedCondition{{"True", "all checks passed", "using current (UID: " + good2.uid + ")"}},
		lkg:        []string{lkgRow(good1), lkgRow(good2)}, // before and after the promotion
		starts:     1, restarts: 1,
		checkpoints: "kube-system/kubelet-v4",
	}, {
		title:      "empty assignment",
		conditions: []printedCondition{{"True", localReason, "using current (default)"}},
		lkg:        []string{"local"},
		starts:     1, restarts: 1,
		checkpoints: "none",
	}}

	steps := parseSteps(t, out.String())
	if len(steps) != len(wants) {
		t.Fatalf("printed %d steps, want %d; output:\n%s", len(steps), len(wants), out.String())
	}
	for i, want := range wants {
		got := steps[i]
		t.Run(fmt.Sprintf("step %d %s", i+1, want.title), func(t *testing.T) {
			if got.Title != want.title {
				t.Errorf("title %q, want %q", got.Title, want.title)
			}
			if len(got.Conditions) != len(want.conditions) {
				t.Fatalf("conditions %+v, want %+v", got.Conditions, want.conditions)
			}
			for j, w := range want.conditions {
				c := got.Conditions[j]
				if c.Status != w.Status || !strings.HasPrefix(c.Reason, w.Reason) || c.Message != w.Message {
					t.Errorf("condition %d = %+v, want status %s, reason prefix %q, message %q", j, c, w.Status, w.Reason, w.Message)
				}
			}
			if len(got.LKG) != len(want.lkg) {
				t.Fatalf("last-known-good rows %q, want %d of them", got.LKG, len(want.lkg))
			}
			for j, w := range want.lkg {
				if w != "" && !strings.HasPrefix(got.LKG[j], w) {
					t.Errorf("last-known-good row %d = %q, want prefix %q", j, got.LKG[j], w)
				}
			}
			if got.Starts != want.starts || got.Crashes != want.crashes || got.Restarts != want.restarts {
				t.Errorf("supervisor saw %d starts, %d crashes, %d restarts; want %d, %d, %d",
					got.Starts, got.Crashes, got.Restarts, want.starts, want.crashes, want.restarts)
			}
			if want.startups != "" && !strings.Contains(got.Startups[len(got.Startups)-1], want.startups) {
				t.Errorf("startups row %q, want it to contain %q", got.Startups[len(got.Startups)-1], want.startups)
			}
			if want.checkpoints != "" && got.Checkpoint[len(got.Checkpoint)-1] != want.checkpoints {
				t.Errorf("checkpoints row %q, want %q", got.Checkpoint[len(got.Checkpoint)-1], want.checkpoints)
			}
		})
	}
	done := regexp.MustCompile(`(?m)^Done in .*: (\d+) component processes started, (\d+) crashed\.$`).FindStringSubmatch(out.String())
	wantStarts := 0
	for _, w := range wants {
		wantStarts += w.starts
	}
	if done == nil || done[1] != fmt.Sprint(wantStarts) || done[2] != fmt.Sprint(crash.threshold+1) {
		t.Errorf("summary %q, want %d started and %d crashed", done, wantStarts, crash.threshold+1)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out.String())
	}
}

func TestWantMatches(t *testing.T) {
	const pid = 42
	w := want{status: corev1.ConditionFalse, reasonPrefix: "failed to validate", message: "using last known good: (UID: a)", current: "b", lkg: "a"}
	match := func() snapshot {
		return snapshot{
			livePID: pid,
			status: componentStatus{PID: pid, Running: &runningConfig{MaxPods: 120},
				Condition: &condition{Status: corev1.ConditionFalse, Reason: "failed to validate current (UID: b)", Message: "using last known good: (UID: a)"}},
			state: stateView{
				Current:       pointerView{Source: remoteSource("b")},
				LastKnownGood: pointerView{Source: remoteSource("a")},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*snapshot, *want)
		want   bool
	}{
		{"all as wanted", func(*snapshot, *want) {}, true},
		{"reported by an exited process", func(s *snapshot, _ *want) { s.livePID = pid + 1 }, false},
		{"no component running", func(s *snapshot, _ *want) { s.livePID = 0; s.status.PID = 0 }, false},
		{"Bootstrap returned no config yet", func(s *snapshot, _ *want) { s.status.Running = nil }, false},
		{"no condition yet", func(s *snapshot, _ *want) { s.status.Condition = nil }, false},
		{"status file unreadable", func(s *snapshot, _ *want) { s.statusErr = fmt.Errorf("boom") }, false},
		{"other status", func(s *snapshot, _ *want) { s.status.Condition.Status = corev1.ConditionTrue }, false},
		{"other reason", func(s *snapshot, _ *want) { s.status.Condition.Reason = "crash loop detected" }, false},
		{"other message", func(s *snapshot, _ *want) { s.status.Condition.Message = "using current (default)" }, false},
		{"current still local", func(s *snapshot, _ *want) { s.state.Current = pointerView{} }, false},
		{"last-known-good differs", func(s *snapshot, _ *want) { s.state.LastKnownGood = pointerView{} }, false},
		{"last-known-good ignored", func(s *snapshot, w *want) { s.state.LastKnownGood = pointerView{}; w.anyLKG = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, w := match(), w
			tc.mutate(&s, &w)
			if got := w.matches(s); got != tc.want {
				t.Errorf("matches = %v, want %v (want %s; saw %s)", got, tc.want, w, s.describe())
			}
		})
	}
}

func remoteSource(uid string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "cm-" + uid, UID: types.UID(uid), ResourceVersion: "rv-" + uid, KubeletConfigKey: "kubelet",
	}}
}
