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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source/sourcetest"
	"github.com/dynconfig/dynconfig/status"
)

// fakeSystemd plays systemd for a component in another "process": before
// every start it runs the pre-start role (a fresh Controller), then runs
// the component on the config the role handed over. A component whose
// config has value 666 crashes at once; systemd starts it again
// (Restart=always). Restart asks for a restart as RestartUnit does.
type fakeSystemd struct {
	t        *testing.T
	dir      string
	restartC chan struct{}

	mu     sync.Mutex
	starts []Chosen // what each start ran
}

func (s *fakeSystemd) preStart(ctx context.Context) {
	var got *Chosen
	c, err := New(Options[testConfig]{
		Profile: testProfile{}, Layers: testLayers{}, StateDir: s.dir, ComponentVersion: "v1",
		External: &External{Role: PreStart, Apply: func(_ context.Context, ch Chosen) error { got = &ch; return nil }},
	})
	if err != nil {
		s.t.Error(err)
		return
	}
	defer c.Close()
	if _, err := c.Bootstrap(ctx); err != nil {
		s.t.Errorf("pre-start: %v", err)
		return
	}
	s.mu.Lock()
	s.starts = append(s.starts, *got)
	s.mu.Unlock()
}

func (s *fakeSystemd) Restart(context.Context) error {
	select {
	case s.restartC <- struct{}{}:
	default:
	}
	return nil
}

// run starts the component and keeps it running until ctx ends.
func (s *fakeSystemd) run(ctx context.Context) {
	for ctx.Err() == nil {
		s.preStart(ctx)
		s.mu.Lock()
		last := s.starts[len(s.starts)-1]
		s.mu.Unlock()
		crash := last.Document != nil && strings.Contains(string(last.Document.Data), "value: 666")
		wait := time.Hour
		if crash {
			wait = 30 * time.Millisecond // RestartSec
		}
		select {
		case <-ctx.Done():
			return
		case <-s.restartC:
		case <-time.After(wait):
		}
	}
}

func (s *fakeSystemd) started() []Chosen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Chosen(nil), s.starts...)
}

func waitExt(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func valueOf(ch Chosen) string {
	if ch.Document == nil {
		return "local"
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.Split(string(ch.Document.Data), "\n")[2], "value: "))
}

