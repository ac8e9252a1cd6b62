package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// testConfig is a tiny component config for facade tests.
type testConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Value      int    `json:"value"`
	Name       string `json:"name,omitempty"`
}

type testProfile struct{}

func (testProfile) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "test.dynconfig.io", Version: "v1", Kind: "TestConfig"}
}
func (testProfile) PayloadKey() string { return "config" }
func (testProfile) Default(c *testConfig) {
	if c.Name == "" {
		c.Name = "default"
	}
}
func (testProfile) Validate(c *testConfig) field.ErrorList {
	if c.Value < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("value"), c.Value, "must be non-negative")}
	}
	return nil
}

// testLayers decodes one document strictly; the init file is a plain file.
type testLayers struct{ initFile string }

func (l testLayers) HasInitConfig() bool { return l.initFile != "" }
func (l testLayers) Build(base *Document) (*testConfig, error) {
	c := &testConfig{}
	if base == nil && l.initFile != "" {
		data, err := os.ReadFile(l.initFile)
		if err != nil {
			return nil, err
		}
		base = &Document{Name: l.initFile, Data: data}
	}
	if base != nil {
		if err := yaml.UnmarshalStrict(base.Data, c); err != nil {
			return nil, &lkg.ConfigError{Stage: lkg.StageDecode, Err: fmt.Errorf("%s: %w", base.Name, err)}
		}
	}
	testProfile{}.Default(c)
	if errs := (testProfile{}).Validate(c); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return c, nil
}

// recordingReporter keeps every report: the condition part in reports (so
// tests compare conditions with ==) and the ConfigStatus in configs.
type recordingReporter struct {
	mu      sync.Mutex
	reports []status.Report
	configs []*nodeapi.ConfigStatus
}

func (r *recordingReporter) ReportConfigOK(_ context.Context, rep status.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.configs = append(r.configs, rep.Config)
	rep.Config = nil
	r.reports = append(r.reports, rep)
	return nil
}

// lastConfig is the ConfigStatus of the last report.
func (r *recordingReporter) lastConfig() *nodeapi.ConfigStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.configs) == 0 {
		return nil
	}
	return r.configs[len(r.configs)-1]
}

func (r *recordingReporter) last() status.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) == 0 {
		return status.Report{}
	}
	return r.reports[len(r.reports)-1]
}

// node is a simulated node: a state dir, a directory source and a clock
// shared by successive "processes" (Controllers).
type node struct {
	t        *testing.T
	stateDir string
	srcDir   string
	initFile string
	clock    *clocktesting.FakeClock
	reporter *recordingReporter
	restarts atomic.Int32
}

func newNode(t *testing.T, initConfig string) *node {
	n := &node{t: t, stateDir: filepath.Join(t.TempDir(), "state"), srcDir: t.TempDir(),
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)), reporter: &recordingReporter{}}
	if initConfig != "" {
		n.initFile = filepath.Join(t.TempDir(), "init.yaml")
		n.write(n.initFile, initConfig)
	}
	return n
}

func (n *node) write(path, content string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	// Atomically, as source.Dir asks: a running Controller may read the
	// file at any moment, and a half-written assignment is a different one.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		n.t.Fatal(err)
	}
}

// configMap writes a ConfigMap into the source dir.
func (n *node) configMap(name, uid, payload string, annotations map[string]string) {
	ann := ""
	for k, v := range annotations {
		ann += fmt.Sprintf("    %s: %q\n", k, v)
	}
	if ann != "" {
		ann = "  annotations:\n" + ann
	}
	n.write(filepath.Join(n.srcDir, source.ConfigMapsDir, name+".yaml"), fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: kube-system\n  name: %s\n  uid: %s\n%sdata:\n  config: |\n    %s\n",
		name, uid, ann, payload))
}

func (n *node) assign(name, uid string) {
	if name == "" {
		n.write(filepath.Join(n.srcDir, source.AssignmentFile), "")
		return
	}
	n.write(filepath.Join(n.srcDir, source.AssignmentFile),
		fmt.Sprintf("configMap: {namespace: kube-system, name: %s, uid: %s}\n", name, uid))
}

func (n *node) controller(mutate ...func(*Options[testConfig])) *Controller[testConfig] {
	n.t.Helper()
	opts := n.options(mutate...)
	c, err := New(opts)
	if err != nil {
		n.t.Fatal(err)
	}
	return c
}

