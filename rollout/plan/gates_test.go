package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func withAnalysis(w *world, soakFor time.Duration) {
	w.r.Spec.Analysis = &v1alpha1.RolloutAnalysis{}
	if soakFor > 0 {
		w.r.Spec.Analysis.Soak = &metav1.Duration{Duration: soakFor}
	}
}

// verdict sets what the gates say of a node: passed at checked, or failed.
func (w *world) verdict(name, failed string, checked, promoted time.Time) {
	w.node(name).Analysis = &Analysis{Failed: failed, CheckedAt: checked, PromotedAt: promoted}
}

func watched(res Result) []string {
	var out []string
	for _, wt := range res.Watch {
		out = append(out, wt.Node)
	}
	return out
}

// TestGateFailsCanaryInTrial: a canary whose gate fails while its
// component still reports trial (or even promoted) fails with the gate's
// reason in status.failures and a NodeFailed Event, the rollout halts and
// reverts it, and no other node is assigned.
func TestGateFailsCanaryInTrial(t *testing.T) {
	for _, promoted := range []bool{false, true} {
		t.Run(map[bool]string{false: "in trial", true: "promoted"}[promoted], func(t *testing.T) {
			w := newWorld(t, 6, countStep(1), percentStep("100%"))
			withAnalysis(w, time.Minute)
			w.plan()
			if got := w.assigning(); !cmp.Equal(got, []string{"node-000"}) {
				t.Fatalf("assigned %v", got)
			}
			if got := w.last.Watch; len(got) != 1 || got[0].Node != "node-000" || !got[0].Fresh || got[0].Promoted {
				t.Fatalf("watch %+v, want node-000, fresh", got)
			}
			if promoted {
				w.promote("node-000")
			}
			w.now = w.now.Add(10 * time.Second)
			w.verdict("node-000", "pods: 3 pods newly failed (OutOfpods)", time.Time{}, time.Time{})
			w.plan()
			w.wantPhase(v1alpha1.PhaseHalted)
			if got := w.reverting(); !cmp.Equal(got, []string{"node-000"}) || len(w.assigning()) != 0 {
				t.Fatalf("patches %+v, want a revert of node-000 only", w.last.Patches)
			}
			f := w.r.Status.Failures
			if len(f) != 1 || f[0].Node != "node-000" || f[0].Reason != "health gate pods: 3 pods newly failed (OutOfpods)" {
				t.Errorf("failures %+v", f)
			}
			if !w.hasEvent("NodeFailed") || !w.hasEvent("Halted") {
				t.Errorf("events %+v", w.last.Events)
			}
			if len(w.last.Watch) != 0 {
				t.Errorf("a halted rollout still watches %v", watched(w.last))
			}
		})
	}
}

// TestSoakHoldsTheStep: a promoted canary soaks: the step is not done,
// and it counts against maxUnavailable, until the soak is over and a
// verdict taken after it passed; a failure inside the soak fails it.
func TestSoakHoldsTheStep(t *testing.T) {
	w := newWorld(t, 4, countStep(1), percentStep("100%"))
	withAnalysis(w, 5*time.Minute)
	w.plan()
	w.promote("node-000")
	w.now = w.now.Add(time.Second)
	w.plan()
	promotedAt := w.now
	if len(w.assigning()) != 0 || w.r.Status.CurrentStep != 0 || w.r.Status.InTrial != 1 || w.r.Status.Promoted != 0 {
		t.Fatalf("soaking canary: assigning %v, step %d, inTrial %d, promoted %d", w.assigning(), w.r.Status.CurrentStep, w.r.Status.InTrial, w.r.Status.Promoted)
	}
	if got := w.last.Watch; len(got) != 1 || !got[0].Promoted || got[0].Fresh {
		t.Fatalf("watch %+v, want node-000 promoted", got)
	}
	if want := "step 1 of 2: target 1 of 4 nodes, 1 assigned, 0 promoted; 1 nodes in their soak after promotion (5m0s)"; w.r.Status.Message != want {
		t.Errorf("message %q, want %q", w.r.Status.Message, want)
	}
	if w.last.RequeueAfter != 5*time.Minute {
		t.Errorf("requeue after %v, want the soak's end", w.last.RequeueAfter)
	}
	// Passing verdicts inside the soak do not end it.
	w.now = promotedAt.Add(4 * time.Minute)
	w.verdict("node-000", "", w.now, promotedAt)
	w.plan()
	if len(w.assigning()) != 0 || w.r.Status.CurrentStep != 0 {
		t.Fatalf("inside the soak: assigning %v, step %d", w.assigning(), w.r.Status.CurrentStep)
	}
	// The soak is over, but the last verdict is older than its end.
	w.now = promotedAt.Add(5*time.Minute + time.Second)
	w.plan()
	if len(w.assigning()) != 0 || w.r.Status.CurrentStep != 0 {
		t.Fatalf("no verdict after the soak: assigning %v, step %d", w.assigning(), w.r.Status.CurrentStep)
	}
	// A verdict after the soak's end: done, the next step assigns.
	w.verdict("node-000", "", w.now, promotedAt)
	w.plan()
	if got := w.assigning(); !cmp.Equal(got, []string{"node-001"}) || w.r.Status.Promoted != 1 {
		t.Fatalf("after the soak: assigning %v, promoted %d", got, w.r.Status.Promoted)
	}
	// The pass is written into node-000's claim; it stays watched until
	// the Node is seen carrying it, and is watched no more after.
	if c := w.claim(w.node("node-000")); c == nil || c.Passed == nil || !c.Passed.Time.Equal(w.now) {
		t.Fatalf("node-000's claim after the pass: %+v", c)
	}
	if got := watched(w.last); !cmp.Equal(got, []string{"node-000", "node-001"}) {
		t.Errorf("watch %v, want node-000 (its pass not seen on the Node yet) and node-001", got)
	}
	w.plan()
	if got := watched(w.last); !cmp.Equal(got, []string{"node-001"}) || w.r.Status.Promoted != 1 {
		t.Errorf("watch %v, promoted %d: want node-001 only, node-000 promoted", got, w.r.Status.Promoted)
	}

	// node-001 promotes, then fails a gate inside its soak.
	w.promote("node-001")
	w.now = w.now.Add(time.Second)
	w.plan()
	w.now = w.now.Add(time.Minute)
	w.verdict("node-001", "node: MemoryPressure turned True", w.now, w.now.Add(-time.Minute))
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	if got := w.reverting(); !slices.Contains(got, "node-001") {
		t.Errorf("reverting %v, want node-001 among them", got)
	}
	if !strings.Contains(w.r.Status.Message, "health gate node: MemoryPressure turned True") {
		t.Errorf("message %q", w.r.Status.Message)
	}
}

