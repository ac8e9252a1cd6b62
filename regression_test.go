package dynconfig

// Regression tests for the lifecycle defects of issue 9. Each test drives
// the Controller only through its public lifecycle (New, Bootstrap, Run,
// MarkHealthy, Close) over a directory source and a fake clock, so it runs
// unchanged against the code that had the defect.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/internal/damage"
	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

const (
	goodValue1 = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`
	goodValue2 = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 2}`
)

// running is a Controller whose Run goroutine is going.
type running struct {
	c      *Controller[testConfig]
	cancel context.CancelFunc
	done   chan error
}

// run bootstraps c and starts Run.
func (n *node) run(c *Controller[testConfig]) (*running, *testConfig) {
	n.t.Helper()
	cfg, err := c.Bootstrap(n.ctx())
	if err != nil {
		n.t.Fatalf("Bootstrap: %v", err)
	}
	ctx, cancel := context.WithCancel(n.ctx())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	return r, cfg
}

// stop ends Run and releases the state dir.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
}

// pointers reads current and last-known-good from a closed state dir.
func (n *node) pointers() (cur, lastKnownGood *corev1.NodeConfigSource) {
	n.t.Helper()
	c, l := n.readPointers()
	return c.Source, l.Source
}

// readPointers reads the current and last-known-good pointers, whole,
// from a closed state dir.
func (n *node) readPointers() (cur, lastKnownGood checkpoint.Pointer) {
	n.t.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: n.stateDir, ComponentVersion: "v1.0.0"})
	if err != nil {
		n.t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Current()
	if err != nil {
		n.t.Fatal(err)
	}
	l, err := s.LastKnownGood()
	if err != nil {
		n.t.Fatal(err)
	}
	return c, l
}

func uidOfSource(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return ""
	}
	return string(src.ConfigMap.UID)
}

// adoptByRestart runs a process that finds the assignment name/uid while it
// runs, and exits through the restart hook to adopt it.
func (n *node) adoptByRestart(name, uid string) {
	n.t.Helper()
	before := n.restarts.Load()
	r, _ := n.run(n.controller())
	waitFor(n.t, n.clock.HasWaiters)
	n.assign(name, uid)
	waitFor(n.t, func() bool { return n.restarts.Load() > before })
	r.stop(n.t)
}

// Defect 1: a config is promoted only after the component ran it for a full
// trial, never because the component was down longer than the trial.
func TestRegressionNoPromotionWithoutRunning(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.assign("a", "uid-a")
	n.start()                      // adopts a and stops at once
	n.clock.Step(10 * time.Minute) // down for ten trials
	n.start()                      // first start after the outage: zero uptime on a
	if _, l := n.pointers(); l != nil {
		t.Fatalf("last-known-good is %s after zero seconds of uptime on it; want local", uidOfSource(l))
	}
}