// TestExternalLifecycle runs both roles against a component "process"
// under a fake systemd: a good config costs one restart and is promoted
// after its trial once healthy; a config that crashes the component is
// rolled back by the pre-start role after exactly threshold+1 starts on
// it, and the run role reports it; the component's starts, not the
// Controllers', are what is counted.
func TestExternalLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock lifecycle")
	}
	logger, ctx := ktesting.NewTestContext(t)
	_ = logger
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	sd := &fakeSystemd{t: t, dir: dir, restartC: make(chan struct{}, 1)}
	remote := sourcetest.NewFake("config")
	rep := &recordingReporter{}
	var healthy sync.Mutex
	healthy.Lock() // the component is not healthy until unlocked
	isHealthy := func(context.Context) error {
		if healthy.TryLock() {
			healthy.Unlock()
			return nil
		}
		return errors.New("not yet")
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); sd.run(ctx) }()
	waitExt(t, "the first start", 5*time.Second, func() bool { return len(sd.started()) == 1 })
	go func() {
		defer wg.Done()
		err := RunExternal(ctx, Options[testConfig]{
			Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1",
			Remote: remote, Reporter: rep, ResyncPeriod: time.Hour,
			External: &External{Role: Follow, Restarter: sd, Healthy: isHealthy, PollInterval: 20 * time.Millisecond, StartTimeout: 5 * time.Second},
		})
		if err != nil {
			t.Error(err)
		}
	}()
	defer wg.Wait()
	defer cancel()

	put := func(name, value string, threshold int) *corev1.NodeConfigSource {
		cm := remote.PutConfigMap(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{
				components.TrialDurationAnnotation:      "1s",
				components.CrashLoopThresholdAnnotation: fmt.Sprint(threshold),
			}},
			Data: map[string]string{"config": "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nvalue: " + value + "\n"},
		})
		return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: name, UID: cm.UID, KubeletConfigKey: "config"}}
	}
	lkgOf := func() string {
		snap, err := checkpoint.Inspect(dir)
		if err != nil || snap.LastKnownGood.Pointer.Source == nil {
			return "local"
		}
		return snap.LastKnownGood.Pointer.Source.ConfigMap.Name
	}

	// A good config: one restart, then promoted only once healthy.
	remote.Assign(put("good", "7", 3))
	waitExt(t, "a start on the good config", 5*time.Second, func() bool { return len(sd.started()) == 2 })
	if got := valueOf(sd.started()[1]); got != "7" {
		t.Fatalf("second start ran %s, want 7", got)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := lkgOf(); got != "local" {
		t.Fatalf("promoted to %s before the component was healthy", got)
	}
	healthy.Unlock()
	waitExt(t, "promotion", 5*time.Second, func() bool { return lkgOf() == "good" })
	waitExt(t, "phase promoted", 5*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhasePromoted
	})
	if n := len(sd.started()); n != 2 {
		t.Fatalf("%d starts for one good config, want 2", n)
	}

	// A crashing config, threshold 2: three starts on it, then the fourth
	// start is the pre-start role's rollback.
	remote.Assign(put("crash", "666", 2))
	waitExt(t, "the rollback", 10*time.Second, func() bool {
		s := sd.started()
		return len(s) > 2 && s[len(s)-1].UsingLastKnownGood
	})
	var seq []string
	for _, ch := range sd.started()[2:] {
		seq = append(seq, valueOf(ch))
	}
	if want := []string{"666", "666", "666", "7"}; strings.Join(seq, ",") != strings.Join(want, ",") {
		t.Fatalf("starts after the crashing config: %v, want %v (threshold 2: three starts, then last-known-good)", seq, want)
	}
	waitExt(t, "ConfigOK False", 5*time.Second, func() bool {
		r := rep.last()
		return r.Status == corev1.ConditionFalse && strings.Contains(r.Reason, "crash loop")
	})
	time.Sleep(300 * time.Millisecond)
	if n := len(sd.started()); n != 6 {
		t.Fatalf("%d starts, want 6: the component keeps running last-known-good", n)
	}
}