// TestSoakNoVerdictTimesOut: a soak whose gates never reach a verdict
// fails the node at the progress deadline after the soak.
func TestSoakNoVerdictTimesOut(t *testing.T) {
	w := newWorld(t, 2, countStep(1), percentStep("100%"))
	withAnalysis(w, time.Minute)
	w.r.Spec.ProgressDeadlineSeconds = new(int32(60))
	w.plan()
	w.promote("node-000")
	w.plan()
	w.verdict("node-000", "", time.Time{}, w.now) // promoted now; no check ever completes
	w.now = w.now.Add(time.Minute + 30*time.Second)
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	w.now = w.now.Add(time.Minute)
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	if f := w.r.Status.Failures; len(f) != 1 || !strings.Contains(f[0].Reason, "no verdict") {
		t.Errorf("failures %+v", f)
	}
}

// TestNoAnalysisIgnoresVerdicts: without spec.analysis a verdict is not
// read and nothing is watched: the same failed gate walks on, and a rollout
// whose every node has pods that newly failed completes on its components'
// promotion (deploy/rollout/README.md: the node's own verdict only).
func TestNoAnalysisIgnoresVerdicts(t *testing.T) {
	w := newWorld(t, 3, countStep(1), percentStep("100%"))
	w.plan()
	w.promote("node-000")
	w.verdict("node-000", "pods: broken", w.now, w.now)
	w.plan()
	if got := w.assigning(); len(got) != 1 || len(w.last.Watch) != 0 {
		t.Fatalf("assigning %v, watch %v", got, w.last.Watch)
	}
	for range 10 {
		w.promoteAll()
		for _, n := range w.nodes {
			w.verdict(n.Name, "pods: 1 pods newly failed since the node was assigned (maxNewFailures 0): default/web-2 (OutOfpods)", w.now, w.now)
		}
		w.now = w.now.Add(time.Second)
		w.plan()
		if len(w.last.Watch) != 0 {
			t.Fatalf("watch %v without spec.analysis", watched(w.last))
		}
	}
	w.wantPhase(v1alpha1.PhaseCompleted)
	if w.r.Status.Promoted != 3 || w.r.Status.Failed != 0 {
		t.Errorf("promoted %d, failed %d: want 3 and 0", w.r.Status.Promoted, w.r.Status.Failed)
	}
}

// TestSoakZeroNeedsOneVerdict: with no soak, a promoted node is done once
// a passing verdict taken at or after its promotion is in.
func TestSoakZeroNeedsOneVerdict(t *testing.T) {
	w := newWorld(t, 3, countStep(1), percentStep("100%"))
	withAnalysis(w, 0)
	w.plan()
	w.promote("node-000")
	w.now = w.now.Add(time.Second)
	w.plan()
	if len(w.assigning()) != 0 {
		t.Fatalf("done without a verdict: assigning %v", w.assigning())
	}
	w.verdict("node-000", "", w.now.Add(-time.Millisecond), w.now)
	w.plan()
	if len(w.assigning()) != 0 {
		t.Fatalf("done on a verdict older than the promotion: assigning %v", w.assigning())
	}
	w.verdict("node-000", "", w.now, w.now)
	w.plan()
	if got := w.assigning(); len(got) != 1 {
		t.Fatalf("assigning %v after a verdict", got)
	}
}