// Defect 2: a Reload that fails is not success: the config is marked bad,
// the last-known-good is reloaded and ConfigOK is False.
func TestRegressionFailedReloadIsNotSuccess(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.configMap("b", "uid-b", goodValue2, nil)
	var mu sync.Mutex
	var reloaded []int
	c := n.controller(func(o *Options[testConfig]) {
		o.Reload = func(_ context.Context, cfg *testConfig) error {
			mu.Lock()
			defer mu.Unlock()
			reloaded = append(reloaded, cfg.Value)
			if cfg.Value == 2 {
				return errors.New("cannot apply value 2")
			}
			return nil
		}
	})
	r, _ := n.run(c)
	defer r.stop(t)
	waitFor(t, n.clock.HasWaiters)
	n.assign("b", "uid-b")
	want := status.Report{Status: corev1.ConditionFalse, Message: "using last-known-good (default)", Reason: "failed to apply current (UID: uid-b)"}
	waitFor(t, func() bool { return n.reporter.last() == want })
	// Past the trial, b must not become last-known-good.
	n.clock.Step(5 * time.Minute)
	time.Sleep(50 * time.Millisecond)
	if p, err := c.store.LastKnownGood(); err != nil || p.Source != nil {
		t.Fatalf("last-known-good = %+v, %v; want local", p, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reloaded) != 2 || reloaded[0] != 2 || reloaded[1] != 0 {
		t.Fatalf("reloads %v; want b (2), then the last-known-good (0)", reloaded)
	}
}

// Defect 3: MarkHealthy applies to the config that runs; a config reloaded
// later needs its own before it is promoted.
func TestRegressionHealthGatePerConfig(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.configMap("b", "uid-b", goodValue2, nil)
	n.assign("a", "uid-a")
	c := n.controller(func(o *Options[testConfig]) {
		o.RequireHealthy = true
		o.Reload = func(context.Context, *testConfig) error { return nil }
	})
	r, _ := n.run(c)
	defer r.stop(t)
	c.MarkHealthy()
	waitFor(t, n.clock.HasWaiters)
	n.clock.Step(2 * time.Minute)
	waitFor(t, func() bool {
		p, err := c.store.LastKnownGood()
		return err == nil && uidOfSource(p.Source) == "uid-a"
	})
	n.assign("b", "uid-b")
	waitFor(t, func() bool { return n.reporter.last().Message == "using current (UID: uid-b)" })
	n.clock.Step(2 * time.Minute)
	time.Sleep(50 * time.Millisecond)
	if p, _ := c.store.LastKnownGood(); uidOfSource(p.Source) != "uid-a" {
		t.Fatalf("b promoted without MarkHealthy for it: last-known-good %s", uidOfSource(p.Source))
	}
	c.MarkHealthy()
	waitFor(t, func() bool {
		p, err := c.store.LastKnownGood()
		return err == nil && uidOfSource(p.Source) == "uid-b"
	})
}

// A component that applies a config in Reload and finds it healthy there
// may call MarkHealthy before Reload returns: that call counts for the
// config it reloaded (it was lost, found by the app package's authors).
func TestRegressionMarkHealthyInsideReload(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.configMap("b", "uid-b", goodValue2, nil)
	n.assign("a", "uid-a")
	var c *Controller[testConfig]
	c = n.controller(func(o *Options[testConfig]) {
		o.RequireHealthy = true
		o.Reload = func(context.Context, *testConfig) error { c.MarkHealthy(); return nil }
	})
	r, _ := n.run(c)
	defer r.stop(t)
	c.MarkHealthy() // for a, which Bootstrap returned
	waitFor(t, n.clock.HasWaiters)
	n.clock.Step(2 * time.Minute)
	waitFor(t, func() bool {
		p, err := c.store.LastKnownGood()
		return err == nil && uidOfSource(p.Source) == "uid-a"
	})
	n.assign("b", "uid-b")
	waitFor(t, func() bool { return n.reporter.last().Message == "using current (UID: uid-b)" })
	waitFor(t, n.clock.HasWaiters)
	n.clock.Step(2 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := c.store.LastKnownGood()
		if err == nil && uidOfSource(p.Source) == "uid-b" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("b, marked healthy inside its Reload, not promoted after its trial: last-known-good %s", uidOfSource(p.Source))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Defect 4 (real clock): waiting for MarkHealthy after the trial costs no
// CPU.
func TestRegressionWaitForHealthyDoesNotSpin(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock wait of about 2.5 s")
	}
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, map[string]string{components.TrialDurationAnnotation: "300ms"})
	n.assign("a", "uid-a")
	c := n.controller(func(o *Options[testConfig]) {
		o.Clock = nil // the real clock
		o.RequireHealthy = true
		o.ResyncPeriod = time.Hour
		src, err := source.NewDir(source.DirOptions{Path: n.srcDir, PayloadKey: "config", PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		o.Remote = src
	})
	r, _ := n.run(c)
	defer r.stop(t)
	time.Sleep(500 * time.Millisecond) // the trial is over; no MarkHealthy
	before := processCPUTime()
	time.Sleep(2 * time.Second)
	used := processCPUTime() - before
	t.Logf("waiting 2s for MarkHealthy used %v of CPU", used)
	// A spinning wait uses a core: about 2s. The budget leaves room for
	// the runtime and other goroutines of the test binary on a loaded
	// machine (65ms was seen with five other builds running).
	if used > 200*time.Millisecond {
		t.Fatalf("waiting 2s for MarkHealthy used %v of CPU; want < 200ms", used)
	}
	c.MarkHealthy()
	waitFor(t, func() bool {
		p, err := c.store.LastKnownGood()
		return err == nil && uidOfSource(p.Source) == "uid-a"
	})
}

// failFirst is a Remote whose first Assigned fails, as an API server that is
// down while the component starts.
type failFirst struct {
	source.Remote
	calls atomic.Int32
}

func (f *failFirst) Assigned(ctx context.Context) (source.Assignment, error) {
	if f.calls.Add(1) == 1 {
		return source.Assignment{}, errors.New("connection refused")
	}
	return f.Remote.Assigned(ctx)
}

// Defect 5: no restart when a failed startup sync recovers and the component
// already runs the assigned config.
func TestRegressionNoRestartAfterSyncRecovers(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.assign("a", "uid-a")
	r, _ := n.run(n.controller()) // a runs a full trial: last-known-good
	waitFor(t, n.clock.HasWaiters)
	n.clock.Step(2 * time.Minute)
	waitFor(t, func() bool {
		p, err := r.c.store.LastKnownGood()
		return err == nil && uidOfSource(p.Source) == "uid-a"
	})
	r.stop(t)

	c := n.controller(func(o *Options[testConfig]) { o.Remote = &failFirst{Remote: o.Remote} })
	r, cfg := n.run(c)
	defer r.stop(t)
	if cfg.Value != 1 {
		t.Fatalf("ran %+v during the outage; want a (the last-known-good)", cfg)
	}
	waitFor(t, func() bool { return n.reporter.last().Status == corev1.ConditionTrue })
	time.Sleep(50 * time.Millisecond)
	if got := n.restarts.Load(); got != 0 {
		t.Fatalf("restarted %d times although a already runs", got)
	}
}

// Defect 6: threshold N tolerates exactly N crash restarts after the start
// that adopted the config, whether it was adopted at startup or by a
// restart.
func TestRegressionCrashLoopThreshold(t *testing.T) {
	for _, threshold := range []int{0, 1, 3} {
		for _, byRestart := range []bool{false, true} {
			name := "at startup"
			if byRestart {
				name = "by restart"
			}
			t.Run(name+"/threshold "+string(rune('0'+threshold)), func(t *testing.T) {
				n := newNode(t, "")
				n.configMap("a", "uid-a", goodValue1, map[string]string{
					components.CrashLoopThresholdAnnotation: string(rune('0' + threshold)),
					components.TrialDurationAnnotation:      "10m",
				})
				if byRestart {
					n.adoptByRestart("a", "uid-a")
				} else {
					n.assign("a", "uid-a")
				}
				// The adopting start, then threshold crash restarts: all on a.
				for i := 0; i <= threshold; i++ {
					n.clock.Step(time.Second)
					if _, r := n.start(); r.Message != "using current (UID: uid-a)" {
						t.Fatalf("start %d (crash restart %d of %d tolerated): %+v", i, i, threshold, r)
					}
				}
				n.clock.Step(time.Second)
				want := status.Report{Status: corev1.ConditionFalse, Message: "using last-known-good (default)", Reason: "crash loop detected with current (UID: uid-a)"}
				if _, r := n.start(); r != want {
					t.Fatalf("crash restart %d: %+v; want %+v", threshold+1, r, want)
				}
			})
		}
	}
}

// Defect 7: forget-bad repairs a dead end: the config gets a fresh trial.
func TestRegressionForgetBadGivesFreshTrial(t *testing.T) {
	for _, pastTrial := range []bool{false, true} {
		name := "inside the trial"
		if pastTrial {
			name = "after the trial"
		}
		t.Run(name, func(t *testing.T) {
			n := newNode(t, "")
			n.configMap("a", "uid-a", goodValue1, map[string]string{
				components.CrashLoopThresholdAnnotation: "0",
				components.TrialDurationAnnotation:      "10m",
			})
			n.assign("a", "uid-a")
			n.start() // adopts a
			n.clock.Step(time.Second)
			if _, r := n.start(); r.Reason != "crash loop detected with current (UID: uid-a)" {
				t.Fatalf("first crash restart: %+v", r)
			}
			n.clock.Step(time.Second)
			if _, r := n.start(); !strings.Contains(r.Reason, "dead end") {
				t.Fatalf("the rollback target crashes too: %+v; want a dead end", r)
			}
			// The operator repairs the node and forgets the mark.
			forgetBad(t, n.stateDir, "v1.0.0", "uid-a")
			if pastTrial {
				n.clock.Step(time.Hour)
			} else {
				n.clock.Step(time.Second)
			}
			if _, r := n.start(); r.Message != "using current (UID: uid-a)" {
				t.Fatalf("first start after forget-bad: %+v; want a on a fresh trial", r)
			}
			if _, l := n.pointers(); l != nil {
				t.Fatalf("a became last-known-good on its first start after forget-bad")
			}
		})
	}
}

// Defect 9: the payload key is part of a config's identity.
func TestRegressionPayloadKeyChange(t *testing.T) {
	n := newNode(t, "")
	n.write(filepath.Join(n.srcDir, source.ConfigMapsDir, "a.yaml"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: kube-system, name: a, uid: uid-a}\ndata:\n"+
			"  config: '"+goodValue1+"'\n  other: '"+goodValue2+"'\n")
	n.write(filepath.Join(n.srcDir, source.AssignmentFile), "configMap: {namespace: kube-system, name: a, uid: uid-a, kubeletConfigKey: config}\n")
	if cfg, _ := n.start(); cfg.Value != 1 {
		t.Fatalf("key config: %+v", cfg)
	}
	n.write(filepath.Join(n.srcDir, source.AssignmentFile), "configMap: {namespace: kube-system, name: a, uid: uid-a, kubeletConfigKey: other}\n")
	if cfg, r := n.start(); cfg.Value != 2 {
		t.Fatalf("after the key changed to other: running %+v (%+v); want value 2", cfg, r)
	}
}

// Defect 10: typed-nil interfaces are rejected by New, naming the option.
func TestRegressionTypedNilOptions(t *testing.T) {
	n := newNode(t, "")
	var dir *source.Dir
	var rep *status.NodeReporter
	var ev *status.EventReporter
	for name, mutate := range map[string]func(*Options[testConfig]){
		"Options.Remote":   func(o *Options[testConfig]) { o.Remote = dir },
		"Options.Reporter": func(o *Options[testConfig]) { o.Reporter = rep },
		"Options.Events":   func(o *Options[testConfig]) { o.Events = ev },
	} {
		opts := Options[testConfig]{Profile: testProfile{}, Layers: testLayers{}, StateDir: n.stateDir, ComponentVersion: "v1"}
		mutate(&opts)
		if _, err := New(opts); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New with a typed-nil %s: error %v; want one naming it", name, err)
		}
	}
}

// Defect 8: a bad-marks file that cannot be read (EACCES here; EIO on a
// failing disk) is not corruption: it is never replaced, so no mark is lost.
// The component runs as an unprivileged user for the read to fail (root
// reads a mode-000 file); as root the test re-runs itself as nobody.
func TestRegressionUnreadableMarksAreKept(t *testing.T) {
	if os.Getenv("DYNCONFIG_TEST_UNREADABLE_CHILD") != "" {
		unreadableMarksChild(t)
		return
	}
	testenv.Root(t, "to run the component as another user")
	n := newNode(t, "")
	n.configMap("x", "uid-x", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`, nil)
	n.assign("x", "uid-x")
	n.start() // x is marked bad
	n.configMap("z", "uid-z", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`, nil)
	n.assign("z", "uid-z") // the next start would mark z bad too
	marks := filepath.Join(n.stateDir, "tracking", "v1.0.0", "bad-configs.json")
	before, err := os.ReadFile(marks)
	if err != nil || !strings.Contains(string(before), "uid-x") {
		t.Fatalf("marks before: %q, %v", before, err)
	}
	// Everything belongs to nobody but the marks file, which nobody cannot read.
	for _, dir := range []string{filepath.Dir(n.stateDir), n.srcDir} {
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 65534, 65534)
		}); err != nil {
			t.Fatal(err)
		}
		// t.TempDir's directories are 0700: let nobody through.
		for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chown(marks, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(marks, 0o600); err != nil {
		t.Fatal(err)
	}
	// The test binary, where nobody can run it.
	binDir, err := os.MkdirTemp("", "dynconfig-test-bin-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "dynconfig.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestRegressionUnreadableMarksAreKept$", "-test.v")
	cmd.Env = append(os.Environ(), "DYNCONFIG_TEST_UNREADABLE_CHILD=1", "STATE_DIR="+n.stateDir, "SRC_DIR="+n.srcDir, "HOME=/tmp")
	cmd.Dir = binDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the component as nobody: %v\n%s", err, out)
	}
	after, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("the unreadable marks file was replaced: before %q, after %q\n%s", before, after, out)
	}
}