// TestExternalPreStartLockBounded: a pre-start role that cannot take the
// state dir gives up after LockTimeout, with an error that says so, and
// never blocks the start for longer.
func TestExternalPreStartLockBounded(t *testing.T) {
	dir := t.TempDir()
	held, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c, err := New(Options[testConfig]{
		Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1",
		External: &External{Role: PreStart, LockTimeout: 200 * time.Millisecond, Apply: func(context.Context, Chosen) error { return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Bootstrap(context.Background())
	took := time.Since(start)
	if !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("Bootstrap with the dir held: %v, want ErrLocked", err)
	}
	if took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %v, want about the 200ms LockTimeout", took)
	}
	// Released: the next pre-start takes it and records the start.
	held.Close()
	c2, _ := New(Options[testConfig]{
		Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1",
		External: &External{Role: PreStart, Apply: func(context.Context, Chosen) error { return nil }},
	})
	if _, err := c2.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if s := lastStartup(dir, "v1"); s.IsZero() {
		t.Fatal("no start recorded")
	}
}

// TestExternalFollowWaitsForLock: the run role's startup waits while the
// pre-start role holds the dir and goes on once it is released; it never
// records a start of its own.
func TestExternalFollowWaitsForLock(t *testing.T) {
	dir := t.TempDir()
	held, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options[testConfig]{
		Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1",
		Remote: sourcetest.NewFake("config"),
		External: &External{Role: Follow, Restarter: RestarterFunc(func(context.Context) error {
			return errors.New("no restart expected")
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	start := time.Now()
	if _, err := c.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("Bootstrap returned after %v while the dir was held for 300ms", took)
	}
	// Released after Bootstrap: a pre-start role can take it now.
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1"})
	if err != nil {
		t.Fatalf("the run role kept the state dir after Bootstrap: %v", err)
	}
	defer s.Close()
	if ts, _ := s.Startups(); len(ts) != 0 {
		t.Fatalf("the run role recorded %d starts; only the pre-start role may", len(ts))
	}
	c.Close()
}

// TestExternalFollowRestartsForCurrentThatNeverRan: a run role that crashed
// between making a config current and restarting the component left the
// component on its old config. The next run role sees that current never
// ran (no pre-start role recorded its first run) and restarts the
// component for it, instead of reporting — and later promoting — a config
// the component never ran.
func TestExternalFollowRestartsForCurrentThatNeverRan(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	sd := &fakeSystemd{t: t, dir: dir, restartC: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); sd.run(ctx) }()
	waitExt(t, "the first start", 5*time.Second, func() bool { return len(sd.started()) == 1 })

	// What the crashed run role left: the new config checkpointed and
	// current, the component not restarted.
	remote := sourcetest.NewFake("config")
	cm := remote.PutConfigMap(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"},
		Data:       map[string]string{"config": "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nvalue: 5\n"},
	})
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "new", UID: cm.UID, KubeletConfigKey: "config"}}
	remote.Assign(src)
	a, err := remote.Assigned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(a.ConfigMap); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrent(a.Source); err != nil {
		t.Fatal(err)
	}
	s.Close()

	rep := &recordingReporter{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = RunExternal(ctx, Options[testConfig]{
			Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1",
			Remote: remote, Reporter: rep, ResyncPeriod: time.Hour,
			External: &External{Role: Follow, Restarter: sd, PollInterval: 20 * time.Millisecond, StartTimeout: 5 * time.Second},
		})
	}()
	waitExt(t, "a start on current", 5*time.Second, func() bool { return len(sd.started()) == 2 })
	if got := valueOf(sd.started()[1]); got != "5" {
		t.Fatalf("the restart ran %s, want current (value 5)", got)
	}
	waitExt(t, "ConfigOK on current", 5*time.Second, func() bool {
		r := rep.last()
		return r.Status == corev1.ConditionTrue && strings.Contains(r.Message, string(cm.UID))
	})
	time.Sleep(200 * time.Millisecond)
	if n := len(sd.started()); n != 2 {
		t.Fatalf("%d starts, want 2: one restart for current, no more", n)
	}
}

// TestExternalRollbackCheckReadsTheStateDir: while a config is on trial,
// the run role checks its rollback target (the last-known-good) from the
// state dir, which it holds only for one step at a time. The check must
// take the dir for its read: on a dir it had released it read "checkpoint
// store is closed" and reported a healthy last-known-good unusable, in
// ConfigOK and as a Warning Event, during every trial. A damaged one is
// still found.
func TestExternalRollbackCheckReadsTheStateDir(t *testing.T) {
	ctx, dir, remote, rep := lifecycleTest(t)
	events := &recordedEvents{}
	followUnderSystemd(t, ctx, dir, Options[testConfig]{Remote: remote, Reporter: rep, Events: events, ResyncPeriod: 50 * time.Millisecond,
		External: &External{Healthy: func(context.Context) error { return nil }}})
	put := func(name, value, trial string) *corev1.ConfigMap {
		cm := remote.PutConfigMap(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{components.TrialDurationAnnotation: trial}},
			Data:       map[string]string{"config": "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nvalue: " + value + "\n"},
		})
		remote.Assign(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: name, UID: cm.UID, KubeletConfigKey: "config"}})
		return cm
	}
	good := put("good", "7", "200ms")
	waitExt(t, "the good config promoted", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhasePromoted && c.Active != nil && c.Active.ConfigMap.UID == good.UID
	})
	next := put("next", "8", "1h")
	waitExt(t, "ConfigOK True on the next config, on trial", 10*time.Second, func() bool {
		r, c := rep.last(), rep.lastConfig()
		return r.Status == corev1.ConditionTrue && strings.Contains(r.Message, string(next.UID)) && c != nil && c.Phase == nodeapi.PhaseTrial
	})
	// Let Run wake on a few resyncs: each one checks the rollback target.
	reports := len(rep.reportsSoFar())
	time.Sleep(300 * time.Millisecond)
	for _, r := range rep.reportsSoFar() {
		if strings.Contains(r.Message, "unusable") || strings.Contains(r.Reason, "unusable") {
			t.Fatalf("ConfigOK says the healthy last-known-good is unusable: %+v (%d reports)", r, reports)
		}
	}
	for _, e := range events.list() {
		if strings.HasPrefix(e, status.EventReasonLastKnownGoodUnusable) {
			t.Fatalf("a Warning Event says the healthy last-known-good is unusable: %s", e)
		}
	}
	// The check still runs: a damaged last-known-good is found.
	paths, _ := filepath.Glob(filepath.Join(dir, "checkpoints", string(good.UID)+"_*"))
	if len(paths) != 1 {
		t.Fatalf("checkpoint files of the good config: %v", paths)
	}
	if err := os.WriteFile(paths[0], []byte("bit rot"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitExt(t, "the damaged last-known-good reported", 10*time.Second, func() bool {
		return strings.Contains(rep.last().Message, fmt.Sprintf("last-known-good (UID: %s) is unusable", good.UID))
	})
}

// followUnderSystemd starts the fake systemd in dir and, once the component
// started, the run role with opts (StateDir, Restarter, Profile, Layers,
// ComponentVersion, Role and the short polls set here), both until the
// test ends. It returns the fake systemd.
func followUnderSystemd(t *testing.T, ctx context.Context, dir string, opts Options[testConfig]) *fakeSystemd {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	sd := &fakeSystemd{t: t, dir: dir, restartC: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	wg.Add(1)
	go func() { defer wg.Done(); sd.run(ctx) }()
	waitExt(t, "the first start", 5*time.Second, func() bool { return len(sd.started()) == 1 })
	opts.Profile, opts.Layers, opts.StateDir, opts.ComponentVersion = testProfile{}, testLayers{}, dir, "v1"
	opts.External.Role, opts.External.Restarter = Follow, sd
	opts.External.PollInterval, opts.External.StartTimeout = 20*time.Millisecond, 5*time.Second
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := RunExternal(ctx, opts); err != nil {
			t.Error(err)
		}
	}()
	return sd
}

// reportsSoFar returns every report made so far.
func (r *recordingReporter) reportsSoFar() []status.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]status.Report(nil), r.reports...)
}

