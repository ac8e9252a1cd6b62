package plan

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func TestStepName(t *testing.T) {
	if got := StepName(0, 3); got != "step 1 of 3" {
		t.Errorf("StepName(0, 3) = %q", got)
	}
	if got := StepName(2, 3); got != "step 3 of 3" {
		t.Errorf("StepName(2, 3) = %q", got)
	}
}

// The messages count steps from 1 and say the step's target apart from its
// progress: "step 2: 20 of 20 nodes" used to read as done while half the
// nodes were still to be assigned, and index 0 was "step 0".
func TestProgressMessage(t *testing.T) {
	w := newWorld(t, 40, countStep(1), percentStep("50%"), pauseStep(0))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(10))
	res := w.plan()
	if want := "step 1 of 3: target 1 of 40 nodes, 1 assigned, 0 promoted"; w.r.Status.Message != want {
		t.Errorf("first step: %q, want %q", w.r.Status.Message, want)
	}
	var assigned string
	for _, e := range res.Events {
		if e.Reason == "Assigned" {
			assigned = e.Message
		}
	}
	if !strings.HasPrefix(assigned, "step 1 of 3: assigned 1 nodes") {
		t.Errorf("Assigned event %q, want it to name step 1 of 3", assigned)
	}
	w.promoteAll()
	w.plan()
	// Step 2's target is 20, 10 at a time (maxUnavailable).
	if want := "step 2 of 3: target 20 of 40 nodes, 11 assigned, 1 promoted"; w.r.Status.Message != want {
		t.Errorf("second step: %q, want %q", w.r.Status.Message, want)
	}
	w.promoteAll()
	w.plan()
	w.promoteAll()
	w.plan()
	if w.r.Status.Phase != v1alpha1.PhasePaused || !strings.Contains(w.r.Status.Message, "pause (step 3 of 3)") {
		t.Errorf("at the pause: %s %q", w.r.Status.Phase, w.r.Status.Message)
	}
}