// gateModel plays the rollout controller's analyzer (package
// rollout/controller, analysis.go) as far as Plan sees it: it remembers
// only the nodes the last plan asked to watch (it forgets the others), and
// notes a node's promotion the first time a watch says so. With auto set it
// reads the Node conditions at each plan, so that (no other check) every
// gate has a verdict taken at the plan's time: passing, unless failing
// names the node; else the verdicts are whatever was set last.
type gateModel struct {
	nodes   map[string]*gateMem
	auto    bool
	failing map[string]string
}

type gateMem struct {
	promotedAt, checkedAt time.Time
	failed                string
}

func newGateModel() *gateModel {
	return &gateModel{nodes: map[string]*gateMem{}, failing: map[string]string{}}
}

// fill sets every node's Analysis as the analyzer hands it to a plan: nil
// for a node it does not watch.
func (g *gateModel) fill(w *world) {
	for _, n := range w.nodes {
		n.Analysis = nil
		m := g.nodes[n.Name]
		if m == nil {
			continue
		}
		if g.auto {
			m.checkedAt, m.failed = w.now, g.failing[n.Name]
		}
		n.Analysis = &Analysis{PromotedAt: m.promotedAt, CheckedAt: m.checkedAt, Failed: m.failed}
	}
}

// watch takes a plan's Watch list, as the analyzer's watch does.
func (g *gateModel) watch(w *world, res Result) {
	keep := map[string]bool{}
	for _, wt := range res.Watch {
		keep[wt.Node] = true
		m := g.nodes[wt.Node]
		if m == nil {
			m = &gateMem{}
			g.nodes[wt.Node] = m
		}
		if wt.Promoted && m.promotedAt.IsZero() {
			m.promotedAt = w.now
		}
	}
	for name := range g.nodes {
		if !keep[name] {
			delete(g.nodes, name)
		}
	}
}

// TestSoakPassesTogether: a gated rollout with a soak over several nodes
// completes when every node is healthy. The verdicts change as nodes pass,
// as the analyzer hands them: a node that passed its soak is watched no
// more, so its next plans carry no verdict for it; that must not start its
// soak again (the nodes would take turns and never pass together).
func TestSoakPassesTogether(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		steps []v1alpha1.RolloutStep
		maxU  int32
	}{
		{"two nodes in one step", 2, []v1alpha1.RolloutStep{percentStep("100%")}, 2},
		{"canary then the rest", 3, []v1alpha1.RolloutStep{countStep(1), percentStep("100%")}, 2},
		{"one at a time", 4, []v1alpha1.RolloutStep{countStep(1), countStep(2), percentStep("100%")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.nodes, tc.steps...)
			w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(tc.maxU))
			withAnalysis(w, time.Minute)
			g := newGateModel()
			g.auto = true
			passed := map[string]bool{} // watched promoted, then let go
			var soaking []string
			for round := range 200 {
				g.fill(w)
				res := w.plan()
				g.watch(w, res)
				for _, name := range watched(res) {
					if passed[name] {
						t.Fatalf("round %d: node %s passed its soak and is soaking again (watch %v)", round, name, watched(res))
					}
				}
				for _, name := range soaking {
					if !slices.Contains(watched(res), name) {
						passed[name] = true
					}
				}
				soaking = soaking[:0]
				for _, wt := range res.Watch {
					if wt.Promoted {
						soaking = append(soaking, wt.Node)
					}
				}
				if w.r.Status.Phase != v1alpha1.PhaseProgressing {
					break
				}
				// The components promote one a round, the first the round
				// after its assignment: their soaks end at different times.
				for _, n := range w.nodes {
					if w.carriesNew(n) && (n.Status == nil || n.Status.Phase != nodeapi.PhasePromoted || !sameSource(n.Status.Active, newSource())) {
						w.promote(n.Name)
						break
					}
				}
				w.now = w.now.Add(10 * time.Second)
			}
			w.wantPhase(v1alpha1.PhaseCompleted)
			if int(w.r.Status.Promoted) != tc.nodes {
				t.Errorf("completed with %d promoted, want %d", w.r.Status.Promoted, tc.nodes)
			}
		})
	}
}