// options returns the Options of this node's controllers.
func (n *node) options(mutate ...func(*Options[testConfig])) Options[testConfig] {
	n.t.Helper()
	src, err := source.NewDir(source.DirOptions{Path: n.srcDir, PayloadKey: "config", PollInterval: 5 * time.Millisecond})
	if err != nil {
		n.t.Fatal(err)
	}
	opts := Options[testConfig]{
		Profile: testProfile{}, Layers: testLayers{initFile: n.initFile},
		StateDir: n.stateDir, ComponentVersion: "v1.0.0",
		Remote: src, Reporter: n.reporter, Clock: n.clock,
		Restart:      func() { n.restarts.Add(1) },
		DefaultTrial: components.Trial{Duration: time.Minute, CrashLoopThreshold: 2},
	}
	for _, m := range mutate {
		m(&opts)
	}
	return opts
}

// ctx returns a context whose logger writes through the test (ktesting):
// a failure shows the Controller's own logs, a pass prints none.
func (n *node) ctx() context.Context {
	_, ctx := ktesting.NewTestContext(n.t)
	return ctx
}

// runTrial runs one process for a full trial of the config it starts on,
// so that it becomes last-known-good, then stops it.
func (n *node) runTrial() {
	n.t.Helper()
	r, _ := n.run(n.controller())
	waitFor(n.t, n.clock.HasWaiters)
	n.clock.Step(2 * time.Minute) // the default trial in these tests is 1m
	waitFor(n.t, func() bool {
		p, err := r.c.store.LastKnownGood()
		c, cerr := r.c.store.Current()
		return err == nil && cerr == nil && lkg.Same(p.Source, c.Source)
	})
	r.stop(n.t)
}

// start simulates one process start: Bootstrap, then stop (release lock).
func (n *node) start(mutate ...func(*Options[testConfig])) (*testConfig, status.Report) {
	n.t.Helper()
	c := n.controller(mutate...)
	cfg, err := c.Bootstrap(n.ctx())
	if err != nil {
		n.t.Fatalf("Bootstrap: %v", err)
	}
	if err := c.Close(); err != nil {
		n.t.Fatal(err)
	}
	return cfg, n.reporter.last()
}

