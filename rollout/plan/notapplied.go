package plan

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// ConditionNotApplied is True while some nodes the rollout assigned report
// nodeapi.PhaseNotApplied for its config; its message names them and why.
const ConditionNotApplied = "NotApplied"

// nodeNotApplied is the planner's state of a held node whose component
// reports nodeapi.PhaseNotApplied for the rollout's config: it could not
// apply the config here (the stock kubelet's Node could not be drained for
// it within its drain timeout: a PodDisruptionBudget that never allowed, a
// pod that would not go) and runs what it ran before, not marked bad. It
// is no verdict on the config, so the node is not failed (it counts
// against no maxFailures, halts nothing, reverts nothing) and not in trial
// (it holds no slot of maxUnavailable, and no progress deadline runs for
// it); a step counts it done, as it counts a failed node, so the rollout
// goes on to the other nodes and can complete. It still counts as
// assigned (the Node carries the assignment and the claim). The rollout
// names such nodes: the NotApplied condition (ConditionNotApplied), the
// progress and completion messages. The state lives only in the plan (it
// is recomputed from the Node's status on every plan; status.nodes, the
// only place a NodeState is written, is an older controller's, read only):
// a node that applies the config later (its agent tried again) moves on
// to Trial and Promoted like any other.
const nodeNotApplied v1alpha1.NodeState = "NotApplied"

// notAppliedHere reports whether the held node v reports the rollout's
// config not applied here, and if so puts it in nodeNotApplied.
func (p *planner) notAppliedHere(v *view) bool {
	s := v.n.Status
	if s == nil || s.Phase != nodeapi.PhaseNotApplied || !p.isOurs(s.Assigned) {
		return false
	}
	v.state, v.reason = nodeNotApplied, s.Error
	return true
}

// notAppliedNames returns the nodes in nodeNotApplied, sorted.
func (p *planner) notAppliedNames() []string {
	var names []string
	for name, v := range p.held {
		if v.state == nodeNotApplied {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// notAppliedNote is what the rollout's messages add while some nodes could
// not apply the config: "" when none.
func (p *planner) notAppliedNote() string {
	names := p.notAppliedNames()
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d not applied here (not failed; they stay on their previous config): %s", len(names), abbreviate(names, 5))
}

// notAppliedStatus sets ConditionNotApplied while the rollout is active,
// naming a few such nodes with their reasons, and records an Event when
// a node newly reports it.
func (p *planner) notAppliedStatus(wasActive bool) {
	if !wasActive {
		return
	}
	st := &p.res.Status
	cond := metav1.Condition{Type: ConditionNotApplied, Status: metav1.ConditionFalse, Reason: "AllApplied",
		ObservedGeneration: p.r.Generation, LastTransitionTime: p.now}
	names := p.notAppliedNames()
	if len(names) > 0 {
		var why []string
		for _, name := range names[:min(len(names), 3)] {
			why = append(why, fmt.Sprintf("%s: %s", name, truncateReason(p.held[name].reason)))
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, "CouldNotApplyHere"
		cond.Message = truncate(fmt.Sprintf("%d nodes could not apply the config here and stay on their previous config, not counted as failed: %s",
			len(names), joinReasons(why, len(names))))
		if prev := meta.FindStatusCondition(p.r.Status.Conditions, ConditionNotApplied); prev == nil || prev.Message != cond.Message {
			p.event(true, "NotApplied", "%s", cond.Message)
		}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

func joinReasons(why []string, n int) string {
	out := ""
	for i, w := range why {
		if i > 0 {
			out += "; "
		}
		out += w
	}
	if n > len(why) {
		out += fmt.Sprintf("; and %d more", n-len(why))
	}
	return out
}
