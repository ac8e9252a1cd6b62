package dynconfig

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source/sourcetest"
)

// beforeRestartRecorder is an External.BeforeRestart that answers per
// config value and records every plan it was asked about.
type beforeRestartRecorder struct {
	mu      sync.Mutex
	answers map[string]error // by config value
	plans   []RestartPlan
	// slow is how long each call takes (a drain takes minutes); ctxErrs
	// are the errors of the contexts the hook was given, after it.
	slow    time.Duration
	ctxErrs []error
}

func (b *beforeRestartRecorder) hook(ctx context.Context, p RestartPlan) error {
	time.Sleep(b.slow)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.plans = append(b.plans, p)
	if err := ctx.Err(); err != nil {
		b.ctxErrs = append(b.ctxErrs, err)
	}
	return b.answers[valueOf(p.To)]
}

func (b *beforeRestartRecorder) asked(value string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.plans {
		if valueOf(p.To) == value {
			n++
		}
	}
	return n
}

// sameUID compares the ConfigMaps of two sources by UID (an assignment
// carries no resourceVersion; a status does).
func sameUID(a, b *corev1.NodeConfigSource) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ConfigMap.UID == b.ConfigMap.UID
}

func putTestConfig(remote *sourcetest.Fake, name, value string) *corev1.NodeConfigSource {
	cm := remote.PutConfigMap(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{components.TrialDurationAnnotation: "100ms"}},
		Data:       map[string]string{"config": "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nvalue: " + value + "\n"},
	})
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: name, UID: cm.UID, KubeletConfigKey: "config"}}
}

// TestExternalBeforeRestartNotApplied: a config whose restart
// External.BeforeRestart holds with a plain error (the stock kubelet's
// drain timed out) is not applied: the component is not restarted, current
// goes back to the config it runs (its first run kept), nothing is marked
// bad, ConfigOK is False and names the cause, the ConfigStatus says
// NotApplied for the assignment, the hook is not asked again on later
// syncs of the same assignment, and the next assignment is applied as
// usual. Settled is called once the component runs its last-known-good.
func TestExternalBeforeRestartNotApplied(t *testing.T) {
	ctx, dir, remote, rep := lifecycleTest(t)
	cause := errors.New("draining node n1 timed out: pod shop/web-1: Cannot evict pod as it would violate the pod's disruption budget")
	// Each call outlasts the sync step's deadline.
	br := &beforeRestartRecorder{answers: map[string]error{"8": cause}, slow: 300 * time.Millisecond}
	var settled atomic.Int32
	sd := followUnderSystemd(t, ctx, dir, Options[testConfig]{Remote: remote, Reporter: rep, ResyncPeriod: 30 * time.Millisecond, StartupSyncTimeout: 100 * time.Millisecond,
		External: &External{Healthy: func(context.Context) error { return nil }, BeforeRestart: br.hook,
			Settled: func(context.Context) error { settled.Add(1); return nil }}})
	waitExt(t, "Settled on the local config", 10*time.Second, func() bool { return settled.Load() == 1 })

	a := putTestConfig(remote, "a", "7")
	remote.Assign(a)
	waitExt(t, "a promoted", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhasePromoted && sameUID(c.Active, a)
	})
	waitExt(t, "Settled once a is promoted", 10*time.Second, func() bool { return settled.Load() == 2 })
	if p := br.plans[0]; valueOf(p.To) != "7" || p.Rollback {
		t.Fatalf("BeforeRestart asked %+v, want the new config 7, not a rollback", p)
	}
	before, err := checkpoint.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}

	b := putTestConfig(remote, "b", "8")
	remote.Assign(b)
	waitExt(t, "b not applied", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhaseNotApplied
	})
	c := rep.lastConfig()
	if !sameUID(c.Assigned, b) || !sameUID(c.Active, a) || !sameUID(c.LastKnownGood, a) || !strings.Contains(c.Error, "pod shop/web-1") {
		t.Fatalf("status %+v, want NotApplied for b, running a (last-known-good), the cause in its error", c)
	}
	if r := rep.last(); r.Status != corev1.ConditionFalse || !strings.Contains(r.Reason, "not applied") || !strings.Contains(r.Reason, "disruption budget") {
		t.Fatalf("ConfigOK %+v, want False, saying the config was not applied and why", r)
	}
	// Many resyncs later: b was asked about once, the component never
	// restarted for it, and the state dir is as it was.
	time.Sleep(500 * time.Millisecond)
	if n := br.asked("8"); n != 1 {
		t.Fatalf("BeforeRestart asked %d times about b, want once (not on every sync)", n)
	}
	if n := len(sd.started()); n != 2 {
		t.Fatalf("%d starts, want 2: none for the config not applied", n)
	}
	if len(br.ctxErrs) > 0 {
		t.Fatalf("BeforeRestart's context ended under it: %v", br.ctxErrs)
	}
	after, err := checkpoint.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cur := after.Current.Pointer; !sameUID(cur.Source, a) || !cur.FirstRun.Equal(before.Current.Pointer.FirstRun) {
		t.Fatalf("current pointer %+v after b was not applied, want a with its first run %v", cur, before.Current.Pointer.FirstRun)
	}
	if ts, _ := after.Version("v1"); func() bool { _, _, ok := ts.BadMarks.Lookup(c.Assigned); return ok }() {
		t.Fatal("b marked bad; a config not applied here is no verdict on it")
	}

	// The next assignment is applied as usual.
	c3 := putTestConfig(remote, "c", "9")
	remote.Assign(c3)
	waitExt(t, "c promoted", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhasePromoted && sameUID(c.Active, c3)
	})
	if r := rep.last(); r.Status != corev1.ConditionTrue {
		t.Fatalf("ConfigOK %+v once c runs, want True", r)
	}
}