// TestExternalPromotionHeld: the run role promotes a config whose trial is
// over only once External.PromotionHeld lets it (a rollout's gates passed
// the Node): held, the config runs on with its trial over and the
// last-known-good unchanged; released, it is promoted.
func TestExternalPromotionHeld(t *testing.T) {
	ctx, dir, remote, rep := lifecycleTest(t)
	var held, asked atomic.Bool
	held.Store(true)
	followUnderSystemd(t, ctx, dir, Options[testConfig]{Remote: remote, Reporter: rep, ResyncPeriod: time.Hour,
		External: &External{Healthy: func(context.Context) error { return nil },
			PromotionHeld: func(context.Context) bool { asked.Store(true); return held.Load() }}})
	cm := remote.PutConfigMap(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gated", Annotations: map[string]string{components.TrialDurationAnnotation: "100ms"}},
		Data:       map[string]string{"config": "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nvalue: 7\n"},
	})
	remote.Assign(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "gated", UID: cm.UID, KubeletConfigKey: "config"}})
	waitExt(t, "the trial over", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Active != nil && c.Active.ConfigMap.UID == cm.UID &&
			(c.Phase == nodeapi.PhasePromoted || c.TrialEnds != nil && time.Now().After(c.TrialEnds.Time))
	})
	// Held for many polls: still on trial, last-known-good still local.
	time.Sleep(300 * time.Millisecond)
	snap, err := checkpoint.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if src := snap.LastKnownGood.Pointer.Source; src != nil {
		t.Fatalf("promoted to %+v while held", src)
	}
	if c := rep.lastConfig(); c == nil || c.Phase != nodeapi.PhaseTrial || !asked.Load() {
		t.Fatalf("status %+v while held (hold asked: %v), want phase Trial", c, asked.Load())
	}
	held.Store(false)
	waitExt(t, "the promotion once released", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhasePromoted && c.LastKnownGood != nil && c.LastKnownGood.ConfigMap.UID == cm.UID
	})
}

// lifecycleTest starts a real-clock test of the run role (skipped with
// -short): its context (60 s, ended with the test), a state dir, a fake
// cluster source and a recording reporter.
func lifecycleTest(t *testing.T) (context.Context, string, *sourcetest.Fake, *recordingReporter) {
	t.Helper()
	if testing.Short() {
		t.Skip("real-clock lifecycle")
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	return ctx, t.TempDir(), sourcetest.NewFake("config"), &recordingReporter{}
}
