package dynconfig

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/status"
)

const confirmWithin = 2 * time.Minute

// confirmNode is a node that runs a as last-known-good and is assigned b,
// whose trial (1h, threshold 10) outlasts every test here: only the
// confirmation deadline can revert it.
func confirmNode(t *testing.T) *node {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	n.assign("a", "uid-a")
	n.runTrial()
	n.configMap("b", "uid-b", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 2}`,
		map[string]string{components.TrialDurationAnnotation: "1h", components.CrashLoopThresholdAnnotation: "10"})
	n.assign("b", "uid-b")
	return n
}

func withConfirm(o *Options[testConfig]) { o.ConfirmWithin = confirmWithin }

// startConfirm is one process start with ConfirmWithin: Bootstrap, then
// stop.
func (n *node) startConfirm() (*testConfig, status.Report) {
	n.t.Helper()
	return n.start(withConfirm)
}

// currentMark returns current's bad mark, if any.
func (n *node) currentMark() (checkpoint.BadMark, bool) {
	n.t.Helper()
	src, _ := n.pointers()
	snap, err := checkpoint.Inspect(n.stateDir)
	if err != nil {
		n.t.Fatal(err)
	}
	tr, _ := snap.Version("v1.0.0")
	_, m, ok := tr.BadMarks.Lookup(src)
	return m, ok
}

const notConfirmedB = "failed to confirm current (UID: uid-b) healthy, cause: no health confirmation within 2m0s of its first run"

// A config never confirmed is reverted by the running process once the
// deadline passes, with the API server unreachable, by a restart or by a
// reload.
func TestConfirmWithinRevertsWithoutTheAPIServer(t *testing.T) {
	for _, reload := range []bool{false, true} {
		name := "restart"
		if reload {
			name = "reload"
		}
		t.Run(name, func(t *testing.T) {
			n := confirmNode(t)
			var down atomic.Bool
			var mu sync.Mutex
			var reloaded []int
			c := n.controller(withConfirm, func(o *Options[testConfig]) {
				o.Remote = toggleRemote{Remote: o.Remote, down: &down}
				if reload {
					o.Reload = func(_ context.Context, cfg *testConfig) error {
						mu.Lock()
						defer mu.Unlock()
						reloaded = append(reloaded, cfg.Value)
						return nil
					}
				}
			})
			r, cfg := n.run(c)
			if cfg.Value != 2 {
				t.Fatalf("started on value %d, want b (2)", cfg.Value)
			}
			down.Store(true)
			waitFor(t, n.clock.HasWaiters)
			n.clock.Step(confirmWithin - time.Second)
			time.Sleep(50 * time.Millisecond)
			if n.restarts.Load() != 0 || len(reloaded) != 0 {
				t.Fatal("reverted before the deadline")
			}
			n.clock.Step(time.Second)
			if reload {
				waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(reloaded) == 1 && reloaded[0] == 1 })
				waitFor(t, func() bool { return n.reporter.last().Reason == notConfirmedB })
				if got := n.reporter.last(); got.Status != corev1.ConditionFalse || got.Message != "using last known good: (UID: uid-a)" {
					t.Errorf("after the revert: %+v", got)
				}
			} else {
				waitFor(t, func() bool { return n.restarts.Load() == 1 })
			}
			r.stop(t)
			if m, ok := n.currentMark(); !ok || m.Problem != "NotConfirmed" || m.Reason != notConfirmedB {
				t.Fatalf("b's mark: %+v, %v; want NotConfirmed", m, ok)
			}
			down.Store(false)
			cfg, rep := n.startConfirm()
			if cfg.Value != 1 || rep.Status != corev1.ConditionFalse || rep.Reason != notConfirmedB {
				t.Fatalf("the next start runs value %d with %+v; want a, False, %q", cfg.Value, rep, notConfirmedB)
			}
		})
	}
}

// Regression for the durable clock: a config that crash-restarts slowly
// (every 50s, within its crash-loop threshold) gets no fresh window at
// each start; time down counts; the start after the deadline reverts it.
func TestConfirmWithinCountsFromTheFirstRun(t *testing.T) {
	n := confirmNode(t)
	for i := 0; i < 3; i++ {
		cfg, rep := n.startConfirm()
		if cfg.Value != 2 || rep.Status != corev1.ConditionTrue {
			t.Fatalf("start %d (%v after the first run): value %d, %+v; want b", i, time.Duration(i)*50*time.Second, cfg.Value, rep)
		}
		n.clock.Step(50 * time.Second)
	}
	cfg, rep := n.startConfirm()
	if cfg.Value != 1 || rep.Reason != notConfirmedB {
		t.Fatalf("the start 150s after the first run: value %d, %+v; want a, %q", cfg.Value, rep, notConfirmedB)
	}
}

// A recorded confirmation survives restarts: a later process that has not
// confirmed yet is not reverted after the deadline.
func TestConfirmWithinKeepsAConfirmation(t *testing.T) {
	n := confirmNode(t)
	r, cfg := n.run(n.controller(withConfirm))
	if cfg.Value != 2 {
		t.Fatalf("value %d", cfg.Value)
	}
	r.c.MarkHealthy()
	waitFor(t, func() bool {
		rec, err := checkpoint.InspectConfirmation(n.stateDir)
		return err == nil && !rec.Confirmed.IsZero()
	})
	r.stop(t)
	n.clock.Step(10 * confirmWithin) // down, long past the deadline
	r, cfg = n.run(n.controller(withConfirm))
	if cfg.Value != 2 {
		t.Fatalf("after a restart past the deadline: value %d, want b", cfg.Value)
	}
	waitFor(t, n.clock.HasWaiters)
	n.clock.Step(10 * confirmWithin)
	time.Sleep(50 * time.Millisecond)
	r.stop(t)
	if n.restarts.Load() != 0 {
		t.Fatal("a confirmed config was reverted")
	}
	if _, ok := n.currentMark(); ok {
		t.Fatal("a confirmed config was marked bad")
	}
}

// Clock stepped back before the first run: the deadline neither fires at
// once nor waits for the clock to catch up (an hour here); it starts again
// at the step, durably.
func TestConfirmWithinClockSteppedBack(t *testing.T) {
	n := confirmNode(t)
	if cfg, _ := n.startConfirm(); cfg.Value != 2 {
		t.Fatalf("value %d", cfg.Value)
	}
	n.clock.SetTime(n.clock.Now().Add(-time.Hour))
	if cfg, rep := n.startConfirm(); cfg.Value != 2 {
		t.Fatalf("right after the step back: value %d, %+v; want b (not reverted at once)", cfg.Value, rep)
	}
	n.clock.Step(confirmWithin - time.Second)
	if cfg, _ := n.startConfirm(); cfg.Value != 2 {
		t.Fatalf("before the re-anchored deadline: value %d, want b", cfg.Value)
	}
	n.clock.Step(time.Second)
	cfg, rep := n.startConfirm()
	if cfg.Value != 1 || !strings.HasPrefix(rep.Reason, "failed to confirm current (UID: uid-b)") {
		t.Fatalf("ConfirmWithin after the step: value %d, %+v; want reverted", cfg.Value, rep)
	}
}

func TestConfirmWithinOptions(t *testing.T) {
	n := newNode(t, "")
	if _, err := New(n.options(func(o *Options[testConfig]) { o.ConfirmWithin = -time.Second })); err == nil || !strings.Contains(err.Error(), "ConfirmWithin") {
		t.Errorf("negative ConfirmWithin: %v", err)
	}
	c := n.controller(withConfirm)
	if !c.opts.RequireHealthy {
		t.Error("ConfirmWithin does not imply RequireHealthy: an unconfirmed config could become last-known-good")
	}
}
