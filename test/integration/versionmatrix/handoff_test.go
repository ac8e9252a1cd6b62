//go:build linux

package versionmatrix

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestControllerHandoff upgrades and downgrades the rollout controller in
// the middle of a rollout over the mixed fleet (one agent of each version),
// one version at a time, as its Deployment would be rolled: each version,
// with its own ConfigRollout CRD installed, moves one node, waits at a
// pause step, and is stopped; the next one resumes the rollout from the
// claims and status the previous one wrote and moves the next node. The
// last one completes the rollout and then undoes it, reading the claims
// every version wrote: every node goes back to where it was, and no node
// failed or was reverted on the way.
func TestControllerHandoff(t *testing.T) {
	all := allVersions(t)
	for _, v := range all {
		v.Agent(t)
	}
	cl, kubeconfig := startCluster(t)
	reversed := []*version{all[2], all[1], all[0]}
	for _, tc := range []struct {
		name  string
		order []*version
	}{
		{"upgrade", all},
		{"downgrade", reversed},
	} {
		t.Run(tc.name+" "+names(tc.order), func(t *testing.T) {
			m := newMatrix(t, cl, kubeconfig, "handoff-"+tc.name)
			ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
			defer cancel()
			old, good, _ := m.setup(ctx, all, trial)
			p := m.startController(ctx, tc.order[0])
			// One node per controller version, a pause step after each
			// but the last: steps 0, 2 and 4 move nodes, 1 and 3 wait.
			ro := m.rollout(ctx, "handoff", good, func(s *v1alpha1.ConfigRolloutSpec) {
				s.Steps = []v1alpha1.RolloutStep{
					nodesStep(intstr.FromInt32(1)), {Pause: &v1alpha1.RolloutPause{}},
					nodesStep(intstr.FromInt32(2)), {Pause: &v1alpha1.RolloutPause{}},
					nodesStep(intstr.FromString("100%")),
				}
				s.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			})
			for i, ctl := range tc.order {
				if i > 0 {
					if code := p.Terminate(t); code != 0 {
						t.Errorf("controller %s exited with %d on SIGTERM", tc.order[i-1].Name, code)
					}
					p = m.startController(ctx, ctl)
					m.patch(ctx, ro, fmt.Sprintf(`{"spec":{"resumedStep":%d}}`, 2*i-1))
				}
				if i == len(tc.order)-1 {
					break
				}
				pause := int32(2*i + 1)
				m.waitRollout(ctx, ro, fmt.Sprintf("paused at step %d with %d nodes promoted (controller %s)", pause, i+1, ctl.Name),
					func(r *v1alpha1.ConfigRollout) bool {
						return r.Status.Phase == v1alpha1.PhasePaused && r.Status.CurrentStep == pause && r.Status.Promoted == int32(i+1)
					}, v1alpha1.PhaseHalted, v1alpha1.PhaseCompleted)
			}
			last := tc.order[len(tc.order)-1]
			got := m.waitRollout(ctx, ro, "completed by controller "+last.Name, func(r *v1alpha1.ConfigRollout) bool {
				return r.Status.Phase == v1alpha1.PhaseCompleted
			})
			if got.Status.Promoted != int32(len(m.nodes)) || got.Status.Failed != 0 || got.Status.Reverting != 0 {
				t.Errorf("completed with %d promoted, %d failed, %d reverting, want %d, 0, 0: %s",
					got.Status.Promoted, got.Status.Failed, got.Status.Reverting, len(m.nodes), got.Status.Message)
			}
			m.waitFleetOn(ctx, good)
			if claims := m.claims(ctx, got); len(claims) != len(m.nodes) {
				t.Errorf("%d claims after the rollout completed, want one per node (%d)", len(claims), len(m.nodes))
			}
			t.Logf("completed across controllers %s: %s", names(tc.order), got.Status.Message)

			// The undo, by the last version, from every version's claims.
			m.patch(ctx, ro, `{"spec":{"undo":true}}`)
			m.waitRollout(ctx, ro, "reverted by controller "+last.Name, func(r *v1alpha1.ConfigRollout) bool {
				return r.Status.Phase == v1alpha1.PhaseReverted && r.Status.Reverting == 0 && len(m.claims(ctx, r)) == 0
			})
			m.waitFleetOn(ctx, old)
		})
	}
}

// names lists the versions' names, "N-2 -> N-1 -> N".
func names(vs []*version) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return strings.Join(out, " -> ")
}

// patch applies a JSON merge patch to the part's ConfigRollout name.
func (m *matrix) patch(ctx context.Context, name, patch string) {
	m.t.Helper()
	if _, err := m.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(m.ns).Patch(ctx, name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		m.t.Fatalf("patching ConfigRollout %s with %s: %v", name, patch, err)
	}
}
