package controller

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// TestPodBaselineBeforeTheAssignment pins the order of the pods gate
// against the node's restart, step by step as reconcile makes them: the
// plan assigns a node (Watch.Fresh), the analyzer takes the pod baseline,
// and only then may the assignment be patched (the node restarts on the
// new config, which here rejects a pod). When the baseline cannot be taken
// (the list fails: an API server whose watch cache is not ready after a
// restart, a timeout), the node must not be watched as assigned: the
// assignment waits for the next plan, which takes the baseline again.
// Before, the failure was logged, the patch went ahead, and the first pods
// check took the baseline after the restart: a pod the new config rejected
// was in it, and the gate passed the node.
func TestPodBaselineBeforeTheAssignment(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(at0)
	client := fake.NewClientset(readyOnN1("a"), readyOnN1("b"), readyOnN1("c"))
	var failLists atomic.Int32
	failLists.Store(1)
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failLists.Add(-1) >= 0 {
			return true, nil, errors.New("the server is currently unable to handle the request (get pods)")
		}
		return false, nil, nil
	})
	a := newAnalyzer(client, clk, func(string) {})
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0))}}
	assigned := []plan.Watch{{Node: "n1", AssignedAt: at0, Fresh: true}}

	// The assigning plan: its baseline list fails. reconcile patches the
	// node only when the analyzer took it on with a baseline.
	a.watch(ctx, "ns/ro", ro, assigned)
	a.mu.Lock()
	gn := a.nodeOf("ns/ro", "n1")
	patch := gn != nil
	if gn != nil && gn.baseline == nil {
		t.Errorf("node n1 is watched as assigned without a pod baseline: the assignment would go ahead and the first pods check would take the baseline after the restart")
	}
	a.mu.Unlock()
	if !patch {
		// The next plan assigns it again (its claim was not written).
		clk.Step(time.Second)
		a.watch(ctx, "ns/ro", ro, assigned)
		a.mu.Lock()
		gn = a.nodeOf("ns/ro", "n1")
		a.mu.Unlock()
		if gn == nil || gn.baseline == nil {
			t.Fatalf("the next plan's baseline was taken, and n1 is not watched with it: %+v", gn)
		}
	}

	// The patch: the node restarts on the new config, which rejects pod c
	// 3.3 s later.
	clk.Step(3300 * time.Millisecond)
	c := readyOnN1("c")
	c.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfpods", Message: "Pod was rejected: Node didn't have enough resource: pods"}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first pods check.
	clk.Step(time.Second)
	var ran bool
	for _, j := range a.due() {
		if j.node == "n1" && j.check == "pods" {
			a.runCheck(ctx, j)
			ran = true
		}
	}
	if !ran {
		t.Fatal("no pods check of n1 was due")
	}
	nodes := []plan.Node{{Name: "n1"}}
	a.inputs("ns/ro", ro, nodes, func(string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} })
	got := nodes[0].Analysis
	if got == nil || !strings.Contains(got.Failed, "ns/c (OutOfpods)") {
		t.Fatalf("after the pods check: %+v; want pod c, rejected after the assignment, to fail the node", got)
	}
}

// TestPodsPassNoSoonerThanTheGracePeriod: the kubelet reports the pods it
// rejects at its restart seconds later (6.7 s after the assignment on the
// real node here, later under load), so a pods check that finds nothing
// wrong before pods.gracePeriod has passed since the assignment is no
// verdict: a pass must cover the time the kubelet takes to say what it
// rejected. Before, with an 8 s trial and no soak, a check 10 s after the
// assignment passed the canary while the API server did not show the
// rejected pod yet (seen on the real kubelet: the rollout completed with a
// pod Failed OutOfpods). A failure counts at once.
func TestPodsPassNoSoonerThanTheGracePeriod(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(at0)
	p := readyOnN1("a")
	client := fake.NewClientset(p)
	a := newAnalyzer(client, clk, func(string) {})
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0)), GracePeriod: &metav1.Duration{Duration: 20 * time.Second}}}
	a.watch(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0, Fresh: true}})
	check := func() *plan.Analysis {
		t.Helper()
		for _, j := range a.due() {
			a.runCheck(ctx, j)
		}
		nodes := []plan.Node{{Name: "n1"}}
		a.inputs("ns/ro", ro, nodes, func(string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} })
		return nodes[0].Analysis
	}
	clk.Step(10 * time.Second)
	if got := check(); got == nil || !got.CheckedAt.IsZero() || got.Failed != "" {
		t.Fatalf("10s after the assignment, nothing wrong seen yet: %+v; want no verdict (CheckedAt zero) before the 20s grace period", got)
	}
	clk.Step(10 * time.Second)
	if got := check(); got == nil || !got.CheckedAt.Equal(clk.Now()) || got.Failed != "" {
		t.Fatalf("20s after the assignment: %+v; want a passing verdict at %v", got, clk.Now())
	}
	// A failure inside the grace period counts at once.
	a.watch(ctx, "ns/ro", ro, nil)
	a.watch(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: clk.Now(), Fresh: true}})
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfpods"}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(3 * time.Second)
	if got := check(); got == nil || !strings.Contains(got.Failed, "ns/a (OutOfpods)") {
		t.Fatalf("a pod rejected 3s after the assignment: %+v, want it failing the node at once", got)
	}
}
