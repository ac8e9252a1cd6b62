// Judging the held nodes: where each stands, its failure, its progress
// deadline, and the halt that too many failures lead to.

package plan

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// observe works out where each held node stands. While the rollout was
// active, a node's verdict is final: a failure is written into its claim
// (the claim keeps it, not the status). Once the rollout ended, nodes are
// only counted.
func (p *planner) observe(active bool) {
	for _, name := range p.heldNames() {
		v := p.held[name]
		switch {
		case v.claim.Failed != "":
			v.state, v.reason = v1alpha1.NodeFailed, v.claim.Failed
		case p.ours == nil || !p.carries(v.n, p.ours):
			if !active {
				v.state = v1alpha1.NodeSuperseded
				continue
			}
			p.failNode(v, fmt.Sprintf("its assignment was changed by someone else (now %s)", describeAnnotation(v.n.Assignment)))
		case !active:
			v.state = v1alpha1.NodePromoted
			if s := v.n.Status; s == nil || s.Phase != nodeapi.PhasePromoted || !p.isOurs(s.Active) {
				v.state = v1alpha1.NodeTrial
			}
		default:
			p.judge(v)
		}
	}
}

// failNode fails a held node and writes the verdict into its claim.
func (p *planner) failNode(v *view, reason string) {
	v.state, v.reason = v1alpha1.NodeFailed, reason
	c := *v.claim
	c.Failed = reason
	if enc, err := nodeapi.EncodeClaim(&c); err == nil {
		v.claim = &c
		p.writeClaim(v, enc)
	}
	p.event(true, "NodeFailed", "node %s failed: %s", v.n.Name, reason)
}

// judge moves a node in trial to promoted or failed from its component's
// status, or fails it at its deadline.
func (p *planner) judge(v *view) {
	s := v.n.Status
	if s != nil {
		switch {
		case s.Phase == nodeapi.PhasePromoted && p.isOurs(s.Active):
			v.state = v1alpha1.NodePromoted
			p.gate(v, true) // a failed gate or the soak may hold it back
			return
		case (s.Phase == nodeapi.PhaseRolledBack || s.Phase == nodeapi.PhaseDeadEnd) && p.isOurs(s.Assigned):
			reason := fmt.Sprintf("%s reports %s", component(&p.r.Spec), s.Phase)
			if s.Error != "" {
				reason += ": " + s.Error
			}
			p.failNode(v, reason)
			return
		case p.notAppliedHere(v):
			return
		}
	}
	v.state = v1alpha1.NodeTrial
	if p.gate(v, false) {
		return
	}
	p.checkDeadline(v)
}

// checkDeadline fails a node that made no progress within the deadline,
// counted from its assignment or from the end of the trial it reports on
// the rollout's config, whichever is later. A phase this version does not
// know (a newer agent's) counts as a trial: its trial end moves the
// deadline too (nodeapi's skew rule: an unknown phase means wait).
func (p *planner) checkDeadline(v *view) {
	start := v.claim.AssignedAt.Time
	s := v.n.Status
	if s != nil && (s.Phase == nodeapi.PhaseTrial || !s.Phase.Known()) && p.isOurs(s.Active) && s.TrialEnds != nil && s.TrialEnds.After(start) {
		start = s.TrialEnds.Time
	}
	if pa := v.claim.Passed; pa != nil && pa.After(start) {
		start = pa.Time // a held node promotes once passed
	}
	end := start.Add(p.deadline)
	if p.in.Now.Before(end) {
		p.requeue(end.Sub(p.in.Now))
		return
	}
	last := "no status"
	switch {
	case v.n.StatusError != "":
		last = "an unreadable status: " + v.n.StatusError
	case s != nil:
		last = "phase " + string(s.Phase)
		if s.Error != "" {
			last += " (" + s.Error + ")"
		}
	}
	p.failNode(v, fmt.Sprintf("no progress within %v: the node reports %s", p.deadline, last))
}

func (p *planner) failures() (n int32, reasons []string) {
	n = p.st.LostFailures
	for _, name := range p.heldNames() {
		if v := p.held[name]; v.state == v1alpha1.NodeFailed {
			n++
			reasons = append(reasons, name+": "+v.reason)
		}
	}
	return n, reasons
}

func (p *planner) tooManyFailures() bool {
	n, reasons := p.failures()
	if n <= p.r.Spec.MaxFailures {
		return false
	}
	const shown = 3
	if len(reasons) > shown {
		reasons = append(reasons[:shown], fmt.Sprintf("and %d more", len(reasons)-shown))
	}
	p.halt("TooManyFailures", fmt.Sprintf("%d nodes failed, more than maxFailures %d: %s", n, p.r.Spec.MaxFailures, strings.Join(reasons, "; ")))
	return true
}

// halt stops the rollout and, with revertOnHalt, reverts its nodes.
func (p *planner) halt(reason, why string) {
	p.setPhase(v1alpha1.PhaseHalted, "halted: "+why)
	meta.SetStatusCondition(&p.st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionHalted, Status: metav1.ConditionTrue, Reason: reason,
		Message: truncate(why), ObservedGeneration: p.r.Generation, LastTransitionTime: p.now,
	})
	// Halt: no new assignment, not even one asked earlier in this plan.
	p.dropAssignments()
	p.event(true, "Halted", "halted at %s: %s", p.stepName(p.st.CurrentStep), why)
	if r := p.r.Spec.RevertOnHalt; r == nil || *r {
		n := p.revertAll("revertOnHalt")
		p.event(true, "Reverting", "reverting %d nodes to their previous source", n)
	}
}
