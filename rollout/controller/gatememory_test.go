package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// pods check runs the due pods checks of n1 and returns its Analysis.
func podsCheck(t *testing.T, a *analyzer, ro *v1alpha1.ConfigRollout) *plan.Analysis {
	t.Helper()
	ctx := context.Background()
	for _, j := range a.due() {
		if j.check == "pods" {
			a.runCheck(ctx, j)
		}
	}
	nodes := []plan.Node{{Name: "n1"}}
	a.inputs("ns/ro", ro, nodes, func(string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} })
	return nodes[0].Analysis
}

// TestPodBaselineSurvivesALeaderChange: the leader that assigns a node
// writes the pod baseline it took before the assignment into the claim of
// the assignment's PATCH (prepare: the same patch, no other); a new leader
// reads it back from the claim (plan.Watch.Pods) and judges the pods
// against it: a pod that failed after the assignment, before the new
// leader's first check, fails the node. Before, the new leader took the
// baseline at its first check, with the failed pod in it, and passed.
func TestPodBaselineSurvivesALeaderChange(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(at0)
	client := fake.NewClientset(readyOnN1("a"), readyOnN1("b"))
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0))}}

	// The first leader plans the assignment of n1.
	claim, err := nodeapi.EncodeClaim(&nodeapi.Claim{Namespace: "ns", Name: "ro", UID: "ro-uid", AssignedAt: metav1.NewTime(at0)})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"configMap":{"namespace":"ns","name":"cm","uid":"cm-uid","kubeletConfigKey":"kubelet"}}`
	patches := []plan.Patch{{Node: "n1", ResourceVersion: "7", Value: &value, Claim: &claim}}
	first := newAnalyzer(client, clk, func(string) {})
	out, errs := first.prepare(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0, Fresh: true}}, patches)
	if len(errs) != 0 || len(out) != 1 || out[0].Claim == nil || out[0].Value == nil || *out[0].Value != value {
		t.Fatalf("prepare: %+v, %v; want the assignment of n1", out, errs)
	}
	written, err := nodeapi.DecodeClaim(*out[0].Claim)
	if err != nil || written.Gates == nil || written.Gates.Pods == nil {
		t.Fatalf("the assignment's claim %s (%v), want the pod baseline in it", *out[0].Claim, err)
	}
	if _, ready, _ := written.Gates.Pods.Keys(); len(ready) != 2 {
		t.Fatalf("the claim's baseline has %d Ready pods, want a and b", len(ready))
	}

	// The node restarts on the new config, which rejects pod b; the
	// first leader is gone before it checks.
	clk.Step(5 * time.Second)
	b := readyOnN1("b")
	b.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfpods"}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)

	// The new leader: it watches n1 as planned from its claim.
	second := newAnalyzer(client, clk, func(string) {})
	second.prepare(ctx, "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0, Pods: written.Gates.Pods}}, nil)
	got := podsCheck(t, second, ro)
	if got == nil || !strings.Contains(got.Failed, "ns/b (OutOfpods)") {
		t.Fatalf("the new leader's pods check: %+v; want pod b, rejected after the assignment, to fail n1", got)
	}
}

// TestPodBaselineWithoutMemory: a node an older controller assigned
// carries no baseline in its claim; the pods check rebuilds it as of the
// assignment from the pods' own times (baselineAsOf): a pod that failed
// before the assignment (or with no date) is in it, a pod whose failure
// is dated after is not, and a pod created after the assignment is
// judged as new.
func TestPodBaselineWithoutMemory(t *testing.T) {
	before, after := at0.Add(-time.Minute), at0.Add(10*time.Second)
	failedAt := func(name string, at time.Time) *corev1.Pod {
		p := pod(name, corev1.PodFailed, corev1.ConditionFalse, at)
		p.Status.Reason = "OutOfpods"
		return &p
	}
	undated := pod("undated", corev1.PodFailed, "", time.Time{})
	undated.Status.Reason = "OutOfpods"
	late := pod("late", corev1.PodFailed, "", time.Time{})
	late.CreationTimestamp = metav1.NewTime(after)
	late.Status.Reason = "Evicted"
	for _, p := range []*corev1.Pod{failedAt("old", before), failedAt("new", after), &undated, &late} {
		p.Spec.NodeName = "n1"
	}
	client := fake.NewClientset(readyOnN1("a"), failedAt("old", before), failedAt("new", after), &undated, &late)
	clk := clocktesting.NewFakeClock(at0.Add(time.Minute))
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid"}}
	ro.Spec.Analysis = &v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0))}}
	a := newAnalyzer(client, clk, func(string) {})
	a.prepare(context.Background(), "ns/ro", ro, []plan.Watch{{Node: "n1", AssignedAt: at0}}, nil)
	got := podsCheck(t, a, ro)
	if got == nil || !strings.Contains(got.Failed, "2 pods newly failed") || !strings.Contains(got.Failed, "ns/new (OutOfpods)") ||
		!strings.Contains(got.Failed, "ns/late (Evicted)") || strings.Contains(got.Failed, "ns/old") || strings.Contains(got.Failed, "ns/undated") {
		t.Fatalf("pods check of a node without a baseline: %+v; want pods new and late newly failed, old and undated in the baseline", got)
	}
}
