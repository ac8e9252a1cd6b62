package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// withMessageOf returns a copy of next that carries prev's Progressing
// message (status.message and the Progressing condition's message) when
// both are Progressing in the same step. That message says the step's
// counts (plan's "step 2 of 3: target 20 of 40 nodes, 10 assigned, 5
// promoted"), so a change of it alone is counts moving, and the write may
// be coalesced like theirs (Options.StatusInterval).
func withMessageOf(prev, next *v1alpha1.ConfigRolloutStatus) v1alpha1.ConfigRolloutStatus {
	rest := *next
	if prev.Phase != v1alpha1.PhaseProgressing || next.Phase != v1alpha1.PhaseProgressing || prev.CurrentStep != next.CurrentStep {
		return rest
	}
	rest.Message = prev.Message
	was := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionProgressing)
	if was == nil {
		return rest
	}
	rest.Conditions = append(rest.Conditions[:0:0], next.Conditions...)
	if c := meta.FindStatusCondition(rest.Conditions, v1alpha1.ConditionProgressing); c != nil && c.Status == was.Status {
		c.Message = was.Message
	}
	return rest
}
