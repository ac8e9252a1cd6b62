package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// NodeLeaseNamespace holds the Lease of each Node that a kubelet renews
// and the node lifecycle controller reads as its heartbeat.
const NodeLeaseNamespace = "kube-node-lease"

// Heartbeat timing, the kubelet's defaults: a Lease of 40s
// (nodeLeaseDurationSeconds) renewed every quarter of it.
const (
	nodeLeaseSeconds    = 40
	nodeLeaseRenewEvery = nodeLeaseSeconds * time.Second / 4
)

// HeartbeatNode plays, for an existing Node that no kubelet runs, the part
// of a kubelet the control plane reads to treat the Node as alive and
// schedulable, and nothing more: it labels the Node as a kubelet registers
// it (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch), writes
// its status once (room for pods in capacity and allocatable, a Ready
// condition as a kubelet posts it) and renews the Node's Lease in kube-node-lease every 10s until
// ctx ends or the test ends. With Options.ControlPlane the scheduler then
// binds pods to the Node and the node lifecycle controller neither marks
// it Unknown nor taints it or its pods (without a heartbeat it does so
// after its 40s grace period). It runs no pods: a test that needs a pod
// Running or Ready on such a Node writes that status itself. The status
// write is a strategic merge patch, so conditions of other types (a
// dynconfig component's) stay. It returns once the status and the first
// Lease are written.
func (c *Cluster) HeartbeatNode(ctx context.Context, name string) error {
	labels, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
	}}})
	if err != nil {
		return fmt.Errorf("cluster: HeartbeatNode %s: %w", name, err)
	}
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, labels, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cluster: HeartbeatNode %s: labelling the Node: %w", name, err)
	}
	now := metav1.Now()
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	patch, err := json.Marshal(map[string]any{"status": corev1.NodeStatus{
		Capacity: room, Allocatable: room,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
	}})
	if err != nil {
		return fmt.Errorf("cluster: HeartbeatNode %s: %w", name, err)
	}
	node, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("cluster: HeartbeatNode %s: writing the Node's status: %w", name, err)
	}
	holder, seconds := name, int32(nodeLeaseSeconds)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NodeLeaseNamespace,
			// As the kubelet's: owned by its Node, so it goes with it.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &seconds,
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	leases := c.Client.CoordinationV1().Leases(NodeLeaseNamespace)
	lease, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster: HeartbeatNode %s: creating its Lease %s/%s: %w", name, NodeLeaseNamespace, name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var done sync.WaitGroup
	c.tb.Cleanup(func() { cancel(); done.Wait() })
	done.Go(func() {
		logger := klog.FromContext(ctx).WithValues("node", name)
		t := time.NewTicker(nodeLeaseRenewEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			renewed, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				renewed, err = leases.Get(ctx, name, metav1.GetOptions{})
			}
			if err != nil {
				// The API server may be restarting: the next tick retries.
				logger.V(2).Info("cluster: renewing a Node's Lease", "err", err)
				continue
			}
			lease = renewed
		}
	})
	return nil
}
