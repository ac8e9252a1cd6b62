package controller

import (
	"time"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// defaultStatusInterval is Options.StatusInterval's default: at most one
// status write (and one round of assignments) a rollout every 2 seconds
// while only its counts move. A rolling step assigns a node as another
// promotes: planned at once, each promotion was a plan that assigned a
// node or two and wrote the status (112 status writes for a 1,000-node
// rollout here, 0.11 requests a node). Waiting, the freed slots are
// assigned together; a slot waits at most this long, against trials of
// minutes.
const defaultStatusInterval = 2 * time.Second

// quiet reports whether a plan's result may wait for the rollout's next
// status write (Options.StatusInterval): its status differs from prev
// only in the counts that move as nodes report and are assigned (and the
// history entries of those assignments), and all it does besides is
// assign nodes of the current step (no revert, no claim alone) with their
// Assigned Event, while nodes are in trial. Such a result is dropped, not postponed: the plan after
// the interval assigns those nodes again, with whatever else became free
// meanwhile, and writes the status once. Every other change (a step, a
// failure, a revert, a condition) is written and done at once.
func quiet(prev *v1alpha1.ConfigRolloutStatus, res *plan.Result) bool {
	if len(res.Patches) > 0 && prev.InTrial == 0 {
		// Assignments into an empty window (a step's first, the
		// rollout's): nothing to gather them with.
		return false
	}
	for _, p := range res.Patches {
		if p.Revert || p.ClaimOnly {
			return false
		}
	}
	for _, e := range res.Events {
		if e.Reason != assignedReason {
			return false
		}
	}
	next := res.Status
	if len(res.Events) > 0 {
		next.History = prev.History // the Assigned entries, redone later
	}
	return onlyCountsMoved(prev, &next)
}

// assignedReason is the reason of the Event a plan records when it
// assigns nodes of the current step (package plan).
const assignedReason = "Assigned"