func TestBootstrapScenarios(t *testing.T) {
	const good = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`
	const good2 = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 2}`
	const invalid = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`
	const undecodable = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, valeu: 1}`

	t.Run("nil assignment runs local init", func(t *testing.T) {
		n := newNode(t, `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 5}`)
		cfg, r := n.start()
		want := status.Report{Status: "True", Message: "using current (init)", Reason: status.ReasonLocalInit}
		if cfg.Value != 5 || r != want {
			t.Fatalf("cfg %+v report %+v; want value 5 and %+v", cfg, r, want)
		}
	})
	t.Run("nil assignment, no init file, runs defaults", func(t *testing.T) {
		n := newNode(t, "")
		cfg, r := n.start()
		if cfg.Name != "default" || r.Message != "using current (default)" || r.Reason != status.ReasonLocalDefault {
			t.Fatalf("cfg %+v report %+v", cfg, r)
		}
	})
	t.Run("invalid local config refuses to start", func(t *testing.T) {
		n := newNode(t, invalid)
		_, err := n.controller().Bootstrap(n.ctx())
		if err == nil || !errors.Is(err, err) || !contains(err.Error(), "invalid local config") || !contains(err.Error(), "value") {
			t.Fatalf("Bootstrap error = %v; want invalid local config naming the field", err)
		}
	})
	t.Run("correct assignment runs current", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, nil)
		n.assign("a", "uid-a")
		cfg, r := n.start()
		if cfg.Value != 1 || r.Status != "True" || r.Message != "using current (UID: uid-a)" || r.Reason != "all checks passed" {
			t.Fatalf("cfg %+v report %+v", cfg, r)
		}
	})
	for _, tc := range []struct{ name, assignment, cause string }{
		{"all nil", "{}", "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{"missing uid", "configMap: {namespace: kube-system, name: a}", "missing: uid"},
		{"wrong uid", "configMap: {namespace: kube-system, name: a, uid: nope}", "do not refer to the same object"},
		{"absent", "configMap: {namespace: kube-system, name: zzz, uid: u}", "does not exist"},
		{"missing key", "configMap: {namespace: kube-system, name: a, uid: uid-a, kubeletConfigKey: k}", `has no key "k"`},
	} {
		t.Run("invalid assignment "+tc.name+" is Unknown on last-known-good", func(t *testing.T) {
			n := newNode(t, "")
			n.configMap("a", "uid-a", good, nil)
			n.write(filepath.Join(n.srcDir, source.AssignmentFile), tc.assignment)
			cfg, r := n.start()
			if cfg.Value != 0 || r.Status != "Unknown" || r.Message != "using last-known-good (default)" ||
				!contains(r.Reason, "failed to sync, desired config unclear, cause: ") || !contains(r.Reason, tc.cause) {
				t.Fatalf("cfg %+v report %+v", cfg, r)
			}
		})
	}
	t.Run("validation failure is False, marked bad, on last-known-good", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, nil)
		n.assign("a", "uid-a")
		n.runTrial() // a runs a full trial: last-known-good
		n.configMap("b", "uid-b", invalid, nil)
		n.assign("b", "uid-b")
		cfg, r := n.start()
		want := status.Report{Status: "False", Message: "using last known good: (UID: uid-a)", Reason: "failed to validate current (UID: uid-b)"}
		if cfg.Value != 1 || r != want {
			t.Fatalf("cfg %+v report %+v; want %+v", cfg, r, want)
		}
		// The mark persists: the next start does not try b again.
		_, r = n.start()
		if r != want {
			t.Fatalf("second start report %+v", r)
		}
	})
	t.Run("decode failure is False on local", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", undecodable, nil)
		n.assign("a", "uid-a")
		cfg, r := n.start()
		want := status.Report{Status: "False", Message: "using last-known-good (default)", Reason: "failed to decode current (UID: uid-a)"}
		if cfg.Value != 0 || r != want {
			t.Fatalf("cfg %+v report %+v; want %+v", cfg, r, want)
		}
	})
	t.Run("crash loop after threshold+1 startups rolls back", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, map[string]string{components.CrashLoopThresholdAnnotation: "2", components.TrialDurationAnnotation: "10m"})
		n.assign("a", "uid-a")
		// The process that adopts the config at startup started before it
		// was set; the restarts after it count. Threshold 2 is exceeded by
		// the third.
		if _, r := n.start(); r.Status != "True" {
			t.Fatalf("adopting startup: %+v", r)
		}
		for i := 1; i <= 2; i++ {
			n.clock.Step(time.Second)
			if _, r := n.start(); r.Status != "True" {
				t.Fatalf("startup %d: %+v", i, r)
			}
		}
		n.clock.Step(time.Second)
		_, r := n.start()
		want := status.Report{Status: "False", Message: "using last-known-good (default)", Reason: "crash loop detected with current (UID: uid-a)"}
		if r != want {
			t.Fatalf("third startup: %+v; want %+v", r, want)
		}
	})
	t.Run("restarts further apart than the trial are not a crash loop", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, map[string]string{components.CrashLoopThresholdAnnotation: "1", components.TrialDurationAnnotation: "1m"})
		n.assign("a", "uid-a")
		n.start()
		for i := 0; i < 3; i++ {
			n.clock.Step(2 * time.Minute)
			if _, r := n.start(); r.Status != "True" {
				t.Fatalf("restart %d, two minutes after the last: %+v", i, r)
			}
		}
	})
	t.Run("crash restarts long after the first run still count", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, map[string]string{components.CrashLoopThresholdAnnotation: "1", components.TrialDurationAnnotation: "1m"})
		n.assign("a", "uid-a")
		n.start()
		n.clock.Step(time.Hour) // down for an hour; a never ran a full trial
		n.start()
		n.clock.Step(time.Second)
		if _, r := n.start(); r.Reason != "crash loop detected with current (UID: uid-a)" {
			t.Fatalf("two restarts within a trial, an hour after the first run: %+v; want a crash loop", r)
		}
	})
	t.Run("empty assignment resets to local", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, nil)
		n.assign("a", "uid-a")
		n.runTrial()
		n.assign("", "")
		r, cfg := n.run(n.controller()) // Run collects the garbage
		r.stop(t)
		if rep := n.reporter.last(); cfg.Value != 0 || rep.Message != "using current (default)" {
			t.Fatalf("cfg %+v report %+v", cfg, rep)
		}
		s, err := checkpoint.Open(checkpoint.Options{Dir: n.stateDir, ComponentVersion: "v1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if p, err := s.LastKnownGood(); err != nil || p.Source != nil {
			t.Fatalf("last-known-good %+v, %v; want local", p, err)
		}
		if keys, _ := s.List(); len(keys) != 0 {
			t.Fatalf("checkpoints left after reset: %v", keys)
		}
	})
	t.Run("promotion after the trial", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("a", "uid-a", good, nil)
		n.assign("a", "uid-a")
		n.start()
		n.configMap("b", "uid-b", good2, nil)
		n.assign("b", "uid-b")
		n.clock.Step(30 * time.Second)
		n.start() // b current, in trial; LKG still local
		n.configMap("c", "uid-c", invalid, nil)
		n.assign("c", "uid-c")
		cfg, r := n.start()
		if cfg.Value != 0 || r.Message != "using last-known-good (default)" {
			t.Fatalf("b was promoted before its trial ended: cfg %+v report %+v", cfg, r)
		}
	})
}

