package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// testRolloutStatusSize: the status of a rollout does not grow with the
// fleet. A rollout over 50,000 nodes with cloud-style names, planned to
// the end (every node assigned, every node failed at its deadline, then
// undone), keeps a status of a few KiB that the API server stores; the
// revert record of each node is its claim annotation, on the Node. The
// layout of the previous controller (a record per node in the status,
// each distinct previous source stored once) took about 153 bytes a node,
// and etcd refused it beyond about 10,000 nodes; this test writes that
// layout for the same fleet and requires the refusal, so that the size it
// guards against stays known.
func testRolloutStatusSize(t *testing.T, h *harness) {
	ctx := testContext(t, 2*time.Minute)
	const n = 50000
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "fifty-thousand", Namespace: namespace, UID: "0d8f3b7a-1c2e-4f5a-9b6c-7d8e9f0a1b2c", Generation: 1},
		Spec: v1alpha1.ConfigRolloutSpec{
			ConfigMapName:  "kubelet-v2",
			Steps:          []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))},
			MaxUnavailable: ptr.To(intstr.FromString("100%")),
			MaxFailures:    n,
		},
	}
	// The nodes, all on one previous ConfigMap, as a fleet is.
	prev := assignmentFor(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: "kubelet-v1-2026-11-01", UID: types.UID("7f0c2a9e-5b1d-4c3e-8f6a-2d9b0e1c4a7f"), ResourceVersion: "123456789",
	}})
	in := plan.Input{
		Rollout:   ro,
		ConfigMap: &plan.ConfigMap{UID: "3c9d1e2f-4a5b-6c7d-8e9f-0a1b2c3d4e5f", ResourceVersion: "123456999", HasKey: true, Immutable: true},
		Now:       time.Now(),
	}
	for i := range n {
		in.Nodes = append(in.Nodes, plan.Node{
			Name:     fmt.Sprintf("ip-10-%d-%d-%d.eu-central-1.compute.internal", i/65536%256, i/256%256, i%256),
			Selected: true, Assignment: &prev, ResourceVersion: "1",
			// The component runs (it publishes a status).
			Status: &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal},
		})
	}
	apply := func(res plan.Result) {
		byName := map[string]*plan.Node{}
		for i := range in.Nodes {
			byName[in.Nodes[i].Name] = &in.Nodes[i]
		}
		for _, p := range res.Patches {
			node := byName[p.Node]
			if !p.ClaimOnly {
				node.Assignment = p.Value
			}
			node.Claim = p.Claim
		}
		ro.Status = res.Status
		in.Rollout = ro
	}
	res := plan.Plan(in)
	if len(res.Patches) != n {
		t.Fatalf("assigned %d nodes, want %d", len(res.Patches), n)
	}
	claimBytes := len(*res.Patches[n-1].Claim)
	apply(res)
	started := res.Status
	in.Now = in.Now.Add(plan.DefaultProgressDeadline + time.Second) // every node fails at its deadline
	res = plan.Plan(in)
	apply(res)
	failed := res.Status
	if failed.Failed != n || len(failed.Failures) != v1alpha1.MaxFailureRecords {
		t.Fatalf("after the deadline: %d failed, %d listed", failed.Failed, len(failed.Failures))
	}
	ro.Spec.Undo = true
	res = plan.Plan(in)
	if res.Status.Phase != v1alpha1.PhaseReverted || res.Status.Reverting != n {
		t.Fatalf("undo: phase %s, %d reverting", res.Status.Phase, res.Status.Reverting)
	}
	undone := res.Status

	ri := dynamic.NewForConfigOrDie(h.cl.Config).Resource(v1alpha1.GroupVersionResource()).Namespace(namespace)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	created, err := ri.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(st *v1alpha1.ConfigRolloutStatus) (int, error) {
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
		if err != nil {
			t.Fatal(err)
		}
		next, err := ri.Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next.Object["status"] = raw
		got, err := ri.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return 0, err
		}
		b, _ := json.Marshal(got.Object)
		return len(b), nil
	}
	var sizes []string
	for _, w := range []struct {
		what string
		st   *v1alpha1.ConfigRolloutStatus
	}{{"started", &started}, {"all failed", &failed}, {"undone", &undone}} {
		size, err := write(w.st)
		if err != nil {
			t.Fatalf("%s: the status of %d nodes was refused: %v", w.what, n, err)
		}
		if size > 256<<10 {
			t.Errorf("%s: the ConfigRollout of %d nodes is %d bytes, more than 256 KiB", w.what, n, size)
		}
		sizes = append(sizes, fmt.Sprintf("%s %d bytes", w.what, size))
	}

	// The previous controller's layout for the same fleet: one record per
	// node, the previous source stored once.
	old := undone.DeepCopy()
	old.PreviousSources = []corev1.NodeConfigSource{{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: namespace, Name: "kubelet-v1-2026-11-01", UID: "7f0c2a9e-5b1d-4c3e-8f6a-2d9b0e1c4a7f"}}}
	for _, node := range in.Nodes {
		old.Nodes = append(old.Nodes, v1alpha1.NodeRecord{Name: node.Name, PreviousIndex: ptr.To(int32(0)), State: v1alpha1.NodeReverting,
			AssignedAt: metav1.NewTime(in.Now), Reason: "revertOnHalt", FailedBeforeRevert: true})
	}
	oldRaw, _ := json.Marshal(old)
	_, oldErr := write(old)
	t.Logf("%d nodes: ConfigRollout %s; claim annotation on each Node %d bytes; the previous layout's status %d bytes: %v",
		n, strings.Join(sizes, ", "), claimBytes, len(oldRaw), oldErr)
	if oldErr == nil || !strings.Contains(oldErr.Error(), "too large") {
		t.Errorf("the previous layout (%d bytes) was not refused as too large (%v): the size this test guards against changed", len(oldRaw), oldErr)
	}
	if err := ri.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
