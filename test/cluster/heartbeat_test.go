package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// startHeartbeatCheck sets up, on a cluster with Options.ControlPlane, two
// kubelet-less Nodes that both start Ready with room for pods: "silent",
// whose status nobody renews, and "alive", kept by HeartbeatNode, and a pod
// selecting alive's hostname label. The check it returns (TestControlPlane
// runs it last, sharing that test's cluster) waits until the node
// lifecycle controller turns silent's Ready Unknown (its grace period, 40s,
// is over) and requires alive, at that moment, to be Ready, untainted, with
// a Lease renewed since it was created, and the pod bound to it by the
// scheduler.
func startHeartbeatCheck(ctx context.Context, t *testing.T, c *Cluster) func(t *testing.T) {
	t.Helper()
	room := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}
	now := metav1.Now()
	for _, name := range []string{"silent", "alive"} {
		n, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "alive" {
			if err := c.HeartbeatNode(ctx, name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		n.Status = corev1.NodeStatus{Capacity: room, Allocatable: room, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now,
		}}}
		if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.Client.CoordinationV1().Leases(NodeLeaseNamespace).Get(ctx, "alive", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("alive's Lease: %v", err)
	}
	if _, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-alive", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: "alive"},
			Containers:   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	return func(t *testing.T) { checkHeartbeat(ctx, t, c, first) }
}

func checkHeartbeat(ctx context.Context, t *testing.T, c *Cluster, first *coordinationv1.Lease) {
	ready := func(ctx context.Context, name string) (*corev1.Node, corev1.ConditionStatus, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return n, cond.Status, nil
			}
		}
		return n, "", nil
	}
	last := ""
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, st, err := ready(ctx, "silent")
		last = fmt.Sprintf("Ready %q, %v", st, err)
		return st == corev1.ConditionUnknown, nil
	}); err != nil {
		t.Fatalf("the node lifecycle controller never marked silent's Ready Unknown: %v; last: %s", err, last)
	}

	n, st, err := ready(ctx, "alive")
	if err != nil {
		t.Fatal(err)
	}
	if st != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Errorf("alive, once silent is Unknown: Ready %q, taints %v; want Ready True and no taint", st, n.Spec.Taints)
	}
	l, err := c.Client.CoordinationV1().Leases(NodeLeaseNamespace).Get(ctx, "alive", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Spec.RenewTime.Before(l.Spec.RenewTime) {
		t.Errorf("alive's Lease: renewed at %v, first at %v; want renewals", l.Spec.RenewTime, first.Spec.RenewTime)
	}
	p, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "on-alive", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "alive" {
		t.Errorf("pod on-alive bound to %q, want the scheduler to bind it to alive", p.Spec.NodeName)
	}
}
