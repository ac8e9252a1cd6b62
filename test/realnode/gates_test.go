//go:build linux

package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestStockKubeletGatedRollouts runs ConfigRollouts with health gates
// (spec.analysis) over the real node, which carries three pods, and two
// hollow kubelets:
//   - a harmless config (maxPods 60) with a soak over all three nodes
//     completes: a node that passed its soak stays passed while the others
//     soak (they used to take turns and never pass together);
//   - a config that makes the real kubelet reject a running pod (maxPods 2:
//     OutOfpods at its restart), with the pods gate and an 8 s trial
//     (shorter than the pods check's 10 s), halts at the canary (the real
//     node) and puts it back, and the real node's last-known-good is still
//     the config it had: its run role held the promotion for the gates;
//   - the same config without spec.analysis completes: a rollout without
//     health gates judges a node by its component's lifecycle alone, as
//     deploy/rollout/README.md says (the pod it rejects is left Failed).
func TestStockKubeletGatedRollouts(t *testing.T) {
	cl, n := managedNode(t)
	ctx := context.Background()
	for i := range 3 {
		n.runPod(cl.Client, fmt.Sprintf("web-%d", i))
	}
	f := n.startFleet(ctx, 2)
	steps := []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromInt32(1))}, {Nodes: ptr.To(intstr.FromString("100%"))}}
	gated := func(soak time.Duration) func(*v1alpha1.ConfigRollout) {
		return func(r *v1alpha1.ConfigRollout) {
			r.Spec.Analysis = &v1alpha1.RolloutAnalysis{
				Soak: &metav1.Duration{Duration: soak},
				Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0)), GracePeriod: &metav1.Duration{Duration: 20 * time.Second}},
			}
		}
	}

	// 1. A harmless config, gated, with a soak over three nodes.
	t1 := time.Now()
	harmless := n.configMap("gated-60", "maxPods: 60\n", "5s", threshold)
	r := f.rolloutWith(ctx, harmless, steps, 2, gated(10*time.Second), v1alpha1.PhaseCompleted, v1alpha1.PhaseHalted)
	if r.Status.Phase != v1alpha1.PhaseCompleted || r.Status.Promoted != 3 {
		t.Fatalf("gated rollout of %s: %s with %d promoted, want Completed with 3: %s\n%s", harmless.Name, r.Status.Phase, r.Status.Promoted, r.Status.Message, n.more())
	}
	t.Logf("gated rollout %s (soak 10s): completed over 3 nodes in %v", harmless.Name, time.Since(t1).Round(time.Millisecond))

	// 2. A config that makes the real kubelet reject a pod, gated on the
	// pods, with a trial shorter than the check interval: halted at the
	// canary, which never made it its last-known-good.
	t2 := time.Now()
	stopWatch := n.logPodPhases(t2)
	rejecting := n.configMap("gated-2", "maxPods: 2\n", "8s", threshold)
	r = f.rolloutWith(ctx, rejecting, steps, 2, gated(0), v1alpha1.PhaseHalted, v1alpha1.PhaseReverted, v1alpha1.PhaseCompleted)
	stopWatch()
	if r.Status.Phase != v1alpha1.PhaseHalted || len(r.Status.Failures) != 1 || r.Status.Failures[0].Node != n.name ||
		!strings.Contains(r.Status.Failures[0].Reason, "OutOfpods") {
		t.Fatalf("gated rollout of %s: %s, failures %+v: want Halted at the canary %s for a pod rejected OutOfpods; pods on it: %s; history: %+v\n%s",
			rejecting.Name, r.Status.Phase, r.Status.Failures, n.name, n.podStates(), r.Status.History, n.more())
	}
	for _, h := range f.hollow {
		if c := f.capacity(ctx, h); c != 60 {
			t.Errorf("hollow node %s has capacity %d after the halt at the canary, want 60 (never assigned)", h, c)
		}
	}
	n.eventually("the real node back on "+harmless.Name, n.ready(60, time.Now()))
	n.lastKnownGoodIs(harmless)
	t.Logf("gated rollout %s: halted at the canary for %q, real node back in %v", rejecting.Name, r.Status.Failures[0].Reason, time.Since(t2).Round(time.Millisecond))

	// 3. The same config without spec.analysis: it completes, and the pod
	// the real kubelet rejects stays Failed.
	rejected := n.failedPods()
	for _, name := range rejected {
		if err := cl.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	n.runPod(cl.Client, "web-3")
	t3 := time.Now()
	// Known bad since the halt: allowKnownBad, and a name of its own.
	r = f.rolloutWith(ctx, rejecting, steps, 2, func(r *v1alpha1.ConfigRollout) { r.Name, r.Spec.AllowKnownBad = "ungated-2", true },
		v1alpha1.PhaseCompleted, v1alpha1.PhaseHalted)
	if r.Status.Phase != v1alpha1.PhaseCompleted {
		t.Fatalf("rollout of %s without spec.analysis: %s (%s), want Completed\n%s", rejecting.Name, r.Status.Phase, r.Status.Message, n.more())
	}
	n.eventually("a pod on the real node rejected by maxPods 2", func() (bool, string) {
		got := n.failedPods()
		return len(got) > 0, fmt.Sprint(got)
	})
	t.Logf("rollout %s without spec.analysis: completed in %v; failed pods on the real node: %v", rejecting.Name, time.Since(t3).Round(time.Millisecond), n.failedPods())
}

// failedPods names the pods on the real node that the kubelet failed with
// OutOfpods.
func (n *realNode) failedPods() []string {
	n.t.Helper()
	pods, err := n.cl.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
	})
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "OutOfpods" {
			out = append(out, p.Name)
		}
	}
	return out
}

// podStates says where each pod on the real node stands.
func (n *realNode) podStates() string {
	pods, err := n.cl.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
	})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("%s %s %s %q", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message))
	}
	return strings.Join(out, "; ")
}

// logPodPhases logs, until the returned func is called, each change of a
// pod's phase on the real node as the API server has it, with the time
// since start.
func (n *realNode) logPodPhases(start time.Time) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		seen := map[string]string{}
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pods, err := n.cl.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
			})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				if st := string(p.Status.Phase) + "/" + p.Status.Reason; seen[p.Name] != st {
					seen[p.Name] = st
					n.t.Logf("+%v pod %s: %s", time.Since(start).Round(10*time.Millisecond), p.Name, st)
				}
			}
		}
	}()
	return func() { close(done); <-stopped }
}
