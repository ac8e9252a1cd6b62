// The records an older controller kept of a rollout's nodes (status.nodes,
// status.previousSources): every reading of them, in Plan and in the
// controller (RecordedNodes, RecordedReverting), and their migration to
// claims (migrate, writeRebuilt).

package plan

import (
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// migrate reads the per-node records an older controller kept in
// status.nodes: a record whose node still carries this rollout's
// assignment (and no claim yet) becomes a claim, written on the Node
// (alone, or with the revert when the rollout is putting its nodes back);
// the record stays until the Node is seen carrying the claim, or no longer
// carrying the rollout's assignment. A dropped record that counted as
// failed is kept in status.lostFailures.
func (p *planner) migrate() {
	st := p.st
	if len(st.Nodes) == 0 {
		st.PreviousSources = nil
		return
	}
	var kept []v1alpha1.NodeRecord
	for i := range st.Nodes {
		rec := st.Nodes[i]
		n, exists := p.nodes[rec.Name]
		_, claimed := p.held[rec.Name]
		terminal := rec.State == v1alpha1.NodeReverted || rec.State == v1alpha1.NodeGone ||
			rec.State == v1alpha1.NodeSuperseded || rec.State == v1alpha1.NodeSkipped
		prev, ok := st.PreviousOf(&rec)
		keep := exists && !claimed && !terminal && ok && p.ours != nil && p.carries(n, p.ours) && p.foreign[rec.Name] == nil && p.badClaim[rec.Name] == ""
		if !keep {
			switch {
			case exists && !claimed && !terminal && !ok:
				// A damaged record: putting back a guess could be worse
				// than leaving the node alone. It counts as failed.
				st.LostFailures++
				p.event(true, "NodeFailed", "node %s cannot be reverted: its status record (of an older controller) points outside status.previousSources (%d entries): the previous source is unknown, the node is left as it is",
					rec.Name, len(st.PreviousSources))
			case rec.CountsAsFailed() && !claimed:
				st.LostFailures++
			}
			continue
		}
		kept = append(kept, rec)
		c := &nodeapi.Claim{Namespace: p.r.Namespace, Name: p.r.Name, UID: p.r.UID, AssignedAt: rec.AssignedAt, Step: rec.Step}
		if prev != nil {
			c.Previous = prev.DeepCopy()
		}
		if rec.CountsAsFailed() {
			c.Failed = rec.Reason
			if c.Failed == "" {
				c.Failed = "failed (recorded by an older controller)"
			}
		}
		if c.AssignedAt.IsZero() {
			c.AssignedAt = p.now
		}
		if c.Step < 0 {
			c.Step = 0
		}
		if c.Validate() != nil {
			// A damaged record: nothing safe to put back; leave the node.
			st.LostFailures++
			kept = kept[:len(kept)-1]
			p.event(true, "NodeFailed", "node %s cannot be reverted: its status record of an older controller is damaged; the node is left as it is", rec.Name)
			continue
		}
		p.held[rec.Name] = &view{n: n, claim: c}
	}
	st.Nodes = kept
	if len(kept) == 0 {
		st.PreviousSources = nil
	}
}

// writeRebuilt asks, while the rollout does not put its nodes back, for
// the claim of a held node that is not on its Node and of which no patch
// is asked yet: a claim migrate rebuilt from an older controller's record
// (and also one this plan made for a node that failed on the way, whose
// patch a halt without revertOnHalt dropped: dropAssignments).
func (p *planner) writeRebuilt(name string, v *view, asked map[string]bool) {
	if !v.onNode && !asked[name] {
		enc, err := nodeapi.EncodeClaim(v.claim)
		if err == nil {
			p.res.Patches = append(p.res.Patches, Patch{Node: name, ResourceVersion: v.n.ResourceVersion, ClaimOnly: true, Claim: &enc})
		}
	}
}

// RecordedNodes returns the nodes an older controller recorded in a
// rollout's status.nodes, nil when none (so that nothing is left to
// migrate). While some are, the controller observes them for Plan, selected
// or not, and plans the rollout on their events; Plan keeps the rollout's
// Finalizer.
func RecordedNodes(st *v1alpha1.ConfigRolloutStatus) map[string]bool {
	if len(st.Nodes) == 0 {
		return nil
	}
	names := make(map[string]bool, len(st.Nodes))
	for _, rec := range st.Nodes {
		names[rec.Name] = true
	}
	return names
}

// RecordedReverting reports whether an older controller recorded a node
// of a rollout as still being put back (NodeReverting): until it is, the
// rollout holds its nodes (Other.Reverting).
func RecordedReverting(st *v1alpha1.ConfigRolloutStatus) bool {
	for _, rec := range st.Nodes {
		if rec.State == v1alpha1.NodeReverting {
			return true
		}
	}
	return false
}