// holdingComponent plays a component that honors its claim's hold
// (nodeapi.Claim.PromotionHeld): on the rollout's config it reports its
// trial over (at the end it first reports, as a component reports the
// end of its trial by uptime) and keeps its last-known-good while held,
// and promotes once the hold lifts. It returns the nodes that promoted in
// this call.
func holdingComponent(w *world) []string {
	var promoted []string
	for _, n := range w.nodes {
		if !w.carriesNew(n) {
			continue
		}
		if c := w.claim(n); c.PromotionHeld(w.now) {
			if s := n.Status; s != nil && s.Phase == nodeapi.PhaseTrial && sameSource(s.Active, newSource()) && s.TrialEnds != nil {
				continue
			}
			ends := metav1.NewTime(w.now.Add(-time.Second))
			n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: newSource(), Active: newSource(), LastKnownGood: n.Status.LastKnownGood, TrialEnds: &ends}
			continue
		}
		if n.Status.Phase != nodeapi.PhasePromoted || !sameSource(n.Status.Active, newSource()) {
			w.promote(n.Name)
			promoted = append(promoted, n.Name)
		}
	}
	return promoted
}

// TestGatedNodeHoldsPromotion: a gated rollout asks its nodes to hold the
// promotion of its config (the claim's holdUntil) until the gates pass
// them. A node that honors it soaks with its trial over and its old
// last-known-good, is passed (the claim's passed), then promotes; the
// rollout completes. A node whose gate fails in the soak never promoted:
// after the revert its last-known-good is still the config it had, never
// the one the fleet rejected.
func TestGatedNodeHoldsPromotion(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		w := newWorld(t, 3, countStep(1), percentStep("100%"))
		w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		withAnalysis(w, time.Minute)
		g := newGateModel()
		g.auto = true
		for range 100 {
			g.fill(w)
			w.plan()
			g.watch(w, w.last)
			for _, name := range holdingComponent(w) {
				if c := w.claim(w.node(name)); c == nil || c.Passed == nil {
					t.Fatalf("node %s promoted before the gates passed it: claim %+v", name, c)
				}
			}
			if w.r.Status.Phase != v1alpha1.PhaseProgressing {
				break
			}
			w.now = w.now.Add(10 * time.Second)
		}
		w.wantPhase(v1alpha1.PhaseCompleted)
		if w.r.Status.Promoted != 3 {
			t.Errorf("promoted %d, want 3", w.r.Status.Promoted)
		}
	})
	t.Run("a gate fails in the soak", func(t *testing.T) {
		w := newWorld(t, 3, countStep(1), percentStep("100%"))
		withAnalysis(w, time.Minute)
		g := newGateModel()
		g.auto = true
		w.plan() // assigns node-000
		c := w.claim(w.node("node-000"))
		if c == nil || c.HoldUntil == nil || !c.HoldUntil.Time.Equal(w.now.Add(time.Minute+2*DefaultProgressDeadline)) {
			t.Fatalf("claim of the canary %+v, want a hold until its soak and two deadlines are over", c)
		}
		g.watch(w, w.last)
		for range 4 { // its trial ends, its soak starts
			holdingComponent(w)
			w.now = w.now.Add(10 * time.Second)
			g.fill(w)
			w.plan()
			g.watch(w, w.last)
		}
		if got := w.last.Watch; len(got) != 1 || !got[0].Promoted {
			t.Fatalf("watch %+v, want the canary soaking", got)
		}
		g.failing["node-000"] = "pods: 1 pods newly failed since the node was assigned (maxNewFailures 0): default/web-2 (OutOfpods)"
		g.fill(w)
		w.plan()
		w.wantPhase(v1alpha1.PhaseHalted)
		w.settleReverts()
		n := w.node("node-000")
		if n.Status.LastKnownGood != nil && sameSource(n.Status.LastKnownGood, newSource()) {
			t.Fatalf("the canary's last-known-good is the config the fleet rejected: %+v", n.Status)
		}
		if w.carriesNew(n) {
			t.Fatalf("the canary was not reverted")
		}
	})
}

// TestHeldNodePlannedAtTrialEnd: a node that holds its promotion reports
// nothing new when its trial ends, so the plan asks to be planned again
// then: its soak starts on time, not at the next unrelated event.
func TestHeldNodePlannedAtTrialEnd(t *testing.T) {
	w := newWorld(t, 2, countStep(1), percentStep("100%"))
	withAnalysis(w, 10*time.Second)
	w.plan()
	ends := metav1.NewTime(w.now.Add(5 * time.Second))
	w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: newSource(), Active: newSource(), TrialEnds: &ends}
	w.now = w.now.Add(time.Second)
	w.plan()
	if got := w.last.RequeueAfter; got != 4*time.Second {
		t.Fatalf("requeue after %v, want 4s: when the held node's trial ends", got)
	}
	w.now = ends.Time
	w.plan()
	if got := w.last.Watch; len(got) != 1 || !got[0].Promoted {
		t.Fatalf("watch %+v at the end of the trial, want node-000 soaking", got)
	}
}
