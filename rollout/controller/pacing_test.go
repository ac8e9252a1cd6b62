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

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// TestPacer: a rollout planned just now waits planPacing times what the
// plan took; another rollout does not wait.
func TestPacer(t *testing.T) {
	var p pacer
	if d := p.wait("a/r"); d != 0 {
		t.Fatalf("never planned: wait %v, want 0", d)
	}
	p.planned("a/r", 100*time.Millisecond)
	if d := p.wait("a/r"); d <= 100*time.Millisecond || d > planPacing*100*time.Millisecond {
		t.Errorf("planned in 100ms just now: wait %v, want (100ms, %v]", d, planPacing*100*time.Millisecond)
	}
	if d := p.wait("a/other"); d != 0 {
		t.Errorf("another rollout: wait %v, want 0", d)
	}
	p.planned("a/r", 0)
	if d := p.wait("a/r"); d != 0 {
		t.Errorf("planned in no time: wait %v, want 0", d)
	}
}

// TestPlansArePaced: a flood of Node events (a component report each, as
// during a rollout) does not plan the rollout back to back. The planner
// takes 50 ms a plan; over 2 s of events, paced it runs at most once in
// (1+planPacing)*50 ms (about 14 times), unpaced back to back (each event
// during a plan asks for the next at once: up to 40, 30 seen at load 13).
// The limit is halfway: one plan in 2*50 ms. Real clock, with a count,
// not a time, checked.
func TestPlansArePaced(t *testing.T) {
	const planTime = 50 * time.Millisecond
	gvr := v1alpha1.GroupVersionResource()
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": "r", "namespace": "default", "uid": "u-1", "finalizers": []any{plan.Finalizer}},
		"spec":     map[string]any{"configMapName": "cm", "steps": []any{map[string]any{"nodes": "100%"}}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigRolloutList"}, ro)
	client := fake.NewClientset()
	const nodes = 20
	for i := range nodes {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var plans atomic.Int64
	c, err := New(Options{Client: client, Dynamic: dyn, Plan: func(in plan.Input) plan.Result {
		plans.Add(1)
		end := time.Now().Add(planTime)
		for time.Now().Before(end) { // busy, as a plan is
		}
		return plan.Result{Status: in.Rollout.Status}
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
	for c.synced.Load() == false || plans.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the controller did not plan the rollout within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * planPacing * planTime) // the first plans settle
	before := plans.Load()
	start := time.Now()
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		n, err := client.CoreV1().Nodes().Get(ctx, fmt.Sprintf("n-%d", i%nodes), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{"dynconfig.io/config-status": fmt.Sprintf(`{"phase":"Local","error":"%d"}`, i)} // a report: what the controller caches
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	got := plans.Load() - before
	// Each plan takes at least planTime; paced, it is followed by at
	// least planPacing*planTime without one: at most one plan in
	// (1+planPacing)*planTime, and one more under way when the flood
	// began. Unpaced, one in planTime and a little more.
	limit := int64(elapsed/(2*planTime)) + 1
	t.Logf("%d plans in %v of Node events (paced limit %d, unpaced up to %d)", got, elapsed.Round(time.Millisecond), limit, int64(elapsed/planTime)+1)
	if got > limit {
		t.Errorf("%d plans in %v of Node events, want at most %d: plans run back to back", got, elapsed.Round(time.Millisecond), limit)
	}
	if got < 2 {
		t.Errorf("%d plans in %v of Node events: the events no longer plan the rollout", got, elapsed.Round(time.Millisecond))
	}
}
