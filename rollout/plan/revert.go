// Putting nodes back (undo, deletion, revertOnHalt), the claims a revert
// restores, and the Finalizer.

package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// revertMode reports whether the rollout puts its nodes back: undone, or
// halted with revertOnHalt (a deletion while active is a revert too).
func (p *planner) revertMode() bool {
	switch p.st.Phase {
	case v1alpha1.PhaseReverted:
		return true
	case v1alpha1.PhaseHalted:
		r := p.r.Spec.RevertOnHalt
		return r == nil || *r
	}
	return false
}

// deleted stops a rollout that is being deleted. An active one puts every
// node it changed back on its previous source first, as a halt with
// revertOnHalt does: nothing else would put them back once the object is
// gone. A rollout that already ended (completed, aborted, halted,
// reverted) and puts no node back leaves its nodes as they are, claims
// included: once it is gone they are stale, and the next rollout that
// assigns such a node takes it (takeable) and writes its own claim in the
// same PATCH. Deleting it costs no request a node.
func (p *planner) deleted() {
	st := p.st
	switch {
	case !st.Phase.Active():
		return
	case st.ConfigMap == nil:
		p.setPhase(v1alpha1.PhaseAborted, "deleted before it started")
		p.event(false, "Deleted", "deleted before it started: no node was changed")
		return
	}
	// No new assignment, not even one asked earlier in this plan.
	p.dropAssignments()
	n := p.revertAll("deletion")
	p.setPhase(v1alpha1.PhaseReverted, fmt.Sprintf("deleted while active at %s: %d nodes put back on their previous source", p.stepName(st.CurrentStep), n))
	p.event(true, "Deleted", "deleted while active at %s: reverting %d nodes to their previous source before the ConfigRollout goes", p.stepName(st.CurrentStep), n)
}

// dropAssignments takes back the claims and assignments asked earlier in
// this plan: nothing was written yet. A node found failed on the way (its
// assignment is invalid) still counts.
func (p *planner) dropAssignments() {
	p.res.Patches = slices.DeleteFunc(p.res.Patches, func(pt Patch) bool {
		v, ok := p.held[pt.Node]
		if !ok || !v.fresh {
			return false
		}
		if v.state != v1alpha1.NodeFailed {
			delete(p.held, pt.Node)
		}
		return true
	})
}

// Finalizer is the finalizer the rollout controller keeps on a
// ConfigRollout while it is active or puts nodes back, so that deleting
// it reverts the nodes it changed before the object goes. Once it ended
// (and put back what it had to) the finalizer goes, though its claims stay
// on the Nodes (undo reverts from them while the rollout exists).
const Finalizer = "dynconfig.io/revert-records"

// finalized reports whether the rollout needs its finalizer no more: it
// is not active, no record of an older controller is left, and it puts no
// node back (a revert asked of a node that still carries its claim), so
// that deleting it has nothing to do. The claims of a rollout that ended
// without reverting stay: deleted, it leaves them stale (deleted).
func (p *planner) finalized() bool {
	if p.st.Phase.Active() || len(RecordedNodes(p.st)) > 0 {
		return false
	}
	if !p.revertMode() {
		return true
	}
	for _, v := range p.held {
		if !v.fresh {
			return false
		}
	}
	return true
}

// revertAll returns how many nodes the rollout holds: the ones reverts
// puts back.
func (p *planner) revertAll(string) int {
	return len(p.held)
}

// reverts asks, while the rollout puts its nodes back, for the patch of
// every node it holds: the previous source and no claim for one that
// carries the rollout's assignment, no claim for the others (their
// assignment is someone else's change, or already the previous one). A
// rollout being deleted after it ended asks nothing (deleted). A node
// that carries a claim rebuilt from an older controller's record gets it
// written.
func (p *planner) reverts() {
	var patched int
	revert := p.revertMode()
	asked := map[string]bool{}
	for _, pt := range p.res.Patches {
		asked[pt.Node] = true
	}
	for _, name := range p.heldNames() {
		v := p.held[name]
		if v.fresh && revert {
			continue // nothing written: nothing to put back
		}
		if !revert {
			p.writeRebuilt(name, v, asked)
			continue
		}
		pt := Patch{Node: name, ResourceVersion: v.n.ResourceVersion, Revert: true, ClaimOnly: true}
		switch {
		case p.ours != nil && p.carries(v.n, p.ours):
			pt.ClaimOnly = false
			if prev := v.claim.Previous; prev != nil {
				s, err := nodeapi.EncodeAssignment(prev) // valid: the claim decoded
				if err != nil {
					p.event(true, "NodeFailed", "node %s cannot be reverted: %v", name, err)
					continue
				}
				pt.Value = &s
			}
		case p.carries(v.n, v.claim.Previous):
		default:
			if v.claim.Failed == "" || !strings.HasPrefix(v.claim.Failed, "its assignment annotation is") {
				p.event(true, "NodeSuperseded", "node %s is not reverted: its assignment was changed by someone else (now %s)", name, describeAnnotation(v.n.Assignment))
			}
		}
		if pc := p.restorable(v.claim.PreviousClaim); pc != nil && p.revertMode() {
			// The claim this rollout replaced goes back with the
			// assignment, so that its rollout still holds the node.
			if enc, err := nodeapi.EncodeClaim(pc); err == nil {
				pt.Claim = &enc
			}
		}
		// The revert replaces any other patch of the node asked earlier
		// in this plan (a claim write of failNode or of the health gates,
		// or a claim rebuilt from an older controller's record).
		p.res.Patches = slices.DeleteFunc(p.res.Patches, func(o Patch) bool { return o.Node == name && !o.Revert })
		p.res.Patches = append(p.res.Patches, pt)
		patched++
	}
	if patched > 0 {
		p.requeue(30 * time.Second)
	}
}

// restorable returns the first claim of c's chain (c, its PreviousClaim,
// ...) whose rollout still exists: what a revert puts back on the node
// with its previous assignment. nil: none (a claim of a deleted rollout
// would never be taken off).
func (p *planner) restorable(c *nodeapi.Claim) *nodeapi.Claim {
	for ; c != nil; c = c.PreviousClaim {
		for _, o := range p.in.Others {
			if o.UID == c.UID && c.UID != p.r.UID {
				return c
			}
		}
	}
	return nil
}
