// The records an older controller kept of a rollout's nodes (status.nodes,
// status.previousSources): reading them and migrating them to claims.

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
