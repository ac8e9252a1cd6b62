// What the rollout's status says: its phase and message, the counts, the
// failures and the conditions.

package plan

import (
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func (p *planner) setPhase(ph v1alpha1.RolloutPhase, msg string) {
	p.st.Phase = ph
	p.st.Message = msg
}

func (p *planner) pending(reason, msg string) {
	if p.st.Message != msg {
		p.event(false, reason, "%s", msg)
	}
	p.st.Phase = v1alpha1.PhasePending
	p.st.Message = msg
}

// count fills the counts and the failures. Once the rollout ended, the
// counts of what it did stay as they were then; only Reverting moves.
func (p *planner) count(wasActive bool) {
	st := p.st
	st.Selected = int32(p.selectedCount())
	st.Blocked = int32(len(p.blocked))
	st.Reverting = 0
	if wasActive {
		p.countHeld()
	}
	if p.revertMode() {
		// What is put back no longer runs the config; failures stay.
		st.Reverting = 0
		for _, v := range p.held {
			if !v.fresh {
				st.Reverting++
			}
		}
		st.Assigned, st.InTrial, st.Promoted = st.Reverting, 0, 0
	}
	p.res.Status = *st
}

func (p *planner) countHeld() {
	st := p.st
	st.Assigned, st.InTrial, st.Promoted = 0, 0, 0
	var failures []v1alpha1.NodeFailure
	for _, name := range p.heldNames() {
		v := p.held[name]
		switch v.state {
		case v1alpha1.NodeTrial:
			st.Assigned++
			st.InTrial++
		case v1alpha1.NodePromoted:
			st.Assigned++
			st.Promoted++
		case nodeNotApplied:
			st.Assigned++
		case v1alpha1.NodeFailed:
			st.Assigned++
			failures = append(failures, v1alpha1.NodeFailure{Node: name, Reason: truncateReason(v.reason)})
		}
	}
	st.Failed = st.LostFailures + int32(len(failures))
	if len(failures) > v1alpha1.MaxFailureRecords {
		failures = failures[:v1alpha1.MaxFailureRecords]
	}
	st.Failures = failures
}

func truncateReason(s string) string {
	if len(s) <= nodeapi.MaxClaimReason {
		return s
	}
	cut := nodeapi.MaxClaimReason - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// conditions sets Progressing, Halted and Conflict from the phase.
func (p *planner) conditions() {
	st := &p.res.Status
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: truncate(msg), ObservedGeneration: p.r.Generation, LastTransitionTime: p.now,
		})
	}
	set(v1alpha1.ConditionProgressing, st.Phase == v1alpha1.PhaseProgressing, string(st.Phase), st.Message)
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionHalted); c == nil || c.Status != metav1.ConditionTrue {
		set(v1alpha1.ConditionHalted, false, "NotHalted", "")
	} else {
		c.ObservedGeneration = p.r.Generation
	}
	if p.conflict == "" {
		set(v1alpha1.ConditionConflict, false, "NoOverlap", "")
	} else {
		set(v1alpha1.ConditionConflict, true, "Overlap", p.conflict)
	}
}

// truncate keeps a condition message within what the API allows.
func truncate(msg string) string {
	const limit = 4096
	if len(msg) <= limit {
		return msg
	}
	return msg[:limit-3] + "..."
}
