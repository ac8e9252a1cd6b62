package controller

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

func TestNewValidates(t *testing.T) {
	client := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	le := func(mod func(*LeaderElection)) *LeaderElection {
		l := &LeaderElection{Namespace: "kube-system", Name: "lease", Identity: "a"}
		mod(l)
		return l
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no client", Options{Dynamic: dyn}, "Options.Client: required"},
		{"no dynamic", Options{Client: client}, "Options.Dynamic: required"},
		{"bad selector", Options{Client: client, Dynamic: dyn, NodeLabelSelector: "a in (("}, "Options.NodeLabelSelector"},
		{"lease without name", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(l *LeaderElection) { l.Name = "" })}, "Namespace and Name are required"},
		{"lease without identity", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(l *LeaderElection) { l.Identity = "" })}, "Identity: required"},
		{"lease timings", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(l *LeaderElection) { l.LeaseDuration = 5 * time.Second })}, "LeaseDuration (5s) must be greater than RenewDeadline (10s)"},
		// client-go's leader election refuses RenewDeadline <= 1.2 *
		// RetryPeriod; New accepted 10s > 9s before.
		{"lease jitter", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(l *LeaderElection) { l.RetryPeriod = 9 * time.Second })}, "RenewDeadline (10s) must be greater than RetryPeriod (9s) times the jitter factor 1.2"},
		{"lease negative", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(l *LeaderElection) { l.RetryPeriod = -time.Second })}, "must not be negative"},
		{"negative sync patience", Options{Client: client, Dynamic: dyn, SyncPatience: -time.Second}, "Options.SyncPatience"},
		{"negative workers", Options{Client: client, Dynamic: dyn, Workers: -1}, "Options.Workers"},
		{"negative resync", Options{Client: client, Dynamic: dyn, Resync: -time.Second}, "Options.Resync"},
		{"negative parallelism", Options{Client: client, Dynamic: dyn, PatchParallelism: -1}, "Options.PatchParallelism"},
		{"negative status interval", Options{Client: client, Dynamic: dyn, StatusInterval: -time.Second}, "Options.StatusInterval"},
		{"ok", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(*LeaderElection) {})}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.opts.Workers != 1 || c.opts.PatchParallelism != defaultPatchParallelism || c.opts.Resync != 5*time.Minute || c.opts.LeaderElection.RetryPeriod != 2*time.Second {
					t.Errorf("defaults not applied: %+v", c.opts)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestStripConfigMapData(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u", ResourceVersion: "5", Labels: map[string]string{"a": "b"}},
		Data:       map[string]string{"kubelet": strings.Repeat("x", 1<<20)},
		BinaryData: map[string][]byte{"bin": []byte("y")},
	}
	got, err := stripConfigMapData(cm)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u", ResourceVersion: "5"}, Data: map[string]string{"kubelet": ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stripConfigMapData (-want +got):\n%s", diff)
	}
	if len(cm.Data["kubelet"]) != 1<<20 {
		t.Errorf("the informer's object was modified")
	}
}

