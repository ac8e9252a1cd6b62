package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

func testPDB(ns, name string, sel *metav1.LabelSelector, allowed int32, gen, observed int64) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: gen},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: ptr.To(intstr.FromInt32(1))},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, ObservedGeneration: observed},
	}
}

func testPod(ns, name, node string, lbl map[string]string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func activeRollout() *v1alpha1.ConfigRollout {
	return &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro"}, Status: v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing}}
}

// TestBudgetsInput: what the controller gives the planner, from real
// policy/v1 objects read through the informer: the budgets by name with
// their status.disruptionsAllowed (0 while the status is older than the
// spec), and on a node the pods some budget selects, the way the
// disruption controller selects them (namespace, selector; an empty
// selector all the namespace's pods, none for a nil one) and counts them
// healthy (Ready, not being deleted).
func TestBudgetsInput(t *testing.T) {
	web := map[string]string{"app": "web"}
	deleting := testPod("shop", "web-gone", "n1", web, true)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	deleting.Finalizers = []string{"keep"}
	objs := []runtime.Object{
		testPDB("shop", "web", &metav1.LabelSelector{MatchLabels: web}, 1, 2, 2),
		testPDB("shop", "all", &metav1.LabelSelector{}, 3, 1, 1),
		testPDB("shop", "stale", &metav1.LabelSelector{MatchLabels: web}, 5, 3, 2),
		testPDB("shop", "none", nil, 4, 1, 1),
		testPDB("other", "web", &metav1.LabelSelector{MatchLabels: web}, 9, 1, 1),
		testPod("shop", "web-1", "n1", web, true),
		testPod("shop", "web-2", "n1", web, false),
		deleting,
		testPod("shop", "db-1", "n1", map[string]string{"app": "db"}, true),
		testPod("free", "x", "n1", web, true),
		testPod("shop", "web-3", "n2", web, true),
	}
	client := fake.NewSimpleClientset(objs...)
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := newBudgets(client, 0, clk, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if d := b.input(ctx, activeRollout()); d == nil || !strings.Contains(d.Unknown, "not synced") {
		t.Fatalf("before the informer synced: %+v, want Unknown", d)
	}
	stop := b.start(ctx)
	defer func() { cancel(); stop() }() // Shutdown waits for the informer, which ends with ctx
	if !cache.WaitForCacheSync(ctx.Done(), b.informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	d := b.input(ctx, activeRollout())
	if d == nil || d.Unknown != "" {
		t.Fatalf("input %+v", d)
	}
	wantBudgets := []plan.Budget{
		{Namespace: "other", Name: "web", Allowed: 9},
		{Namespace: "shop", Name: "all", Allowed: 3},
		{Namespace: "shop", Name: "none", Allowed: 4},
		{Namespace: "shop", Name: "stale", Allowed: 0},
		{Namespace: "shop", Name: "web", Allowed: 1},
	}
	if diff := cmp.Diff(wantBudgets, d.Budgets); diff != "" {
		t.Errorf("budgets (-want +got):\n%s", diff)
	}
	pods, err := d.PodsOn("n1")
	if err != nil {
		t.Fatal(err)
	}
	// By name (the list's order): db-1: all; web-1, web-2, web-gone: all,
	// stale, web; free/x: none.
	wantPods := []plan.Pod{
		{Budgets: []int{1}, Ready: true},
		{Budgets: []int{1, 3, 4}, Ready: true},
		{Budgets: []int{1, 3, 4}, Ready: false},
		{Budgets: []int{1, 3, 4}, Ready: false},
	}
	if diff := cmp.Diff(wantPods, pods); diff != "" {
		t.Errorf("pods on n1 (-want +got):\n%s", diff)
	}

	// Read once per podsTTL.
	lists := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.Matches("list", "pods") {
				n++
			}
		}
		return n
	}
	before := lists()
	cached, err := b.input(ctx, activeRollout()).PodsOn("n1")
	if err != nil {
		t.Fatal(err)
	}
	if got := lists() - before; got != 0 {
		t.Errorf("%d lists of the pods within podsTTL, want 0", got)
	}
	// A cached read counts every pod Ready: one may have turned Ready since.
	for i := range wantPods {
		wantPods[i].Ready = true
	}
	if diff := cmp.Diff(wantPods, cached); diff != "" {
		t.Errorf("pods on n1 from the cache (-want +got):\n%s", diff)
	}
	clk.Step(podsTTL)
	if _, err := b.input(ctx, activeRollout()).PodsOn("n1"); err != nil {
		t.Fatal(err)
	}
	if got := lists() - before; got != 1 {
		t.Errorf("%d lists of the pods after podsTTL, want 1", got)
	}
	var sel string
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && a.Matches("list", "pods") {
			sel = l.GetListRestrictions().Fields.String()
		}
	}
	if sel != "spec.nodeName=n1" {
		t.Errorf("pods listed with field selector %q, want spec.nodeName=n1", sel)
	}

	ignore := activeRollout()
	ignore.Spec.PodDisruptionBudgets = v1alpha1.DisruptionBudgetsIgnore
	if d := b.input(ctx, ignore); d != nil {
		t.Errorf("a rollout that ignores budgets got %+v, want nil", d)
	}
	done := activeRollout()
	done.Status.Phase = v1alpha1.PhaseCompleted
	if d := b.input(ctx, done); d != nil {
		t.Errorf("a completed rollout got %+v, want nil", d)
	}
}

// TestBudgetChangePlansHeldRollouts: a PodDisruptionBudget's change plans
// again the rollouts whose DisruptionBudget condition is True (they hold
// nodes for a budget), not the others.
func TestBudgetChangePlansHeldRollouts(t *testing.T) {
	r := &runner{rollouts: cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})}
	r.queue = newTestQueue()
	defer r.queue.ShutDown()
	for _, ro := range []struct {
		name   string
		status metav1.ConditionStatus
	}{{"held", metav1.ConditionTrue}, {"free", metav1.ConditionFalse}, {"none", ""}} {
		obj := &v1alpha1.ConfigRollout{
			TypeMeta:   metav1.TypeMeta{APIVersion: "dynconfig.io/v1alpha1", Kind: "ConfigRollout"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ro.name},
			Status:     v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing},
		}
		if ro.status != "" {
			obj.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDisruptionBudget, Status: ro.status, Reason: "R"}}
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.rollouts.GetStore().Add(&unstructured.Unstructured{Object: raw}); err != nil {
			t.Fatal(err)
		}
	}
	r.enqueueHeld()
	var got []string
	for r.queue.Len() > 0 {
		k, _ := r.queue.Get()
		got = append(got, k)
		r.queue.Done(k)
	}
	if diff := cmp.Diff([]string{"ns/held"}, got); diff != "" {
		t.Errorf("planned (-want +got):\n%s", diff)
	}
}