// unreadableMarksChild is the component, as nobody, over the parent's dirs.
func unreadableMarksChild(t *testing.T) {
	n := &node{t: t, stateDir: os.Getenv("STATE_DIR"), srcDir: os.Getenv("SRC_DIR"),
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)), reporter: &recordingReporter{}}
	_, r := n.start()
	t.Logf("condition with unreadable marks: %+v", r)
	if r.Status == corev1.ConditionTrue {
		t.Errorf("condition %+v: True although the marks could not be read", r)
	}
}

// childNode is the node a child started by damage.AsUser works on: its
// parent's state and source dirs, in arg, as "<state>\n<source>".
func childNode(t *testing.T, arg string) *node {
	dirs := strings.Split(arg, "\n")
	return &node{t: t, stateDir: dirs[0], srcDir: dirs[1],
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)), reporter: &recordingReporter{}}
}

// Issue 21, defect 1: a component that does not run as root, whose
// quarantine/ it cannot search (a root-run tool made it 0700), must not
// hang looking for a free name when a corrupt file must be moved aside; it
// leaves the file in place and Bootstrap still runs the right config. The
// child runs as nobody (EACCES from permission bits does not stop root).
func TestRegressionUnsearchableQuarantineDoesNotHang(t *testing.T) {
	if arg, ok := damage.InChild(t); ok {
		cfg, r := childNode(t, arg).start()
		if cfg.Value != 2 || r.Status != corev1.ConditionTrue || r.Message != "using current (UID: uid-b)" {
			t.Fatalf("ran value %d with %+v; want b (value 2), True", cfg.Value, r)
		}
		return
	}
	n, files := prepareDamageNode(t)
	if err := os.WriteFile(files["checkpoint of b"], []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	damage.ChownTree(t, filepath.Dir(n.stateDir), damage.Nobody)
	damage.ChownTree(t, n.srcDir, damage.Nobody)
	q := filepath.Join(n.stateDir, checkpoint.QuarantineDir)
	if err := os.MkdirAll(q, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q, "root-owned"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(q, 0, 0); err != nil {
		t.Fatal(err)
	}
	damage.AsUser(t, damage.Nobody, n.stateDir+"\n"+n.srcDir, 30*time.Second)
}

// tmpfsDir mounts a small tmpfs (size bytes) for a state dir that can be
// filled up: a real ENOSPC, no injected error. It needs root, and skips the
// test otherwise.
func tmpfsDir(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	testenv.Root(t, "to mount a tmpfs")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700,size="+strconv.Itoa(size)); err != nil {
		testenv.Missing(t, "a tmpfs mount ("+err.Error()+")", "a kernel with tmpfs and CAP_SYS_ADMIN")
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file under dir until the file system is full, and returns
// a function that frees the space again.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	return func() { _ = os.Remove(p) }
}

// Issue 21, defect 2 (full disk): a start that cannot be recorded is
// counted anyway, and a config on trial whose crash restarts cannot all be
// counted does not run: ConfigOK is Unknown and names the cause, never
// "all checks passed". The disk is a real, full tmpfs.
func TestRegressionFullDiskDoesNotHideCrashLoop(t *testing.T) {
	for _, tc := range []struct {
		name           string
		crashesOnDisk  int // recorded before the disk filled up
		wantStatus     corev1.ConditionStatus
		wantReasonPart string
	}{
		// On disk: 1 crash restart; this unrecorded start is the 2nd: not
		// above the threshold (2), but the next ones could not be counted.
		{"crash count unknown", 1, corev1.ConditionUnknown, "no space left on device"},
		// On disk: 2; this start is the 3rd crash restart: a crash loop.
		{"crash loop counted with this start", 2, corev1.ConditionFalse, "crash loop detected with current (UID: uid-b)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "")
			n.stateDir = filepath.Join(tmpfsDir(t, 256<<10), "state")
			n.configMap("a", "uid-a", goodValue1, nil)
			n.configMap("b", "uid-b", goodValue2, nil)
			n.assign("a", "uid-a")
			n.runTrial()
			n.assign("b", "uid-b")
			n.start() // adopts b
			for range tc.crashesOnDisk {
				n.clock.Step(time.Second)
				n.start()
			}
			free := fill(t, n.stateDir)
			defer free()
			n.clock.Step(time.Second)
			cfg, r := n.start()
			if cfg.Value != 1 || r.Status != tc.wantStatus || !strings.Contains(r.Reason, tc.wantReasonPart) ||
				r.Message != "using last known good: (UID: uid-a)" {
				t.Fatalf("ran value %d with %+v; want last-known-good a (value 1), %s, reason naming %q",
					cfg.Value, r, tc.wantStatus, tc.wantReasonPart)
			}
			// Once the disk has room, counting works again: the unrecorded
			// start is lost, this one is recorded. With one crash restart
			// on disk before, b is tried again (2, not above 2); with two,
			// it is found crash-looping (3).
			free()
			n.clock.Step(time.Second)
			_, r = n.start()
			if want := tc.crashesOnDisk < 2; (r.Status == corev1.ConditionTrue) != want {
				t.Fatalf("after the disk has room: %+v; want b running: %v", r, want)
			}
		})
	}
}

// Issue 21, defect 2 (unreadable startups): as a component that does not
// run as root, a startups file it cannot read (EACCES) makes a config on
// trial not run (Unknown, naming the cause); the file is not replaced.
func TestRegressionUnreadableStartupsFailSafe(t *testing.T) {
	if arg, ok := damage.InChild(t); ok {
		cfg, r := childNode(t, arg).start()
		if cfg.Value != 1 || r.Status != corev1.ConditionUnknown || !strings.Contains(r.Reason, "permission denied") ||
			!strings.Contains(r.Reason, "startups.json") {
			t.Fatalf("ran value %d with %+v; want last-known-good a (value 1), Unknown, naming the unreadable startups file", cfg.Value, r)
		}
		return
	}
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.configMap("b", "uid-b", goodValue2, nil)
	n.assign("a", "uid-a")
	n.runTrial()
	n.assign("b", "uid-b")
	n.start() // adopts b: on trial
	startups := filepath.Join(n.stateDir, "tracking", "v1.0.0", "startups.json")
	before, err := os.ReadFile(startups)
	if err != nil {
		t.Fatal(err)
	}
	damage.ChownTree(t, filepath.Dir(n.stateDir), damage.Nobody)
	damage.ChownTree(t, n.srcDir, damage.Nobody)
	if err := os.Chown(startups, 0, 0); err != nil {
		t.Fatal(err)
	}
	damage.AsUser(t, damage.Nobody, n.stateDir+"\n"+n.srcDir, 30*time.Second)
	if after, err := os.ReadFile(startups); err != nil || string(after) != string(before) {
		t.Fatalf("the unreadable startups file was replaced: %q, %v", after, err)
	}
}

// Issue 21, defect 4: a clock stepped back (an RTC corrected by NTP) must
// neither invent crash restarts nor hide them.
func TestRegressionClockStepBack(t *testing.T) {
	t.Run("startups stamped in the future are not the new config's crashes", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("b", "uid-b", goodValue2, nil)
		t0 := n.clock.Now()
		n.clock.SetTime(t0.Add(time.Hour)) // the clock runs an hour ahead
		for range 4 {
			n.clock.Step(time.Second)
			n.start() // local config, restarted now and then
		}
		n.clock.SetTime(t0) // corrected
		n.assign("b", "uid-b")
		cfg, r := n.start() // adopts b
		if cfg.Value != 2 || r.Status != corev1.ConditionTrue {
			t.Fatalf("first start of b: ran value %d with %+v; want b, True", cfg.Value, r)
		}
		n.clock.Step(time.Second)
		if cfg, r := n.start(); cfg.Value != 2 || r.Status != corev1.ConditionTrue {
			t.Fatalf("first crash restart of b (threshold 2): ran value %d with %+v; want b, True", cfg.Value, r)
		}
	})
	t.Run("crash restarts after a step back are counted", func(t *testing.T) {
		n := newNode(t, "")
		n.configMap("b", "uid-b", goodValue2, nil)
		t0 := n.clock.Now()
		n.clock.SetTime(t0.Add(time.Hour))
		n.assign("b", "uid-b")
		n.start() // adopts b, an hour ahead
		n.clock.SetTime(t0)
		var r status.Report
		for range 3 { // threshold 2: the third crash restart trips
			n.clock.Step(time.Second)
			_, r = n.start()
		}
		if r.Status != corev1.ConditionFalse || r.Reason != status.CrashLoopReason("uid-b") {
			t.Fatalf("after 3 crash restarts across the step: %+v; want b found crash-looping", r)
		}
	})
}