// TestExternalBeforeRestartRefuses: a config that BeforeRestart refuses
// with an *lkg.ConfigError is refused without a restart, marked bad and
// reported as a validation failure that names the cause.
func TestExternalBeforeRestartRefuses(t *testing.T) {
	ctx, dir, remote, rep := lifecycleTest(t)
	br := &beforeRestartRecorder{answers: map[string]error{
		"8": &lkg.ConfigError{Stage: lkg.StageValidate, Err: errors.New("changes systemCgroups, which this node cannot change")},
	}}
	sd := followUnderSystemd(t, ctx, dir, Options[testConfig]{Remote: remote, Reporter: rep, ResyncPeriod: time.Hour,
		External: &External{Healthy: func(context.Context) error { return nil }, BeforeRestart: br.hook}})
	b := putTestConfig(remote, "b", "8")
	remote.Assign(b)
	waitExt(t, "b refused", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhaseRolledBack
	})
	c := rep.lastConfig()
	if !sameUID(c.Assigned, b) || c.Active != nil || !strings.Contains(c.Error, "failed to validate current") || !strings.Contains(c.Error, "systemCgroups") {
		t.Fatalf("status %+v, want RolledBack for b, running local, a validation failure naming systemCgroups", c)
	}
	snap, err := checkpoint.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ts, _ := snap.Version("v1"); func() bool { _, _, ok := ts.BadMarks.Lookup(c.Assigned); return !ok }() {
		t.Fatal("b not marked bad")
	}
	if n := len(sd.started()); n != 1 {
		t.Fatalf("%d starts, want 1: a refused config is never tried", n)
	}
}

// TestExternalSettledNotDuringRestart: Settled (the stock kubelet's run
// role uncordons the Node there) is never called once a restart for a new
// config has begun: not while BeforeRestart runs (it drains) and not
// between it and the restart, even when the component first turns
// healthy on its last-known-good in that window. Seen on the real
// kubelet: the Node was uncordoned and the drained mark cleared 0.4 s
// after "Restarting to apply the new config", and the kubelet then
// refused the undrained change.
func TestExternalSettledNotDuringRestart(t *testing.T) {
	ctx, dir, remote, rep := lifecycleTest(t)
	var up, inRestart atomic.Bool
	var early, settled atomic.Int32
	var sd *fakeSystemd
	var startsAtHook atomic.Int32
	hook := func(ctx context.Context, p RestartPlan) error {
		startsAtHook.Store(int32(len(sd.started())))
		inRestart.Store(true)
		// The component turns healthy on what it runs while the hook
		// drains: many polls of the run role go by.
		up.Store(true)
		time.Sleep(400 * time.Millisecond)
		return nil
	}
	sd = followUnderSystemd(t, ctx, dir, Options[testConfig]{Remote: remote, Reporter: rep, ResyncPeriod: 30 * time.Millisecond,
		External: &External{
			Healthy: func(context.Context) error {
				if !up.Load() {
					return errors.New("not up yet")
				}
				return nil
			},
			BeforeRestart: hook,
			Settled: func(context.Context) error {
				if inRestart.Load() && len(sd.started()) <= int(startsAtHook.Load()) {
					early.Add(1)
				}
				settled.Add(1)
				return nil
			}}})
	a := putTestConfig(remote, "a", "7")
	remote.Assign(a)
	waitExt(t, "a promoted and settled", 10*time.Second, func() bool {
		c := rep.lastConfig()
		return c != nil && c.Phase == nodeapi.PhasePromoted && sameUID(c.Active, a) && settled.Load() > 0
	})
	if n := early.Load(); n != 0 {
		t.Fatalf("Settled called %d times after BeforeRestart began and before the restart it was for", n)
	}
}
