package plan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// gateRecheck is how soon a node whose soak is over is planned again
// while it waits for a verdict of its gates taken after the soak (the
// controller also plans it as soon as a check completes).
const gateRecheck = 5 * time.Second

// Analysis is what the caller observed of one node's health gates
// (spec.analysis). Plan does not run the gates: it reads their verdict.
type Analysis struct {
	// Failed says which gate failed and why; "" while none did.
	Failed string
	// CheckedAt is when every gate last had a verdict: each one ran, and
	// passed, at or after it. Zero: not every gate ran yet.
	CheckedAt time.Time
	// PromotedAt is when the caller first saw the node's component report
	// the config promoted (Watch.Promoted); zero: not yet seen, and Plan
	// takes its own Now. A node whose claim carries no soak start, and
	// that does not hold its promotion, soaks from it, and Plan writes it
	// into the claim (soakStart): the next controller reads it there.
	PromotedAt time.Time
}

// Watch is a node whose health gates the caller is to run: in trial, or
// promoted and in its soak.
type Watch struct {
	// Node is the Node's name.
	Node string
	// AssignedAt is when the rollout assigned it: what the gates call new
	// happened after it.
	AssignedAt time.Time
	// Promoted is whether its soak runs: its component reports the config
	// promoted, or ran it for its whole trial and holds its promotion for
	// the gates (nodeapi.Claim.HoldUntil).
	Promoted bool
	// Fresh is whether this plan assigns it (the patch is not made yet):
	// the caller takes what the gates compare with (the pods that failed
	// already) before it makes the patch.
	Fresh bool
	// Pods is the pod baseline the node's claim carries
	// (nodeapi.GateMemory.Pods), taken before its assignment by the
	// controller that assigned it; nil when it carries none (a Fresh node,
	// or one assigned by a controller from before the field). The caller
	// judges the node's pods against it, not against a baseline it would
	// take now, after the assignment.
	Pods *nodeapi.PodBaseline
}

// soak returns spec.analysis.soak (0 when unset).
func soak(a *v1alpha1.RolloutAnalysis) time.Duration {
	if a == nil || a.Soak == nil || a.Soak.Duration < 0 {
		return 0
	}
	return a.Soak.Duration
}

// holdFor is how long, past its assignment, a node of a gated rollout
// holds the promotion of the config (nodeapi.Claim.HoldUntil) when the
// gates never say: the soak and a progress deadline on either side of it.
func (p *planner) holdFor() time.Duration {
	return soak(p.r.Spec.Analysis) + 2*p.deadline
}

// heldTrialOver reports whether a node's component ran the rollout's config
// for its whole trial and holds its promotion for the gates (its claim asks
// for it, nodeapi.Claim.PromotionHeld): its soak runs, as a promoted node's
// does, so that the gates can pass it.
func (p *planner) heldTrialOver(v *view) bool {
	s := v.n.Status
	return v.claim.HoldUntil != nil && s != nil && s.Phase == nodeapi.PhaseTrial && p.isOurs(s.Active) &&
		s.TrialEnds != nil && !s.TrialEnds.Time.After(p.in.Now)
}

// gate applies the health gates to a held node of an active rollout,
// after its component's status was read: a node with a failed gate fails;
// a node whose soak runs (promoted, or done with its trial and holding its
// promotion for the gates) stays in Trial (and counts against
// maxUnavailable) until its soak is over and its gates passed after that;
// then the pass is written into its claim, and a held node promotes. It
// reports whether it settled the node (failed it, or decided its
// promotion); false leaves a node in trial to its deadline.
func (p *planner) gate(v *view, promoted bool) bool {
	an := p.r.Spec.Analysis
	if an == nil {
		return false
	}
	if v.claim.Passed != nil {
		// Passed before: final. The caller watches the node no more, so
		// no verdict comes for it, and none is needed. A held node
		// promotes now; until it does, its deadline runs.
		if promoted {
			v.state = v1alpha1.NodePromoted
			return true
		}
		return false
	}
	a := v.n.Analysis
	if a != nil && a.Failed != "" {
		p.failNode(v, "health gate "+a.Failed)
		return true
	}
	if !promoted && !p.heldTrialOver(v) {
		if s := v.n.Status; v.claim.HoldUntil != nil && s != nil && s.Phase == nodeapi.PhaseTrial && p.isOurs(s.Active) && s.TrialEnds != nil {
			// Its soak starts when its trial ends; the node reports
			// nothing new then (it holds): plan again at that time.
			p.requeue(s.TrialEnds.Time.Sub(p.in.Now))
		}
		return false
	}
	end := p.soakStart(v).Add(soak(an))
	switch {
	case p.in.Now.Before(end):
		p.requeue(end.Sub(p.in.Now))
	case a == nil || a.CheckedAt.Before(end):
		// The soak is over, but no verdict covers its end yet: wait for
		// one, up to the progress deadline.
		if limit := end.Add(p.deadline); !p.in.Now.Before(limit) {
			p.failNode(v, fmt.Sprintf("health gates: no verdict within %v after the soak ended (the checks did not complete)", p.deadline))
			return true
		}
		p.requeue(gateRecheck)
	default:
		p.passNode(v, promoted)
		return promoted
	}
	v.state = v1alpha1.NodeTrial
	return true
}

