package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// A node's restart is a disruption of the pods on it: a kubelet restart
// sets every pod's Started and Ready to False until the kubelet has seen
// them again (KEP-4781; kubelets from v1.35 keep the statuses unless the
// ChangeContainerStatusOnKubeletRestart gate is on, and the planner does
// not know a node's kubelet or gates, so it budgets every restart). The
// planner counts that disruption against the PodDisruptionBudgets of the
// pods, as an eviction would be: a step never assigns a node whose Ready
// pods would take a budget below what it allows.

// DisruptionBudgetRequeue is how soon a rollout holding nodes back for
// their budgets is planned again if nothing changes before (the caller
// also plans it when a budget's status changes).
const DisruptionBudgetRequeue = 15 * time.Second

// Disruption is what the planner knows of the PodDisruptionBudgets of the
// pods on the rollout's nodes. The caller reads it; nil means there are
// no budgets to respect.
type Disruption struct {
	// Budgets are the PodDisruptionBudgets that select pods.
	Budgets []Budget
	// PodsOn returns the pods on a node that some Budget selects (pods no
	// budget selects are free and need not be returned), or why they
	// could not be read. Plan asks for the nodes in trial and for each
	// node it considers assigning, each at most once; nil: no pods.
	PodsOn func(node string) ([]Pod, error)
	// Unknown, when not "", is why the budgets are not known (their
	// cache has not synced, they may not be listed): no node is assigned
	// while the rollout respects budgets.
	Unknown string
}

// Budget is one PodDisruptionBudget.
type Budget struct {
	// Namespace and Name identify it.
	Namespace, Name string
	// Allowed is its status.disruptionsAllowed, computed by the
	// disruption controller (kube-controller-manager): how many of its
	// healthy pods may go now. Pods that are not Ready are already
	// counted there. The caller gives 0 for a budget whose status is
	// older than its spec (status.observedGeneration < generation), as
	// the Eviction API refuses then.
	Allowed int32
}

// Pod is one pod that some budgets select.
type Pod struct {
	// Budgets are the indexes, in Disruption.Budgets, of the budgets
	// that select it.
	Budgets []int
	// Ready is whether the pod counts as healthy: its Ready condition is
	// True and it is not being deleted. A pod that is not Ready is
	// disrupted already; a restart takes nothing more from its budgets.
	Ready bool
}

// budgetCheck decides, node by node in the order the planner picks them,
// which nodes fit the budgets. It reads lazily: nothing before the first
// node is checked.
type budgetCheck struct {
	d     *Disruption
	off   bool     // spec.podDisruptionBudgets: Ignore
	trial []string // the nodes this rollout has in trial
	left  []int32  // what each budget still allows; nil before the first check
	err   string   // why nothing can be assigned ("" when the budgets are known)
	held  []heldNode
	by    map[int]bool // the budgets holding some node
	asked bool         // some node was checked
	// count and touched are need's scratch: the Ready pods of each budget
	// on the node being checked, and the budgets it touched.
	count   []int32
	touched []int
}

// heldShown is how many held nodes the condition's message describes.
const heldShown = 3

// heldNode is a node held back: by the budgets over (with its Ready pods
// of each and what was left), or because its pods could not be read.
type heldNode struct {
	name string
	over []overBudget
	err  error
}

type overBudget struct {
	budget      int
	ready, left int32
}

// budgets starts the check of one assignment round: the nodes this
// rollout has in trial will be (or are being) restarted, so their Ready
// pods come off what the budgets allow first.
func (p *planner) budgets() *budgetCheck {
	b := &budgetCheck{d: p.in.Disruption, off: p.r.Spec.PodDisruptionBudgets == v1alpha1.DisruptionBudgetsIgnore}
	for _, name := range p.heldNames() {
		if v := p.held[name]; v.state == v1alpha1.NodeTrial && !v.fresh {
			b.trial = append(b.trial, name)
		}
	}
	return b
}

// fits reports whether node may be assigned: the Ready pods it carries of
// each budget are within what the budget still allows, after the nodes in
// trial and the nodes assigned before it in this round. A node that fits
// takes its share; one that does not is held back.
func (b *budgetCheck) fits(node string) bool {
	if b.off || b.d == nil {
		return true
	}
	b.asked = true
	if b.left == nil && b.err == "" {
		b.start()
	}
	if b.err != "" {
		return false
	}
	if err := b.need(node); err != nil {
		b.held = append(b.held, heldNode{name: node, err: err})
		return false
	}
	var over []overBudget
	isOver := false
	for _, i := range b.touched {
		if n := b.count[i]; n > b.left[i] {
			isOver = true
			if len(b.held) < heldShown { // only these are described
				over = append(over, overBudget{budget: i, ready: n, left: max(b.left[i], 0)})
			}
			if b.by == nil {
				b.by = map[int]bool{}
			}
			b.by[i] = true
		}
	}
	if isOver {
		b.held = append(b.held, heldNode{name: node, over: over})
		return false
	}
	for _, i := range b.touched {
		b.left[i] -= b.count[i]
	}
	return true
}

