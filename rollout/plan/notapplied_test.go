package plan

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// notApply has the node report the new config not applied here (its drain
// timed out): it runs its previous config, nothing marked bad.
func (w *world) notApply(name, why string) {
	n := w.node(name)
	prev := n.Status.Active
	n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseNotApplied, Assigned: newSource(), Active: prev, LastKnownGood: prev, Error: why}
}

// TestNotAppliedIsNotAFailure: a canary that reports the config not
// applied here (nodeapi.PhaseNotApplied) does not halt a rollout with
// maxFailures 0, reverts nothing and is not failed at the progress
// deadline; it settles its step, the rollout goes on and completes, and
// the NotApplied condition and the messages name the node and why.
func TestNotAppliedIsNotAFailure(t *testing.T) {
	w := newWorld(t, 4, countStep(1), percentStep("100%"))
	w.plan()
	canary := w.assigning()
	if len(canary) != 1 {
		t.Fatalf("canary step assigned %v", canary)
	}
	why := "draining node " + canary[0] + " timed out: pod shop/web-1: Cannot evict pod as it would violate the pod's disruption budget"
	w.notApply(canary[0], why)
	// Past the progress deadline too.
	w.now = w.now.Add(time.Hour)
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if len(w.reverting()) != 0 || w.r.Status.Failed != 0 {
		t.Fatalf("patches %+v, failed %d: a node that could not apply the config is no failure", w.last.Patches, w.r.Status.Failed)
	}
	if st, _ := w.stateOf(canary[0]); st == v1alpha1.NodeFailed {
		t.Fatalf("%s failed", canary[0])
	}
	c := meta.FindStatusCondition(w.r.Status.Conditions, ConditionNotApplied)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, canary[0]) || !strings.Contains(c.Message, "disruption budget") {
		t.Fatalf("NotApplied condition %+v, want True naming %s and why", c, canary[0])
	}
	if !strings.Contains(w.r.Status.Message, "1 not applied here") {
		t.Fatalf("message %q does not count the node not applied", w.r.Status.Message)
	}
	if got := len(w.assigning()); got == 0 {
		t.Fatal("the second step assigned nothing: the node not applied holds the rollout")
	}
	for range 10 {
		if w.r.Status.Phase != v1alpha1.PhaseProgressing {
			break
		}
		w.promoteAll()
		w.notApply(canary[0], why)
		w.now = w.now.Add(time.Second)
		w.plan()
	}
	w.wantPhase(v1alpha1.PhaseCompleted)
	if st := w.r.Status; st.Promoted != 3 || st.Failed != 0 || st.Assigned != 4 || !strings.Contains(st.Message, canary[0]) {
		t.Fatalf("completed with %+v, want 3 promoted, 0 failed, 4 assigned, a message naming %s", st, canary[0])
	}
}