// soakStart returns when a node's soak began, from what survives a change
// of the controller: the soak start its claim carries
// (nodeapi.GateMemory.SoakStarted); else, for a node that holds its
// promotion for the gates, the end of its trial, which the node reports
// (ConfigStatus.TrialEnds); else (a node promoted outright, by a component
// that does not hold) when the caller first saw it promoted, or now, which
// it writes into the claim once, so that the next controller reads it
// back rather than start the soak again. Without a soak there is nothing
// to remember: no write. A node assigned by a controller from before the
// field starts its soak when this one first sees it promoted.
func (p *planner) soakStart(v *view) time.Time {
	if g := v.claim.Gates; g != nil && g.SoakStarted != nil {
		return g.SoakStarted.Time
	}
	if p.heldTrialOver(v) {
		return v.n.Status.TrialEnds.Time
	}
	start := p.in.Now
	if a := v.n.Analysis; a != nil && !a.PromotedAt.IsZero() {
		start = a.PromotedAt
	}
	if soak(p.r.Spec.Analysis) > 0 {
		c := *v.claim
		g := nodeapi.GateMemory{}
		if c.Gates != nil {
			g = *c.Gates
		}
		// Whole seconds, as the claim keeps it, rounded up: the soak
		// is never shorter than spec.analysis.soak.
		t := metav1.NewTime(start.UTC().Add(time.Second - 1).Truncate(time.Second))
		g.SoakStarted, c.Gates = &t, &g
		if enc, err := nodeapi.EncodeClaim(&c); err == nil {
			v.claim = &c
			p.writeClaim(v, enc)
			return t.Time
		}
	}
	return start
}

// passNode passes a node whose gates passed after its soak and writes the
// verdict into its claim (Claim.Passed), as failNode writes a failure: the
// caller forgets the node's soak once it is watched no more, so the pass
// must be on the Node, or the next plan would see a promoted node with no
// verdict and start its soak again; and a node that holds its promotion
// for the gates reads it there. A promoted node is promoted; until the
// Node is seen carrying the pass, it stays watched (watches), so that a
// lost write is planned again from the same verdict. A held node stays in
// Trial until its component promotes.
func (p *planner) passNode(v *view, promoted bool) {
	v.state = v1alpha1.NodeTrial
	if promoted {
		v.state = v1alpha1.NodePromoted
	}
	c := *v.claim
	c.Passed = &p.now
	enc, err := nodeapi.EncodeClaim(&c)
	if err != nil {
		return // a claim that encoded before encodes with a time
	}
	v.claim, v.passing = &c, promoted
	p.writeClaim(v, enc)
}

// writeClaim asks for a node's claim to be written as enc: in the patch
// this plan makes of the node anyway, else in a claim-only patch.
func (p *planner) writeClaim(v *view, enc string) {
	for i := range p.res.Patches {
		if pt := &p.res.Patches[i]; pt.Node == v.n.Name && !pt.Revert {
			pt.Claim = &enc
			return
		}
	}
	p.res.Patches = append(p.res.Patches, Patch{Node: v.n.Name, ResourceVersion: v.n.ResourceVersion, ClaimOnly: true, Claim: &enc})
}

// soakNote is the part of a progressing rollout's status message that
// says how many promoted nodes are still in their soak (they hold the
// step): "" without spec.analysis or with none soaking.
func (p *planner) soakNote() string {
	if p.r.Spec.Analysis == nil {
		return ""
	}
	n := 0
	for _, w := range p.watches() {
		if v := p.held[w.Node]; w.Promoted && v.state == v1alpha1.NodeTrial && v.claim.Passed == nil {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d nodes in their soak after promotion (%v)", n, soak(p.r.Spec.Analysis))
}

// watches lists the nodes whose gates the caller is to run: the held
// nodes in trial (soaking ones included) while the rollout is active and
// has spec.analysis, and the ones this plan passed (passNode), until their
// Node carries the pass.
func (p *planner) watches() []Watch {
	if p.r.Spec.Analysis == nil || !p.st.Phase.Active() || p.r.DeletionTimestamp != nil {
		return nil
	}
	var out []Watch
	for _, name := range p.heldNames() {
		v := p.held[name]
		if v.state != v1alpha1.NodeTrial && !(v.passing && v.state == v1alpha1.NodePromoted) {
			continue
		}
		s := v.n.Status
		var pods *nodeapi.PodBaseline
		if g := v.claim.Gates; g != nil {
			pods = g.Pods
		}
		out = append(out, Watch{
			Node: name, AssignedAt: v.claim.AssignedAt.Time, Fresh: v.fresh, Pods: pods,
			Promoted: !v.fresh && (s != nil && s.Phase == nodeapi.PhasePromoted && p.isOurs(s.Active) || p.heldTrialOver(v)),
		})
	}
	return out
}