// start computes what each budget still allows once the nodes in trial
// are restarted.
func (b *budgetCheck) start() {
	if b.d.Unknown != "" {
		b.err = b.d.Unknown
		return
	}
	b.left = make([]int32, len(b.d.Budgets))
	b.count = make([]int32, len(b.d.Budgets))
	for i, bu := range b.d.Budgets {
		b.left[i] = bu.Allowed
	}
	for _, node := range b.trial {
		if err := b.need(node); err != nil {
			b.err = fmt.Sprintf("the pods of node %s, in trial, could not be read: %v", node, err)
			return
		}
		for _, i := range b.touched {
			b.left[i] -= b.count[i]
		}
	}
}

// need counts the Ready pods of each budget on node into count, the
// budgets with some in touched (in the order met).
func (b *budgetCheck) need(node string) error {
	for _, i := range b.touched {
		b.count[i] = 0
	}
	b.touched = b.touched[:0]
	if b.d.PodsOn == nil {
		return nil
	}
	pods, err := b.d.PodsOn(node)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if !pod.Ready {
			continue
		}
		for _, i := range pod.Budgets {
			if i < 0 || i >= len(b.d.Budgets) {
				continue
			}
			if b.count[i] == 0 {
				b.touched = append(b.touched, i)
			}
			b.count[i]++
		}
	}
	return nil
}

// describe says why a node is held.
func (b *budgetCheck) describe(h heldNode) string {
	if h.err != nil {
		return fmt.Sprintf("node %s (its pods could not be read: %v)", h.name, h.err)
	}
	parts := make([]string, len(h.over))
	for k, o := range h.over {
		bu := b.d.Budgets[o.budget]
		parts[k] = fmt.Sprintf("%d Ready pods of %s/%s, which allows %d disruptions: %d left after the nodes in trial and this round",
			o.ready, bu.Namespace, bu.Name, bu.Allowed, o.left)
	}
	return fmt.Sprintf("node %s (%s)", h.name, strings.Join(parts, ", "))
}

// report writes the DisruptionBudget condition of the round, records an
// Event when the rollout starts holding nodes back (or for other
// budgets), and asks to be planned again while it holds some. A round
// that checked no node leaves the condition as it was.
func (p *planner) reportBudgets(b *budgetCheck) {
	cond := metav1.Condition{Type: v1alpha1.ConditionDisruptionBudget, ObservedGeneration: p.r.Generation, LastTransitionTime: p.now}
	switch {
	case b.off:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Ignored", "spec.podDisruptionBudgets is Ignore: nodes are assigned without looking at PodDisruptionBudgets"
	case !b.asked:
		return
	case b.err != "":
		cond.Status, cond.Reason = metav1.ConditionTrue, "BudgetsUnknown"
		cond.Message = "no node is assigned: the PodDisruptionBudgets are not known: " + b.err
	case len(b.held) > 0:
		var names []string
		for i := range b.by {
			names = append(names, b.d.Budgets[i].Namespace+"/"+b.d.Budgets[i].Name)
		}
		slices.Sort(names)
		cond.Status, cond.Reason = metav1.ConditionTrue, "Held"
		what := "their pods"
		if len(names) > 0 {
			what = "PodDisruptionBudget " + abbreviate(names, 5)
		}
		var nodes []string
		for _, h := range b.held[:min(len(b.held), heldShown)] {
			nodes = append(nodes, b.describe(h))
		}
		list := strings.Join(nodes, ", ")
		if len(b.held) > heldShown {
			list += fmt.Sprintf(" and %d more", len(b.held)-heldShown)
		}
		cond.Message = fmt.Sprintf("held by %s: %d nodes wait: %s", what, len(b.held), list)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "WithinBudgets", "every node picked fits the PodDisruptionBudgets"
	}
	cond.Message = truncate(cond.Message)
	prev := meta.FindStatusCondition(p.r.Status.Conditions, v1alpha1.ConditionDisruptionBudget)
	if cond.Status == metav1.ConditionTrue {
		p.requeue(DisruptionBudgetRequeue)
		if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != cond.Reason || budgetNames(prev.Message) != budgetNames(cond.Message) {
			p.event(false, "HeldByDisruptionBudget", "%s", cond.Message)
		}
	}
	meta.SetStatusCondition(&p.st.Conditions, cond)
	if cond.Status == metav1.ConditionTrue {
		p.budgetHeld = cond.Message
	}
}

// budgetNames is the part of a condition message that names the budgets
// (up to the first colon after them): an Event is recorded when it
// changes, not when only the nodes or counts do.
func budgetNames(msg string) string {
	before, _, _ := strings.Cut(msg, ": ")
	return before
}
