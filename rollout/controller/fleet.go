package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// fleetOther adds to o what the known-bad check needs of another rollout:
// the ConfigMap it pinned, and why it halted (its Halted condition, which
// stays True once it halted, also after an undo).
func fleetOther(ro *v1alpha1.ConfigRollout, o *plan.Other) {
	o.ConfigMap = ro.Status.ConfigMap
	if c := meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted); c != nil && c.Status == metav1.ConditionTrue {
		o.HaltReason, o.HaltMessage = c.Reason, c.Message
	}
}

// fleetInput gives a rollout that has not started what the fleet knows of
// its ConfigMap: every watched Node whose component reports that
// ConfigMap bad (plan.BadReportOf). A started rollout needs none of it,
// and is not made to read the whole fleet for it.
func (r *runner) fleetInput(ro *v1alpha1.ConfigRollout, in *plan.Input) {
	in.KnownBadNodes = r.c.opts.KnownBadNodes
	if ro.Status.ConfigMap != nil || in.ConfigMap == nil || ro.Spec.AllowKnownBad {
		return
	}
	uid := in.ConfigMap.UID
	for _, name := range r.nodes.GetStore().ListKeys() {
		n := r.node(name)
		if n == nil {
			continue
		}
		st, err := r.readStatus(n, ro.Spec.Component)
		if err != nil {
			continue
		}
		if b := plan.BadReportOf(n.Name, st); b != nil && b.UID == uid {
			in.BadReports = append(in.BadReports, *b)
		}
	}
}
