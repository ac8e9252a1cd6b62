package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// TestQuiet: which results wait for the next status write.
func TestQuiet(t *testing.T) {
	prev := &v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing, CurrentStep: 1, Selected: 10, Assigned: 4, InTrial: 3, Promoted: 1}
	assigned := plan.Event{Reason: assignedReason, Message: "step 2: assigned 1 nodes: n5"}
	result := func(edit func(st *v1alpha1.ConfigRolloutStatus, res *plan.Result)) *plan.Result {
		res := &plan.Result{Status: *prev.DeepCopy(), Patches: []plan.Patch{{Node: "n5", Value: ptr.To("v"), Claim: ptr.To("c")}}, Events: []plan.Event{assigned}}
		res.Status.Assigned, res.Status.Promoted, res.Status.InTrial = 5, 2, 3
		res.Status.History = append(res.Status.History, v1alpha1.HistoryEntry{Reason: assigned.Reason, Message: assigned.Message})
		edit(&res.Status, res)
		return res
	}
	for _, tc := range []struct {
		name string
		res  *plan.Result
		want bool
	}{
		{"a node promoted, another assigned", result(func(*v1alpha1.ConfigRolloutStatus, *plan.Result) {}), true},
		{"a node promoted", result(func(st *v1alpha1.ConfigRolloutStatus, res *plan.Result) {
			res.Patches, res.Events, st.History, st.Assigned = nil, nil, nil, 4
		}), true},
		{"a revert", result(func(_ *v1alpha1.ConfigRolloutStatus, res *plan.Result) { res.Patches[0].Revert = true }), false},
		{"a claim alone", result(func(_ *v1alpha1.ConfigRolloutStatus, res *plan.Result) { res.Patches[0].ClaimOnly = true }), false},
		{"a failure besides", result(func(st *v1alpha1.ConfigRolloutStatus, res *plan.Result) {
			res.Events = append(res.Events, plan.Event{Warning: true, Reason: "NodeFailed"})
			st.Failed = 1
		}), false},
		{"the next step", result(func(st *v1alpha1.ConfigRolloutStatus, _ *plan.Result) { st.CurrentStep = 2 }), false},
	} {
		if got := quiet(prev, tc.res); got != tc.want {
			t.Errorf("%s: quiet = %v, want %v", tc.name, got, tc.want)
		}
	}
	empty := prev.DeepCopy()
	empty.InTrial = 0
	if quiet(empty, result(func(*v1alpha1.ConfigRolloutStatus, *plan.Result) {})) {
		t.Error("assignments into an empty window (a step's first) wait")
	}
}

// TestAssignmentsWaitForTheStatusWrite: a rolling step whose every plan
// assigns a node (as each promotion frees a slot) writes its status at
// most once per StatusInterval, and still assigns. The planner plans
// again every 20 ms (and at each Node event of its own patches), for 2
// s: on the rule before, every plan wrote (seen failing: "483 status
// writes in 2s, want at most 7"). Real clock, with counts checked.
func TestAssignmentsWaitForTheStatusWrite(t *testing.T) {
	const interval = 400 * time.Millisecond
	gvr := v1alpha1.GroupVersionResource()
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": "r", "namespace": "default", "uid": "u-1", "finalizers": []any{plan.Finalizer}},
		"spec":     map[string]any{"configMapName": "cm", "steps": []any{map[string]any{"nodes": "100%"}}},
		"status":   map[string]any{"phase": string(v1alpha1.PhaseProgressing), "currentStep": int64(0), "selected": int64(100), "inTrial": int64(10)},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigRolloutList"}, ro)
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-0"}})
	var plans atomic.Int64
	c, err := New(Options{Client: client, Dynamic: dyn, StatusInterval: interval, Plan: func(in plan.Input) plan.Result {
		k := plans.Add(1)
		st := *in.Rollout.Status.DeepCopy()
		st.Assigned++
		msg := fmt.Sprintf("step 1: assigned 1 nodes: n-0 (%d)", k)
		st.History = append(st.History, v1alpha1.HistoryEntry{Reason: assignedReason, Message: msg})
		return plan.Result{Status: st, Events: []plan.Event{{Reason: assignedReason, Message: msg}}, RequeueAfter: 20 * time.Millisecond,
			Patches: []plan.Patch{{Node: "n-0", Value: ptr.To(fmt.Sprintf("v%d", k)), Claim: ptr.To("c")}}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(ktesting.NopTL{}, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().StatusWrites == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the controller wrote no status within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before, plansBefore := c.Stats(), plans.Load()
	start := time.Now()
	time.Sleep(2 * time.Second)
	after, elapsed := c.Stats(), time.Since(start)
	writes, assigns := after.StatusWrites-before.StatusWrites, after.Assignments-before.Assignments
	limit := int64(elapsed/interval) + 2
	t.Logf("%d plans, %d status writes and %d assignments in %v (limit %d writes)", plans.Load()-plansBefore, writes, assigns, elapsed.Round(time.Millisecond), limit)
	if writes > limit {
		t.Errorf("%d status writes in %v, want at most %d (one per %v): every plan that assigns writes", writes, elapsed.Round(time.Millisecond), limit, interval)
	}
	if assigns < 2 {
		t.Errorf("%d assignments in %v: the waiting plans no longer assign", assigns, elapsed.Round(time.Millisecond))
	}
}
