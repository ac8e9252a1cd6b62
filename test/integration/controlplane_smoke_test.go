//go:build linux

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/test/cluster"
)

// controlPlaneWait bounds each wait for something kube-controller-manager
// or kube-scheduler does. Generous: the machine may be busy; a wait ends as
// soon as its condition holds.
const controlPlaneWait = 2 * time.Minute

// waitFor polls cond every pollInterval until it holds, failing the test
// with what, the last state cond described and more() after timeout.
func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string), more func() string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, last = cond(ctx)
		return ok, nil
	})
	if err != nil {
		extra := ""
		if more != nil {
			extra = "\n" + more()
		}
		t.Fatalf("waiting for %s: %v; last: %s%s", what, err, last, extra)
	}
}

// TestControlPlaneSmoke runs the full upstream control plane
// (cluster.Options.ControlPlane: kube-controller-manager with every default
// controller on ServiceAccount credentials, and kube-scheduler) with a
// hollow kubelet's Node, and shows each part acting as it does on a real
// cluster: the Deployment controller makes a ReplicaSet, the ReplicaSet
// controller its Pods, the scheduler binds them to the hollow node (nobody
// sets spec.nodeName), the hollow kubelet runs them, the Deployment's
// status counts them available, and the disruption controller computes
// the PodDisruptionBudget's status.
func TestControlPlaneSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the full control plane and a hollow kubelet: skipped with -short")
	}
	ctx := testContext(t, 6*time.Minute)
	cl := cluster.StartWithOptions(t, cluster.Options{ControlPlane: true})
	h := &harness{cl: cl, client: newClient(t, cl.Config, 200, 400)}
	node := startHollowKubelet(ctx, t, h, objectName(t, "hollow")).nodeName

	name := objectName(t, "web")
	sel := map[string]string{"app": name}
	const replicas = 2
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	dep, err := h.client.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Deployment %s: %v", name, err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: sel},
		},
	}
	if _, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodDisruptionBudget %s: %v", name, err)
	}

	// The Deployment controller's ReplicaSet, owned by the Deployment.
	waitFor(ctx, t, controlPlaneWait, "a ReplicaSet of Deployment "+name, func(ctx context.Context) (bool, string) {
		list, err := h.client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return false, err.Error()
		}
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == dep.UID && ptr.Deref(rs.Spec.Replicas, 0) == replicas {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d ReplicaSets, none owned by the Deployment with %d replicas", len(list.Items), replicas)
	}, nil)

	// The scheduler binds each Pod to the hollow node, whose kubelet runs
	// it.
	describe := func(ctx context.Context) ([]corev1.Pod, string) {
		list, err := h.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return nil, err.Error()
		}
		s := ""
		for _, p := range list.Items {
			s += fmt.Sprintf("[%s on %q %s ready=%v] ", p.Name, p.Spec.NodeName, p.Status.Phase, podIsReady(&p))
		}
		return list.Items, s
	}
	waitFor(ctx, t, controlPlaneWait, fmt.Sprintf("%d Pods scheduled to %s, Running and Ready", replicas, node), func(ctx context.Context) (bool, string) {
		pods, s := describe(ctx)
		ready := 0
		for _, p := range pods {
			if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && podIsReady(&p) {
				ready++
			}
		}
		return ready == replicas && len(pods) == replicas, s
	}, nil)
	// Bound by the scheduler: its Scheduled Event for each Pod.
	waitFor(ctx, t, controlPlaneWait, "a Scheduled Event from default-scheduler for each Pod", func(ctx context.Context) (bool, string) {
		pods, _ := describe(ctx)
		events, err := h.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
		if err != nil {
			return false, err.Error()
		}
		missing := []string{}
		for _, p := range pods {
			found := false
			for _, e := range events.Items {
				found = found || (e.InvolvedObject.UID == p.UID && e.ReportingController == "default-scheduler")
			}
			if !found {
				missing = append(missing, p.Name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no Scheduled Event from default-scheduler for %v", missing)
	}, nil)

	waitFor(ctx, t, controlPlaneWait, "the Deployment's status: all replicas available", func(ctx context.Context) (bool, string) {
		d, err := h.client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return st.ObservedGeneration == d.Generation && st.AvailableReplicas == replicas && st.UpdatedReplicas == replicas,
			fmt.Sprintf("%+v", st)
	}, nil)

	// The disruption controller: 2 expected, 2 healthy, 1 desired, so 1
	// disruption allowed.
	waitFor(ctx, t, controlPlaneWait, "the PodDisruptionBudget's status from the disruption controller", func(ctx context.Context) (bool, string) {
		p, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status
		return st.ObservedGeneration == p.Generation && st.ExpectedPods == replicas && st.CurrentHealthy == replicas &&
				st.DesiredHealthy == 1 && st.DisruptionsAllowed == 1,
			fmt.Sprintf("observedGeneration %d (generation %d), expectedPods %d, currentHealthy %d, desiredHealthy %d, disruptionsAllowed %d",
				st.ObservedGeneration, p.Generation, st.ExpectedPods, st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed)
	}, nil)
}