// Issue 21, defect 5: a last-known-good pointer that cannot be read makes a
// rollback run the local config; the condition says that the
// last-known-good is unusable and why, as for an unreadable checkpoint.
func TestRegressionUnreadableLastKnownGoodPointerIsReported(t *testing.T) {
	n, files := prepareDamageNode(t)
	if err := os.WriteFile(files["last-known-good"], []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := n.controller(func(o *Options[testConfig]) { o.Remote = unreachable() })
	cfg, err := c.Bootstrap(n.ctx())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	r := n.reporter.last()
	if cfg.Value != 0 || r.Status != corev1.ConditionUnknown ||
		!strings.Contains(r.Reason, "last-known-good is unusable") || !strings.Contains(r.Reason, "last-known-good pointer unreadable") ||
		!strings.Contains(r.Reason, "meta/last-known-good") {
		t.Fatalf("ran value %d with %+v; want local (0), Unknown, a reason saying last-known-good is unusable and why", cfg.Value, r)
	}
}

// Issue 21, defect 6: a damaged last-known-good checkpoint is found by Run
// while current runs well, off the startup path, and reported in the
// condition's message, by one Event and by a metric, while there is time
// to repair it; once current is promoted the report clears.
func TestRegressionDamagedRollbackTargetFoundWhileCurrentRuns(t *testing.T) {
	n, files := prepareDamageNode(t)
	if err := os.WriteFile(files["checkpoint of a"], []byte("bit rot"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := status.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	events := &recordedEvents{}
	r, cfg := n.run(n.controller(func(o *Options[testConfig]) { o.Metrics = metrics; o.Events = events }))
	if cfg.Value != 2 {
		t.Fatalf("ran value %d; want b", cfg.Value)
	}
	waitFor(t, func() bool {
		return strings.Contains(n.reporter.last().Message, "last-known-good (UID: uid-a) is unusable")
	})
	last := n.reporter.last()
	if last.Status != corev1.ConditionTrue || !strings.HasPrefix(last.Message, "using current (UID: uid-b); ") {
		t.Errorf("condition %+v; want True, using current, and the unusable rollback target", last)
	}
	if v := gaugeValue(t, reg, status.MetricLastKnownGoodUnusable); v != 1 {
		t.Errorf("%s = %v, want 1", status.MetricLastKnownGoodUnusable, v)
	}
	// Wake Run a few more times: still one Event for this target.
	for range 3 {
		n.clock.Step(time.Second)
		waitFor(t, n.clock.HasWaiters)
	}
	var unusable []string
	for _, e := range events.list() {
		if strings.HasPrefix(e, status.EventReasonLastKnownGoodUnusable+": ") {
			unusable = append(unusable, e)
		}
	}
	if len(unusable) != 1 {
		t.Errorf("events %q; want one %s", events.list(), status.EventReasonLastKnownGoodUnusable)
	}
	// b's trial ends: b is promoted, the rollback target is b, all is well.
	n.clock.Step(2 * time.Minute)
	waitFor(t, func() bool {
		return n.reporter.last().Message == "using current (UID: uid-b)" &&
			gaugeValue(t, reg, status.MetricLastKnownGoodUnusable) == 0
	})
	r.stop(t)
}

// blackHole is an API server that accepts connections, reads what it is
// sent and never answers. It returns its URL.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				go func() { <-done; c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); close(done); conns.Wait() })
	return "http://" + l.Addr().String()
}

// Issue 21: Bootstrap against an API server that accepts connections and
// never answers is bounded by one timeout, StartupSyncTimeout (the
// condition report after the failed sync used to wait its own, twice as
// long in all). Real client-go over real TCP; a wall budget, not a
// benchmark: the old code takes 2x.
func TestRegressionBootstrapBoundedByOneTimeout(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged state file to report=%v", damaged), func(t *testing.T) { bootstrapAgainstBlackHole(t, damaged) })
	}
}

func bootstrapAgainstBlackHole(t *testing.T, damaged bool) {
	const timeout = time.Second
	client, err := kubernetes.NewForConfig(&rest.Config{Host: blackHole(t)})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := source.NewNode(source.NodeOptions{Client: client, NodeName: "node-1", PayloadKey: "config"})
	if err != nil {
		t.Fatal(err)
	}
	reporter, err := status.NewNodeReporter(status.NodeReporterOptions{Client: client, NodeName: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: client, NodeName: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	n, files := prepareDamageNode(t)
	// A damaged file to report (an Event) on the way.
	if damaged {
		if err := os.WriteFile(files["bad-configs"], []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := n.controller(func(o *Options[testConfig]) {
		o.Remote, o.Reporter, o.Events, o.StartupSyncTimeout = remote, reporter, events, timeout
	})
	start := time.Now()
	var cfg *testConfig
	done := make(chan struct{})
	go func() { defer close(done); cfg, err = c.Bootstrap(n.ctx()) }()
	select {
	case <-done:
	case <-time.After(5 * timeout):
		t.Fatalf("Bootstrap still running after %v: it hangs", 5*timeout)
	}
	took := time.Since(start)
	c.Close()
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("Bootstrap took %v with StartupSyncTimeout %v (load %s)", took, timeout, strings.TrimSpace(string(load)))
	if err != nil || cfg.Value != 1 {
		t.Fatalf("Bootstrap: %+v, %v; want the last-known-good a", cfg, err)
	}
	if took > timeout+timeout/2 {
		t.Fatalf("Bootstrap took %v; want about StartupSyncTimeout (%v), at most 1.5x", took, timeout)
	}
}
