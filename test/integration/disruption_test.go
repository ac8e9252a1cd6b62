//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestRolloutHoldsNodesForPodDisruptionBudgets runs the rollout controller
// as its ServiceAccount with the grants of
// deploy/overlays/cluster-wide/rbac.yaml over three simulated nodes
// (startFleet), with one pod of a PodDisruptionBudget (minAvailable 1)
// bound to each of the first two. No kubelet runs on simulated nodes: the
// test writes the pods' status (Running, Ready) as a kubelet would. No
// disruption controller runs in this cluster either: the budget's status
// stays unobserved (observedGeneration 0 < generation 1), which the
// Eviction API, and so the planner, read as no disruption allowed. What
// the disruption controller computes (disruptionsAllowed from the healthy
// pods) is the planner's unit tests' input (rollout/plan
// TestDisruptionBudgets); this test is the wiring on the real API server:
// the CRD field, the grants, the informer, the pods listed by node.
//
//  1. maxUnavailable 3, one 100% step: the third node, which carries no
//     pod of the budget, is assigned and promotes; the first two are never
//     claimed while the budget holds them; the DisruptionBudget condition
//     and a HeldByDisruptionBudget Event name the budget.
//  2. The pod on the first node turns not Ready: it is disrupted already,
//     its node restarting takes nothing more from the budget, and the node
//     goes; the second node still waits.
//  3. spec.podDisruptionBudgets is set to Ignore while the rollout runs:
//     the second node goes and the rollout completes.
//  4. The API server refuses a value outside Respect and Ignore.
func TestRolloutHoldsNodesForPodDisruptionBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("a rollout on the API server: skipped with -short")
	}
	h := newHarness(t)
	ctx := testContext(t, 6*time.Minute)
	installRolloutCRD(ctx, t, h)
	f := startFleet(ctx, t, h, "pdb", 3, nil)
	if _, err := h.cl.ApplyManifests(ctx, rolloutRBAC); err != nil {
		t.Fatal(err)
	}
	cfg, err := h.cl.ServiceAccountConfig(ctx, "kube-system", "dynconfig-rollout")
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, cfg)

	app := map[string]string{"app": objectName(t, "web")}
	pdb, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(t, "web"), Namespace: namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: app},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdbName := namespace + "/" + pdb.Name
	pods := make([]string, 2)
	for i := range pods {
		pods[i] = fmt.Sprintf("%s-%d", pdb.Name, i)
		p, err := h.client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pods[i], Namespace: namespace, Labels: app},
			Spec: corev1.PodSpec{
				NodeName:   f.names[i],
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setPodReady(ctx, t, h, p, true)
	}

	startRolloutControllerAs(ctx, t, cfg, replica{leaseNamespace: "kube-system", lease: "dynconfig-rollout", identity: "pdb"})
	name := f.rollout("budgets", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	})
	claimed := func(ro *v1alpha1.ConfigRollout) map[string]bool {
		out := map[string]bool{}
		for n := range f.claims(ctx, ro) {
			out[n] = true
		}
		return out
	}
	held := func(ro *v1alpha1.ConfigRollout) *metav1.Condition {
		return meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionDisruptionBudget)
	}

	// 1. The third node goes; the first two wait for the budget.
	ro := f.waitFor(ctx, name, "the third node promoted and the others held by "+pdbName, func(ro *v1alpha1.ConfigRollout) bool {
		c := held(ro)
		return ro.Status.Promoted == 1 && c != nil && c.Status == metav1.ConditionTrue
	})
	c := held(ro)
	if c.Reason != "Held" || !strings.Contains(c.Message, "PodDisruptionBudget "+pdbName) ||
		!strings.Contains(c.Message, f.names[0]) || !strings.Contains(c.Message, f.names[1]) {
		t.Errorf("DisruptionBudget condition %+v, want Held naming %s and nodes %s, %s", c, pdbName, f.names[0], f.names[1])
	}
	if got := claimed(ro); len(got) != 1 || !got[f.names[2]] {
		t.Errorf("claimed %v, want only %s", got, f.names[2])
	}
	if ro.Status.Phase != v1alpha1.PhaseProgressing {
		t.Errorf("phase %s, want Progressing while nodes wait", ro.Status.Phase)
	}
	f.wantEvent(ctx, name, "HeldByDisruptionBudget")
	logHistory(t, ro)

	// 2. The first node's pod is not Ready: its node goes, the second
	// still waits.
	p, err := h.client.CoreV1().Pods(namespace).Get(ctx, pods[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setPodReady(ctx, t, h, p, false)
	ro = f.waitFor(ctx, name, "the first node promoted", func(ro *v1alpha1.ConfigRollout) bool { return ro.Status.Promoted == 2 })
	if got := claimed(ro); got[f.names[1]] {
		t.Errorf("node %s, whose Ready pod the budget guards, was claimed: %v", f.names[1], got)
	}
	if c := held(ro); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, f.names[1]) || strings.Contains(c.Message, f.names[0]+" ") {
		t.Errorf("DisruptionBudget condition %+v, want True for %s only", c, f.names[1])
	}

	// 3. Ignore: the second node goes.
	f.patchSpec(ctx, name, `{"spec":{"podDisruptionBudgets":"Ignore"}}`)
	ro = f.waitPhase(ctx, name, v1alpha1.PhaseCompleted)
	if ro.Status.Promoted != 3 {
		t.Errorf("completed with %+v, want 3 promoted", countsOf(ro))
	}
	if c := held(ro); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Ignored" {
		t.Errorf("DisruptionBudget condition %+v, want False, Ignored", c)
	}

	// 4. The schema's enum.
	if err := f.tryPatchSpec(ctx, name, `{"spec":{"podDisruptionBudgets":"Sometimes"}}`); err == nil || !strings.Contains(err.Error(), "podDisruptionBudgets") {
		t.Errorf("spec.podDisruptionBudgets: Sometimes: got %v, want the API server to refuse it", err)
	}
}

// setPodReady writes a pod's status as a kubelet would: Running, and its
// Ready condition.
func setPodReady(ctx context.Context, t *testing.T, h *harness, p *corev1.Pod, ready bool) {
	t.Helper()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
	}
	if _, err := h.client.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the status of pod %s: %v", p.Name, err)
	}
}
