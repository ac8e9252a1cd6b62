package integration

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestRolloutRevertRestoresClaim (issue 29), on the real API server: rollout
// A completes on two nodes; rollout B takes one of them over, its config
// fails there, B halts and reverts the node to A's config, and gives the
// node A's claim back with it. An undo of A then puts both nodes back on
// the config they had before A. Before, B's revert removed the claim and
// A's undo missed that node (it stayed on A's config).
func TestRolloutRevertRestoresClaim(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)
	installRolloutCRD(ctx, t, h)
	// Every node fails the fleet's new ConfigMap (maxPods 101).
	f := startFleet(ctx, t, h, "reclaim", 2, func(string) bool { return true })
	good := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "good"), maxPods: 102, trial: rolloutTrial, immutable: true})
	startRolloutController(ctx, t, h, "a", nil)
	all := func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
	}

	a := f.rolloutOf("reclaim-a", good.Name, all)
	roA := f.waitPhase(ctx, a, v1alpha1.PhaseCompleted)
	f.waitAll(ctx, good)
	if got := len(f.claims(ctx, roA)); got != 2 {
		t.Fatalf("A completed with %d claims, want 2", got)
	}

	b := f.rollout("reclaim-b", all)
	got := f.waitPhase(ctx, b, v1alpha1.PhaseHalted)
	if !strings.Contains(got.Status.Message, "1 nodes failed") {
		t.Errorf("B halted with %q, want one failed node", got.Status.Message)
	}
	f.waitReleased(ctx, b)
	f.waitAll(ctx, good)
	if claims := f.claims(ctx, roA); len(claims) != 2 {
		t.Fatalf("after B's revert A holds %d nodes (%v), want both: B's revert gives the node A's claim back", len(claims), claims)
	}

	f.patchSpec(ctx, a, `{"spec":{"undo":true}}`)
	f.waitPhase(ctx, a, v1alpha1.PhaseReverted)
	f.waitReleased(ctx, a)
	f.waitAll(ctx, f.oldCM)
}
