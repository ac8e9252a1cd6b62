package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// The Progressing message says the step's counts: when only they move, the
// status write is coalesced as a change of the counts alone is.
func TestOnlyCountsMovedInTheMessage(t *testing.T) {
	status := func(phase v1alpha1.RolloutPhase, step int32, msg string, promoted int32) *v1alpha1.ConfigRolloutStatus {
		return &v1alpha1.ConfigRolloutStatus{
			Phase: phase, CurrentStep: step, Message: msg, Selected: 40, Assigned: 10, Promoted: promoted, InTrial: 10 - promoted,
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: string(phase), Message: msg},
				{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionFalse, Reason: "NoOverlap"},
			},
		}
	}
	prev := status(v1alpha1.PhaseProgressing, 1, "step 2 of 3: target 20 of 40 nodes, 10 assigned, 4 promoted", 4)
	for _, tc := range []struct {
		name string
		next *v1alpha1.ConfigRolloutStatus
		want bool
	}{
		{"a node promoted", status(v1alpha1.PhaseProgressing, 1, "step 2 of 3: target 20 of 40 nodes, 10 assigned, 5 promoted", 5), true},
		{"the next step", status(v1alpha1.PhaseProgressing, 2, "step 3 of 3: target 40 of 40 nodes, 10 assigned, 5 promoted", 5), false},
		{"paused", status(v1alpha1.PhasePaused, 1, "paused at step 2 of 3: spec.paused is true", 5), false},
		{"a conflict besides", func() *v1alpha1.ConfigRolloutStatus {
			s := status(v1alpha1.PhaseProgressing, 1, "step 2 of 3: target 20 of 40 nodes, 10 assigned, 5 promoted", 5)
			s.Conditions[1].Status = metav1.ConditionTrue
			return s
		}(), false},
	} {
		if got := onlyCountsMoved(prev, tc.next); got != tc.want {
			t.Errorf("%s: onlyCountsMoved = %v, want %v", tc.name, got, tc.want)
		}
		if tc.next.Message == prev.Message {
			t.Errorf("%s: the test's message did not change", tc.name)
		}
	}
	if prev.Conditions[0].Message != prev.Message {
		t.Error("withMessageOf wrote into its argument's conditions")
	}
}