func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   v1alpha1.ConfigRolloutStatus
		gen  int64
		del  bool
		want bool
	}{
		{"completed", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseCompleted, Promoted: 3}, 1, false, true},
		{"halted, reverted", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseHalted}, 1, false, true},
		{"halted, reverting", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseHalted, Reverting: 2}, 1, false, false},
		{"aborted, a node in trial", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseAborted, InTrial: 1}, 1, false, false},
		{"completed, undo asked", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseCompleted}, 2, false, false},
		{"completed, being deleted", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseCompleted}, 1, true, false},
		{"records of an older controller", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseCompleted, Nodes: []v1alpha1.NodeRecord{{Name: "n", State: v1alpha1.NodePromoted}}}, 1, false, false},
		{"progressing", v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing}, 1, false, false},
		{"new", v1alpha1.ConfigRolloutStatus{}, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Generation: tc.gen}, Status: tc.st}
			if tc.gen != 0 {
				ro.Status.ObservedGeneration = 1
			}
			if tc.del {
				ro.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			if got := settled(ro); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOnlyCountsMoved: only the counts that move as nodes report trial or
// promotion may wait for the next status write; anything else is written
// at once.
func TestOnlyCountsMoved(t *testing.T) {
	base := func() *v1alpha1.ConfigRolloutStatus {
		return &v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing, CurrentStep: 1, Selected: 3, Assigned: 2, InTrial: 2}
	}
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.ConfigRolloutStatus)
		want bool
	}{
		{"nothing", func(*v1alpha1.ConfigRolloutStatus) {}, true},
		{"a node promoted, counts", func(s *v1alpha1.ConfigRolloutStatus) { s.InTrial, s.Promoted = 1, 1 }, true},
		{"a failure", func(s *v1alpha1.ConfigRolloutStatus) {
			s.Failed, s.Failures = 1, []v1alpha1.NodeFailure{{Node: "a", Reason: "x"}}
		}, false},
		{"a node put back", func(s *v1alpha1.ConfigRolloutStatus) { s.Reverting = 1 }, false},
		{"the step", func(s *v1alpha1.ConfigRolloutStatus) { s.CurrentStep = 2 }, false},
		{"the phase", func(s *v1alpha1.ConfigRolloutStatus) { s.Phase = v1alpha1.PhaseHalted }, false},
		{"a condition", func(s *v1alpha1.ConfigRolloutStatus) {
			s.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionHalted, Status: metav1.ConditionTrue}}
		}, false},
		{"observed generation", func(s *v1alpha1.ConfigRolloutStatus) { s.ObservedGeneration = 3 }, false},
	} {
		next := base()
		tc.edit(next)
		if got := onlyCountsMoved(base(), next); got != tc.want {
			t.Errorf("%s: onlyCountsMoved = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNodeEventsRoute: a Node event plans the rollouts that select the
// node (before or after the event) or whose claim it carries, not every
// rollout.
func TestNodeEventsRoute(t *testing.T) {
	r := &runner{routes: map[string]route{}}
	r.queue = newTestQueue()
	defer r.queue.ShutDown()
	mk := func(ns, name, uid string, sel map[string]string, phase v1alpha1.RolloutPhase) {
		ro := &v1alpha1.ConfigRollout{
			TypeMeta:   metav1.TypeMeta{APIVersion: "dynconfig.io/v1alpha1", Kind: "ConfigRollout"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Generation: 1},
			Spec:       v1alpha1.ConfigRolloutSpec{ConfigMapName: "cm", Steps: []v1alpha1.RolloutStep{{Pause: &v1alpha1.RolloutPause{}}}},
			Status:     v1alpha1.ConfigRolloutStatus{Phase: phase, ObservedGeneration: 1},
		}
		if sel != nil {
			ro.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: sel}
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
		if err != nil {
			t.Fatal(err)
		}
		r.setRoute(&unstructured.Unstructured{Object: raw})
	}
	mk("a", "zone-a", "uid-a", map[string]string{"zone": "a"}, v1alpha1.PhaseProgressing)
	mk("a", "zone-b", "uid-b", map[string]string{"zone": "b"}, v1alpha1.PhaseProgressing)
	mk("b", "done", "uid-done", nil, v1alpha1.PhaseCompleted)
	node := func(zone, claimUID string) *nodeFacts {
		n := &nodeFacts{Name: "n1", Labels: map[string]string{"zone": zone}, Annotations: map[string]string{}}
		if claimUID != "" {
			n.Annotations[nodeapi.ClaimAnnotation] = `{"namespace":"x","name":"y","uid":"` + claimUID + `","assignedAt":"2026-01-01T00:00:00Z"}`
		}
		return n
	}
	for _, tc := range []struct {
		name  string
		nodes []*nodeFacts
		want  []string
	}{
		{"selected by one", []*nodeFacts{node("a", "")}, []string{"a/zone-a"}},
		{"relabelled", []*nodeFacts{node("a", ""), node("b", "")}, []string{"a/zone-a", "a/zone-b"}},
		{"claimed by a completed rollout", []*nodeFacts{node("c", "uid-done")}, []string{"b/done"}},
		{"nobody's", []*nodeFacts{node("c", "")}, nil},
	} {
		r.enqueueForNode(tc.nodes...)
		var got []string
		for r.queue.Len() > 0 {
			k, _ := r.queue.Get()
			got = append(got, k)
			r.queue.Done(k)
		}
		slices.Sort(got)
		if !cmp.Equal(got, tc.want) {
			t.Errorf("%s: planned %v, want %v", tc.name, got, tc.want)
		}
	}
}

func newTestQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
}

// TestReadStatusDecodesOnce: a status annotation is decoded once per
// value, for every node that publishes it, and a new value is decoded
// again; a value that does not decode is an error naming its node.
func TestReadStatusDecodesOnce(t *testing.T) {
	r := &runner{}
	node := func(v string) *nodeFacts {
		return &nodeFacts{Name: "n1", Annotations: map[string]string{"dynconfig.io/config-status": v}}
	}
	a, err := r.readStatus(node(`{"phase":"Local"}`), "kubelet")
	if err != nil || a == nil || a.Phase != "Local" {
		t.Fatalf("readStatus = %+v, %v", a, err)
	}
	b, _ := r.readStatus(node(`{"phase":"Local"}`), "kubelet")
	if a != b {
		t.Errorf("the same value was decoded again")
	}
	other := node(`{"phase":"Local"}`)
	other.Name = "n2"
	if o, _ := r.readStatus(other, "kubelet"); o != a {
		t.Errorf("another node's equal value was decoded again")
	}
	c, err := r.readStatus(node(`{"phase":"Trial"}`), "kubelet")
	if err == nil && (c == nil || c.Phase != "Trial") {
		t.Errorf("a new value read as %+v", c)
	}
	if _, err := r.readStatus(node(`{`), "kubelet"); err == nil || !strings.Contains(err.Error(), `node "n1" annotation dynconfig.io/config-status`) {
		t.Errorf("a bad value: %v", err)
	}
	if _, err := r.readStatus(other, "kubelet"); err != nil {
		t.Errorf("n2's good value after n1's bad one: %v", err)
	}
	bad := node(`{`)
	bad.Name = "n2"
	if _, err := r.readStatus(bad, "kubelet"); err == nil || !strings.Contains(err.Error(), `node "n2"`) {
		t.Errorf("the same bad value on n2: %v, want an error naming n2", err)
	}
	if s, err := r.readStatus(&nodeFacts{Name: "n1"}, "kubelet"); s != nil || err != nil {
		t.Errorf("no annotation: %v, %v", s, err)
	}
	r.forgetStatus("n1")
	if _, ok := r.badStatuses["n1"]; ok || len(r.badStatuses) != 1 {
		t.Errorf("a deleted node's bad statuses stay: %v", r.badStatuses)
	}
}

// TestSafePlan: a panic of the planner is an error of that rollout, not a
// crash of the controller.
func TestSafePlan(t *testing.T) {
	panics := func(plan.Input) plan.Result { panic("index out of range [-1]") }
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro"}}
	_, err := safePlan(panics, plan.Input{Rollout: ro})
	if err == nil || !strings.Contains(err.Error(), "planning ConfigRollout ns/ro panicked") || !strings.Contains(err.Error(), "index out of range [-1]") {
		t.Fatalf("safePlan = %v", err)
	}
	if _, err := safePlan(plan.Plan, plan.Input{Rollout: ro, Now: time.Now()}); err != nil {
		t.Errorf("safePlan of a new rollout: %v", err)
	}
}

// TestRunSaysWhyItDoesNotSync: with the CRD missing, the controller keeps
// waiting (real clock, without spinning) and says what to install.
func TestRunSaysWhyItDoesNotSync(t *testing.T) {
	gvr := v1alpha1.GroupVersionResource()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigRolloutList"})
	dyn.PrependReactor("list", "configrollouts", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	})
	c, err := New(Options{Client: fake.NewClientset(), Dynamic: dyn, SyncPatience: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(ktesting.NopTL{}, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), 1500*time.Millisecond)
	defer cancel()
	start, cpu := time.Now(), processCPU()
	if err := c.Run(ctx); err != nil {
		t.Errorf("Run = %v, want nil when its context ends", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Run took %v after its context ended", took)
	}
	if used := processCPU() - cpu; used > time.Second {
		t.Errorf("waiting 1.5 s used %v of CPU: it spins", used)
	}
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if !strings.Contains(logs, "the CRD is not installed") || !strings.Contains(logs, "kubectl apply -f deploy/rollout/dynconfig.io_configrollouts.yaml") {
		t.Errorf("the log does not say what to install:\n%s", logs)
	}
}

// processCPU is the CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReady: /readyz's controller check. A controller that runs but whose
// informers cannot sync (the CRD is missing) is not ready; once they sync it
// is; once Run ends (a standby, or stopped) it does not hold readiness back.
func TestReady(t *testing.T) {
	gvr := v1alpha1.GroupVersionResource()
	for _, crd := range []bool{false, true} {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigRolloutList"})
		if !crd {
			dyn.PrependReactor("list", "configrollouts", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
			})
		}
		c, err := New(Options{Client: fake.NewClientset(), Dynamic: dyn, SyncPatience: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(); err != nil {
			t.Fatalf("before Run: %v, want ready (not running)", err)
		}
		logger := ktesting.NewLogger(ktesting.NopTL{}, ktesting.NewConfig(ktesting.BufferLogs(true)))
		ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		var ready error
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if ready = c.Ready(); (ready == nil) == crd && c.running.Load() {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if crd && ready != nil {
			t.Errorf("informers synced: %v, want ready", ready)
		}
		if !crd {
			time.Sleep(500 * time.Millisecond) // still not synced
			if ready = c.Ready(); ready == nil {
				t.Error("informers cannot sync (no CRD): ready, want not ready")
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(); err != nil {
			t.Errorf("after Run: %v, want ready (not running)", err)
		}
	}
}
