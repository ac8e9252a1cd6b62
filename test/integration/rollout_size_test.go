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

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// testRolloutStatusSize: the status of a rollout over 7000 nodes with
// cloud-style node names, every node reverted by an undo, fits in one
// object: the API server and etcd (1.5 MiB per request) store it. Records
// that each carried the full previous source (the layout before
// status.previousSources) took 282 bytes per node here, so beyond about
// 5500 nodes etcd refused the update and the controller could neither
// record nor revert such a fleet; with each distinct source stored once a
// record takes about 153 bytes (about 10000 nodes).
func testRolloutStatusSize(t *testing.T, h *harness) {
	ctx := testContext(t, 2*time.Minute)
	const n = 7000
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "seven-thousand", Namespace: namespace, Generation: 1},
		Spec: v1alpha1.ConfigRolloutSpec{
			ConfigMapName:  "kubelet-v2",
			Steps:          []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))},
			MaxUnavailable: ptr.To(intstr.FromString("100%")),
		},
	}
	// The nodes, all on one previous ConfigMap, as a fleet is.
	prev := assignmentFor(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: "kubelet-v1-2026-11-01", UID: types.UID("7f0c2a9e-5b1d-4c3e-8f6a-2d9b0e1c4a7f"), ResourceVersion: "123456789",
	}})
	in := plan.Input{
		Rollout:   ro,
		ConfigMap: &plan.ConfigMap{UID: "3c9d1e2f-4a5b-6c7d-8e9f-0a1b2c3d4e5f", ResourceVersion: "123456999", HasKey: true},
		Now:       time.Now(),
	}
	for i := range n {
		in.Nodes = append(in.Nodes, plan.Node{
			Name:     fmt.Sprintf("ip-10-%d-%d-%d.eu-central-1.compute.internal", i/65536%256, i/256%256, i%256),
			Selected: true, Assignment: &prev,
		})
	}
	res := plan.Plan(in)
	ro.Status = res.Status
	ro.Spec.Undo = true
	in.Rollout = ro
	res = plan.Plan(in)
	if len(res.Status.Nodes) != n || res.Status.Phase != v1alpha1.PhaseReverted {
		t.Fatalf("planned %d records, phase %s", len(res.Status.Nodes), res.Status.Phase)
	}

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
		b, _ := json.Marshal(raw)
		next, err := ri.Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next.Object["status"] = raw
		_, err = ri.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		return len(b), err
	}

	// The layout of older controllers: the full source in every record.
	old := res.Status.DeepCopy()
	for i := range old.Nodes {
		old.Nodes[i].Previous, _ = old.PreviousOf(&old.Nodes[i])
		old.Nodes[i].PreviousIndex = nil
	}
	old.PreviousSources = nil
	oldSize, oldErr := write(old)

	size, err := write(&res.Status)
	if err != nil {
		t.Fatalf("the status of %d nodes (%d bytes) was refused: %v", n, size, err)
	}
	got, err := ri.Get(ctx, created.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var back v1alpha1.ConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Status.Nodes) != n || len(back.Status.PreviousSources) != 1 {
		t.Fatalf("stored %d records, %d previous sources", len(back.Status.Nodes), len(back.Status.PreviousSources))
	}
	if src, ok := back.Status.PreviousOf(&back.Status.Nodes[n-1]); !ok || assignmentFor(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: src.ConfigMap.Namespace, Name: src.ConfigMap.Name, UID: src.ConfigMap.UID, ResourceVersion: src.ConfigMap.ResourceVersion,
	}}) != prev {
		t.Errorf("the last record's previous source reads back as %v (ok %v)", src, ok)
	}
	t.Logf("%d nodes: status %d bytes (%d per node); with the full source in every record %d bytes (%d per node): %v",
		n, size, size/n, oldSize, oldSize/n, oldErr)
	if oldErr == nil || !strings.Contains(oldErr.Error(), "too large") {
		t.Errorf("the old layout (%d bytes) was not refused as too large (%v): the size this test guards against changed", oldSize, oldErr)
	}
	if err := ri.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
