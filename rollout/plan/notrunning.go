package plan

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// runsComponent reports whether a node runs the rollout's component: its
// Node carries the component's status annotation
// (nodeapi.StatusAnnotationFor), readable or not. A component publishes
// it as soon as it starts, before anything is assigned (phase Local).
func runsComponent(n *Node) bool {
	return n.Status != nil || n.StatusError != ""
}

// findNotRunning lists, sorted, the selected nodes the rollout does not
// hold that do not run its component. They are not assigned (the
// assignment would wait for a status that never comes, and hold a slot of
// maxUnavailable until the progress deadline failed it), not counted as
// failures, and not counted in the steps' targets: a step of 100% is done
// once every node that runs the component runs the config. A node that
// starts the component later joins the rollout then.
func (p *planner) findNotRunning() {
	p.absent = p.absent[:0]
	for i := range p.in.Nodes {
		n := &p.in.Nodes[i]
		if _, held := p.held[n.Name]; n.Selected && !held && !runsComponent(n) {
			p.absent = append(p.absent, n.Name)
		}
	}
	slices.Sort(p.absent)
}

// notRunning reports whether a node is one findNotRunning listed.
func (p *planner) notRunning(name string) bool {
	_, found := slices.BinarySearch(p.absent, name)
	return found
}

// eligible is the number of selected nodes the steps count: those that
// run the component, or that the rollout holds.
func (p *planner) eligible() int {
	return p.selectedCount() - len(p.absent)
}

// noneRuns refuses to start a rollout none of whose selected nodes runs
// its component, at once and saying why (a misspelt spec.component, a
// wrong nodeSelector), rather than assign nodes that never answer and
// fail them at the progress deadline.
func (p *planner) noneRuns() bool {
	sel := p.selectedCount()
	if sel == 0 || len(p.absent) < sel {
		return false
	}
	c := component(&p.r.Spec)
	p.refuse("ComponentNotRunning", fmt.Sprintf("none of the %d selected nodes runs component %q: none carries its status annotation %s (e.g. %s); check spec.component (known: %s) and spec.nodeSelector",
		sel, c, nodeapi.StatusAnnotationFor(c), abbreviate(p.absent, 3), nodeapi.KnownComponents()))
	return true
}

// refuse keeps a rollout Pending because of its ConfigMap or its nodes:
// the phase, the message, an Event when the message changes, and the
// Refused condition.
func (p *planner) refuse(reason, msg string) {
	if p.st.Message != msg {
		p.event(true, reason, "%s", msg)
	}
	p.st.Phase = v1alpha1.PhasePending
	p.st.Message = msg
	p.refused = reason
}

// fleetStatus fills status.notRunning and the ComponentNotRunning and
// Refused conditions while the rollout is active (called once the status
// is counted).
func (p *planner) fleetStatus(wasActive bool) {
	st := &p.res.Status
	if st.Phase != v1alpha1.PhasePaused {
		st.NextWindow = nil
	}
	if !wasActive {
		return
	}
	prev := p.r.Status.NotRunning
	// Once the rollout ended, the count stays as it was then (as the
	// others do).
	st.NotRunning = int32(len(p.absent))
	cond := metav1.Condition{Type: v1alpha1.ConditionComponentNotRunning, Status: metav1.ConditionFalse, Reason: "AllRunning",
		ObservedGeneration: p.r.Generation, LastTransitionTime: p.now}
	if st.NotRunning > 0 {
		c := component(&p.r.Spec)
		cond.Status, cond.Reason = metav1.ConditionTrue, "NoComponentStatus"
		cond.Message = fmt.Sprintf("%d selected nodes do not run component %q (no %s annotation): %s; they are not assigned and not counted as failed",
			st.NotRunning, c, nodeapi.StatusAnnotationFor(c), abbreviate(p.absent, 5))
		if prev == 0 && p.refused != "ComponentNotRunning" {
			e := Event{Warning: true, Reason: "ComponentNotRunning", Message: cond.Message}
			p.res.Events = append(p.res.Events, e)
			st.History = append(st.History, v1alpha1.HistoryEntry{Time: p.now, Reason: e.Reason, Message: e.Message})
			if n := len(st.History) - v1alpha1.MaxHistory; n > 0 {
				st.History = slices.Delete(st.History, 0, n)
			}
		}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	refused := metav1.Condition{Type: v1alpha1.ConditionRefused, Status: metav1.ConditionFalse, Reason: "NotRefused",
		ObservedGeneration: p.r.Generation, LastTransitionTime: p.now}
	if p.refused != "" {
		refused.Status, refused.Reason, refused.Message = metav1.ConditionTrue, p.refused, truncate(st.Message)
	}
	meta.SetStatusCondition(&st.Conditions, refused)
}
