package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// claimWrites counts the claim-only patches of a node in the last plan.
func claimWrites(res Result, node string) int {
	n := 0
	for _, p := range res.Patches {
		if p.Node == node && p.ClaimOnly {
			n++
		}
	}
	return n
}

// TestSoakSurvivesALeaderChange: the soak of a node promoted outright
// starts when the plan first sees it promoted, and that start is written
// into its claim once (nodeapi.GateMemory.SoakStarted, one claim-only
// patch); a new controller, whose gates first see the node promoted
// minutes later (Analysis.PromotedAt then), ends the soak when the claim
// says, not a soak after its own first sight. Before, the soak start was
// the analyzer's memory only, and a leader change started it again.
func TestSoakSurvivesALeaderChange(t *testing.T) {
	w := newWorld(t, 2, countStep(1), percentStep("100%"))
	withAnalysis(w, 5*time.Minute)
	w.plan()
	w.promote("node-000")
	w.now = w.now.Add(time.Second)
	start := w.now
	w.verdict("node-000", "", time.Time{}, start)
	w.plan()
	if got := claimWrites(w.last, "node-000"); got != 1 {
		t.Fatalf("%d claim-only patches of node-000 when its soak started, want 1 (its soak start): %+v", got, w.last.Patches)
	}
	c := w.claim(w.node("node-000"))
	if c == nil || c.Gates == nil || c.Gates.SoakStarted == nil || !c.Gates.SoakStarted.Time.Equal(start) {
		t.Fatalf("node-000's claim %+v, want its soak start %v in it", c, start)
	}
	w.now = w.now.Add(time.Minute)
	w.verdict("node-000", "", w.now, start)
	w.plan()
	if got := claimWrites(w.last, "node-000"); got != 0 {
		t.Fatalf("%d claim-only patches of node-000 once its claim carries its soak start, want 0", got)
	}

	// The leader changes 3 minutes into the soak: the new controller's
	// gates see the node promoted from now on.
	w.now = start.Add(3 * time.Minute)
	leader := w.now
	w.verdict("node-000", "", time.Time{}, leader)
	w.plan()
	if got := claimWrites(w.last, "node-000"); got != 0 {
		t.Errorf("the new leader wrote node-000's claim %d times, want 0: %+v", got, w.last.Patches)
	}
	if got, want := w.last.RequeueAfter, 2*time.Minute; got != want {
		t.Errorf("the new leader plans again after %v, want %v: the soak's end as the claim says", got, want)
	}
	// The soak ends 5 minutes after it started, as the claim says.
	w.now = start.Add(5*time.Minute + time.Second)
	w.verdict("node-000", "", w.now, leader)
	w.plan()
	if got := w.assigning(); !cmp.Equal(got, []string{"node-001"}) || w.r.Status.Promoted != 1 {
		t.Fatalf("5m after the soak started (2m after the leader change): assigning %v, promoted %d; want node-000 passed and node-001 assigned",
			got, w.r.Status.Promoted)
	}
	if c := w.claim(w.node("node-000")); c.Passed == nil || c.Gates == nil || !c.Gates.SoakStarted.Time.Equal(start) {
		t.Errorf("node-000's claim after the pass %+v, want the pass and its soak start kept", c)
	}
}

// TestHeldSoakNeedsNoWrite: a node that holds its promotion for the gates
// soaks from the end of its trial, which it reports itself
// (ConfigStatus.TrialEnds): no claim write starts its soak, and a new
// leader ends it on time.
func TestHeldSoakNeedsNoWrite(t *testing.T) {
	w := newWorld(t, 2, countStep(1), percentStep("100%"))
	withAnalysis(w, 5*time.Minute)
	w.plan()
	n := w.node("node-000")
	ends := metav1.NewTime(w.now.Add(10 * time.Second))
	n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: newSource(), Active: newSource(), LastKnownGood: oldSource(), TrialEnds: &ends}
	for _, at := range []time.Duration{10 * time.Second, time.Minute, 3 * time.Minute} {
		w.now = ends.Time.Add(at - 10*time.Second)
		w.verdict("node-000", "", w.now, w.now) // a new leader at each look
		w.plan()
		if got := claimWrites(w.last, "node-000"); got != 0 {
			t.Fatalf("%v after the trial: %d claim-only patches of the held node-000, want 0", at, got)
		}
		if wt := w.last.Watch; len(wt) != 1 || !wt[0].Promoted {
			t.Fatalf("watch %+v, want node-000 soaking", wt)
		}
	}
	w.now = ends.Time.Add(5*time.Minute + time.Second)
	w.verdict("node-000", "", w.now, w.now)
	w.plan()
	if c := w.claim(n); c == nil || c.Passed == nil || c.Gates != nil {
		t.Fatalf("5m after the trial ended: claim %+v, want the pass (and no gate memory: no pods gate)", c)
	}
	w.wantPhase(v1alpha1.PhaseProgressing)
}

// TestSoakOfANodeWithoutMemory: a node an older controller assigned and
// saw promoted carries no soak start: this controller starts its soak
// when it first sees it promoted, and writes that start.
func TestSoakOfANodeWithoutMemory(t *testing.T) {
	w := newWorld(t, 2, countStep(1), percentStep("100%"))
	withAnalysis(w, time.Minute)
	w.plan()
	w.promote("node-000")
	// An older controller wrote the claim: no gate memory.
	c := w.claim(w.node("node-000"))
	c.Gates = nil
	enc, _ := nodeapi.EncodeClaim(c)
	w.node("node-000").Claim = &enc
	w.now = w.now.Add(10 * time.Minute)
	first := w.now
	w.verdict("node-000", "", w.now, first)
	w.plan()
	if c := w.claim(w.node("node-000")); c.Gates == nil || c.Gates.SoakStarted == nil || !c.Gates.SoakStarted.Time.Equal(first) {
		t.Fatalf("claim %+v, want the soak started at this controller's first sight %v", c, first)
	}
	if w.r.Status.Promoted != 0 {
		t.Fatalf("promoted %d before its soak", w.r.Status.Promoted)
	}
}
