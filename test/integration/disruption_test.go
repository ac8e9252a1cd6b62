//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// TestRolloutHoldsNodesForPodDisruptionBudgets runs the rollout controller
// as its ServiceAccount with the grants of
// deploy/overlays/cluster-wide/rbac.yaml over three simulated nodes
// (startFleet) inside the upstream control plane
// (cluster.Options.ControlPlane): a Deployment's ReplicaSet makes two pods,
// the scheduler binds one to each of the first two nodes (a node selector
// and required anti-affinity on the hostname), and the disruption
// controller computes the status of their PodDisruptionBudget
// (minAvailable 2: 0 disruptions allowed while both are Ready). No kubelet
// runs on simulated nodes: cluster.HeartbeatNode keeps them Ready and
// schedulable (status and Lease), and the test writes the pods' status
// (Running, Ready) as a kubelet would; everything else is the controllers'.
// The rule itself (disruptionsAllowed from the healthy pods, nodes in
// trial) is the planner's unit tests' (rollout/plan TestDisruptionBudgets);
// this test is its wiring on a real cluster: the CRD field, the grants, the
// informer, the pods listed by node, the status the disruption controller
// writes.
//
//  1. maxUnavailable 3, one 100% step: the third node, which carries no
//     pod of the budget, is assigned and promotes; the first two are never
//     claimed while the budget holds them; the DisruptionBudget condition
//     and a HeldByDisruptionBudget Event name the budget and the 0
//     disruptions it allows.
//  2. The pod on the first node turns not Ready (the disruption controller
//     counts 1 healthy): it is disrupted already, its node restarting takes
//     nothing more from the budget, and the node goes; the second node
//     still waits.
//  3. spec.podDisruptionBudgets is set to Ignore while the rollout runs:
//     the second node goes and the rollout completes.
//  4. The API server refuses a value outside Respect and Ignore.
func TestRolloutHoldsNodesForPodDisruptionBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("a rollout inside the full control plane: skipped with -short")
	}
	ctx := testContext(t, 6*time.Minute)
	cl := cluster.StartWithOptions(t, cluster.Options{ControlPlane: true})
	h := &harness{cl: cl, client: newClient(t, cl.Config, 200, 400)}
	installRolloutCRD(ctx, t, h)
	f := startFleet(ctx, t, h, "pdb", 3, nil)
	for _, n := range f.names {
		if err := cl.HeartbeatNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.cl.ApplyManifests(ctx, rolloutRBAC); err != nil {
		t.Fatal(err)
	}
	cfg, err := h.cl.ServiceAccountConfig(ctx, "kube-system", "dynconfig-rollout")
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, cfg)

	web := objectName(t, "web")
	app := map[string]string{"app": web}
	// The nodes the Deployment may use: the first two.
	host := "dynconfig.test/" + web
	for _, n := range f.names[:2] {
		if _, err := h.client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, host), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.AppsV1().Deployments(namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: web, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{host: "true"},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: app}, TopologyKey: corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: web, Namespace: namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: app},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdbName := namespace + "/" + pdb.Name

	// The ReplicaSet's pods, bound by the scheduler, one on each of the
	// first two nodes; the test plays their kubelets.
	pods := map[string]string{} // node: pod
	waitFor(ctx, t, controlPlaneWait, "the Deployment's 2 pods scheduled to "+strings.Join(f.names[:2], " and "), func(ctx context.Context) (bool, string) {
		list, err := h.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(app).String()})
		if err != nil {
			return false, err.Error()
		}
		clear(pods)
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && metav1.GetControllerOf(&p) != nil {
				pods[p.Spec.NodeName] = p.Name
			}
		}
		return len(list.Items) == 2 && pods[f.names[0]] != "" && pods[f.names[1]] != "", fmt.Sprintf("%d pods, bound: %v", len(list.Items), pods)
	}, nil)
	for _, n := range f.names[:2] {
		setPodReady(ctx, t, h, pods[n], true)
	}
	waitBudget(ctx, t, h, pdb.Name, 2, 0)

	startRolloutControllerAs(ctx, t, cfg, replica{leaseNamespace: "kube-system", lease: "dynconfig-rollout", identity: "pdb", leaseDuration: 30 * time.Second})
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
	if !strings.Contains(c.Message, "which allows 0 disruptions") {
		t.Errorf("DisruptionBudget condition %q does not say the budget allows 0 disruptions", c.Message)
	}
	f.wantEvent(ctx, name, "HeldByDisruptionBudget")
	logHistory(t, ro)

	// 2. The first node's pod is not Ready: its node goes, the second
	// still waits.
	setPodReady(ctx, t, h, pods[f.names[0]], false)
	waitBudget(ctx, t, h, pdb.Name, 1, 0)
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

// setPodReady writes a pod's status as its kubelet would: Running, and its
// Ready condition.
func setPodReady(ctx context.Context, t *testing.T, h *harness, pod string, ready bool) {
	t.Helper()
	p, err := h.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
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

// waitBudget waits until the disruption controller has written the
// budget's status for its current spec with healthy pods and allowed
// disruptions.
func waitBudget(ctx context.Context, t *testing.T, h *harness, name string, healthy, allowed int32) {
	t.Helper()
	waitFor(ctx, t, controlPlaneWait, fmt.Sprintf("the disruption controller's status of %s: %d healthy, %d allowed", name, healthy, allowed),
		func(ctx context.Context) (bool, string) {
			p, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st := p.Status
			return st.ObservedGeneration == p.Generation && st.CurrentHealthy == healthy && st.DisruptionsAllowed == allowed,
				fmt.Sprintf("generation %d, %+v", p.Generation, st)
		}, nil)
}
