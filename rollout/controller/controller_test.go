package controller

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

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
		{"lease timings", Options{Client: client, Dynamic: dyn, LeaderElection: le(func(l *LeaderElection) { l.LeaseDuration = 5 * time.Second })}, "want LeaseDuration (5s) > RenewDeadline (10s)"},
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
				if c.opts.Workers != 1 || c.opts.PatchParallelism != 16 || c.opts.Resync != 5*time.Minute || c.opts.LeaderElection.RetryPeriod != 2*time.Second {
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
		name  string
		phase v1alpha1.RolloutPhase
		gen   int64
		state v1alpha1.NodeState
		want  bool
	}{
		{"completed", v1alpha1.PhaseCompleted, 1, v1alpha1.NodePromoted, true},
		{"halted, reverted", v1alpha1.PhaseHalted, 1, v1alpha1.NodeReverted, true},
		{"halted, reverting", v1alpha1.PhaseHalted, 1, v1alpha1.NodeReverting, false},
		{"aborted, a node in trial", v1alpha1.PhaseAborted, 1, v1alpha1.NodeTrial, false},
		{"completed, undo asked", v1alpha1.PhaseCompleted, 2, v1alpha1.NodePromoted, false},
		{"progressing", v1alpha1.PhaseProgressing, 1, v1alpha1.NodePromoted, false},
		{"new", "", 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Generation: tc.gen}}
			ro.Status.Phase, ro.Status.ObservedGeneration = tc.phase, 1
			if tc.state != "" {
				ro.Status.Nodes = []v1alpha1.NodeRecord{{Name: "n", State: tc.state}}
			}
			if tc.gen == 0 {
				ro.Status.ObservedGeneration = 0
			}
			if got := settled(ro); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOnlyRecordsMoved: only node states and counts may wait for the next
// status write; anything else is written at once.
func TestOnlyRecordsMoved(t *testing.T) {
	base := func() *v1alpha1.ConfigRolloutStatus {
		return &v1alpha1.ConfigRolloutStatus{
			Phase: v1alpha1.PhaseProgressing, CurrentStep: 1, Selected: 3, Assigned: 2, InTrial: 2,
			Nodes: []v1alpha1.NodeRecord{{Name: "a", State: v1alpha1.NodeAssigning}, {Name: "b", State: v1alpha1.NodeTrial}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.ConfigRolloutStatus)
		want bool
	}{
		{"nothing", func(*v1alpha1.ConfigRolloutStatus) {}, true},
		{"a node reports trial", func(s *v1alpha1.ConfigRolloutStatus) { s.Nodes[0].State = v1alpha1.NodeTrial }, true},
		{"a node promoted, counts", func(s *v1alpha1.ConfigRolloutStatus) {
			s.Nodes[1].State = v1alpha1.NodePromoted
			s.InTrial, s.Promoted = 1, 1
		}, true},
		{"a new record", func(s *v1alpha1.ConfigRolloutStatus) { s.Nodes = append(s.Nodes, v1alpha1.NodeRecord{Name: "c"}) }, false},
		{"a reason", func(s *v1alpha1.ConfigRolloutStatus) { s.Nodes[0].Reason = "x" }, false},
		{"a previous source", func(s *v1alpha1.ConfigRolloutStatus) {
			s.PreviousSources = append(s.PreviousSources, corev1.NodeConfigSource{})
		}, false},
		{"the step", func(s *v1alpha1.ConfigRolloutStatus) { s.CurrentStep = 2 }, false},
		{"the phase", func(s *v1alpha1.ConfigRolloutStatus) { s.Phase = v1alpha1.PhaseHalted }, false},
		{"a condition", func(s *v1alpha1.ConfigRolloutStatus) {
			s.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionHalted, Status: metav1.ConditionTrue}}
		}, false},
		{"observed generation", func(s *v1alpha1.ConfigRolloutStatus) { s.ObservedGeneration = 3 }, false},
	} {
		next := base()
		tc.edit(next)
		if got := onlyRecordsMoved(base(), next); got != tc.want {
			t.Errorf("%s: onlyRecordsMoved = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReadStatusDecodesOnce: a node's status annotation is decoded once
// per value, and a new value is decoded again.
func TestReadStatusDecodesOnce(t *testing.T) {
	r := &runner{statuses: map[string]map[string]parsedStatus{}}
	node := func(v string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"dynconfig.io/config-status": v}}}
	}
	a, err := r.readStatus(node(`{"phase":"Local"}`), "kubelet")
	if err != nil || a == nil || a.Phase != "Local" {
		t.Fatalf("readStatus = %+v, %v", a, err)
	}
	b, _ := r.readStatus(node(`{"phase":"Local"}`), "kubelet")
	if a != b {
		t.Errorf("the same value was decoded again")
	}
	c, err := r.readStatus(node(`{"phase":"Trial"}`), "kubelet")
	if err == nil && (c == nil || c.Phase != "Trial") {
		t.Errorf("a new value read as %+v", c)
	}
	if _, err := r.readStatus(node(`{`), "kubelet"); err == nil || !strings.Contains(err.Error(), `node "n1" annotation dynconfig.io/config-status`) {
		t.Errorf("a bad value: %v", err)
	}
	if s, err := r.readStatus(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, "kubelet"); s != nil || err != nil {
		t.Errorf("no annotation: %v, %v", s, err)
	}
	r.forgetStatus("n1")
	if len(r.statuses) != 0 {
		t.Errorf("a deleted node's statuses stay: %v", r.statuses)
	}
}

// TestSafePlan: a panic of the planner is an error of that rollout, not a
// crash of the controller.
func TestSafePlan(t *testing.T) {
	defer func(f func(plan.Input) plan.Result) { planFunc = f }(planFunc)
	planFunc = func(plan.Input) plan.Result { panic("index out of range [-1]") }
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro"}}
	_, err := safePlan(plan.Input{Rollout: ro})
	if err == nil || !strings.Contains(err.Error(), "planning ConfigRollout ns/ro panicked") || !strings.Contains(err.Error(), "index out of range [-1]") {
		t.Fatalf("safePlan = %v", err)
	}
	planFunc = plan.Plan
	if _, err := safePlan(plan.Input{Rollout: ro, Now: time.Now()}); err != nil {
		t.Errorf("safePlan of a new rollout: %v", err)
	}
}

// TestRunSaysWhyItDoesNotSync: with the CRD missing, the controller keeps
// waiting (real clock, without spinning) and says what to install.
func TestRunSaysWhyItDoesNotSync(t *testing.T) {
	defer func(d time.Duration) { syncPatience = d }(syncPatience)
	syncPatience = 300 * time.Millisecond
	gvr := v1alpha1.GroupVersionResource()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigRolloutList"})
	dyn.PrependReactor("list", "configrollouts", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	})
	c, err := New(Options{Client: fake.NewClientset(), Dynamic: dyn})
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
