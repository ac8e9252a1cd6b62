package plan

import (
	"fmt"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// StepName says step index i (status.currentStep, a claim's step) of a
// rollout of n steps the way people count spec.steps: "step 2 of 3" for
// index 1. The index stays 0-based where it is a field or a path
// (status.currentStep, spec.steps[1]).
func StepName(i int32, n int) string {
	return fmt.Sprintf("step %d of %d", i+1, n)
}

// stepName is StepName for the rollout being planned.
func (p *planner) stepName(i int32) string {
	return StepName(i, len(p.r.Spec.Steps))
}

// progress is the message of a node step in progress: its target apart
// from where the nodes are, so that a step whose nodes are all assigned
// does not read as done ("step 2 of 3: target 20 of 40 nodes, 20
// assigned, 5 promoted"). Written after the step's assignments.
func (p *planner) progress(i int32, target, selected int) string {
	promoted, failed := p.countState(v1alpha1.NodePromoted), p.countState(v1alpha1.NodeFailed)
	assigned := p.countState(v1alpha1.NodeTrial) + promoted + failed
	msg := fmt.Sprintf("%s: target %d of %d nodes, %d assigned, %d promoted", p.stepName(i), target, selected, assigned, promoted)
	if failed > 0 {
		msg += fmt.Sprintf(", %d failed", failed)
	}
	return msg
}