func TestRunAdoptsNewAssignmentAndPromotes(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	n.assign("a", "uid-a")
	c := n.controller()
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(n.ctx())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()

	// The trial (1m) ends: current becomes last-known-good.
	waitFor(t, n.clock.HasWaiters)
	n.clock.Step(2 * time.Minute)
	waitFor(t, func() bool {
		p, err := c.store.LastKnownGood()
		return err == nil && lkg.Key(p.Source) != ""
	})

	// A live sync failure only changes the condition.
	n.write(filepath.Join(n.srcDir, source.AssignmentFile), "{}")
	n.clock.Step(2 * time.Minute) // resync
	waitFor(t, func() bool { return n.reporter.last().Status == corev1.ConditionUnknown })
	if n.restarts.Load() != 0 {
		t.Fatalf("restarted %d times on a sync failure", n.restarts.Load())
	}
	if r := n.reporter.last(); r.Message != "using current (UID: uid-a)" {
		t.Fatalf("sync failure changed the message: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestNewValidatesOptions(t *testing.T) {
	_, err := New(Options[testConfig]{StartupSyncTimeout: -1})
	if err == nil {
		t.Fatal("want error")
	}
	for _, name := range []string{"Options.Profile", "Options.StateDir", "Options.ComponentVersion", "Options.StartupSyncTimeout"} {
		if !contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

// TestRunSyncsOnNotification: a change reported by the source is acted on
// at once, not at the next resync.
func TestRunSyncsOnNotification(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	var restarts atomic.Int32
	c := n.controller(func(o *Options[testConfig]) {
		src, err := source.NewDir(source.DirOptions{Path: n.srcDir, PayloadKey: "config", PollInterval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		o.Remote = src
		o.ResyncPeriod = time.Hour
		o.Restart = func() { restarts.Add(1) }
	})
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(n.ctx())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	n.assign("a", "uid-a") // the fake clock never moves: only the notification can trigger the sync
	waitFor(t, func() bool { return restarts.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRunReportsOnlyChanges: a resync that finds nothing new sends no
// report; a sync failure and the recovery from it each send one.
func TestRunReportsOnlyChanges(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	n.assign("a", "uid-a")
	c := n.controller()
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	count := func() int { n.reporter.mu.Lock(); defer n.reporter.mu.Unlock(); return len(n.reporter.reports) }
	ctx, cancel := context.WithCancel(n.ctx())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	for i := 0; i < 3; i++ { // resyncs with nothing new
		waitFor(t, n.clock.HasWaiters)
		n.clock.Step(2 * time.Minute)
	}
	waitFor(t, n.clock.HasWaiters)
	// Bootstrap's report (in trial) and the promotion's (the phase moved;
	// the condition did not): one write per transition, none per resync.
	if got := count(); got != 2 {
		t.Fatalf("%d reports after idle resyncs, want Bootstrap's and the promotion's", got)
	}
	n.reporter.mu.Lock()
	phases := []nodeapi.ConfigPhase{n.reporter.configs[0].Phase, n.reporter.configs[1].Phase}
	n.reporter.mu.Unlock()
	if phases[0] != nodeapi.PhaseTrial || phases[1] != nodeapi.PhasePromoted {
		t.Fatalf("phases %v, want [Trial Promoted]", phases)
	}
	n.write(filepath.Join(n.srcDir, source.AssignmentFile), "{}")
	waitFor(t, func() bool { return count() == 3 })
	n.assign("a", "uid-a")
	waitFor(t, func() bool { return count() == 4 && n.reporter.last().Status == corev1.ConditionTrue })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
