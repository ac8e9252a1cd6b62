// The step machine: the start (the ConfigMap pinned, the overlap check),
// steps and pauses, and the assignment of nodes within maxUnavailable.

package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// start pins the ConfigMap and starts the rollout, or says why it cannot.
func (p *planner) start() bool {
	cm, name := p.in.ConfigMap, p.r.Namespace+"/"+p.r.Spec.ConfigMapName
	switch {
	case cm == nil:
		p.pending("ConfigMapNotFound", fmt.Sprintf("waiting for ConfigMap %s, which does not exist", name))
		return false
	}
	if p.noneRuns() {
		return false
	}
	key, ok := PayloadKey(&p.r.Spec)
	switch {
	case !ok:
		p.pending("PayloadKeyRequired", fmt.Sprintf("spec.payloadKey is required: component %q has no default payload key (only %s have one)",
			component(&p.r.Spec), nodeapi.KnownComponents()))
		return false
	case !cm.HasKey:
		p.pending("PayloadKeyMissing", fmt.Sprintf("waiting for ConfigMap %s to hold key %q", name, key))
		return false
	}
	if p.mutable() || p.knownBad() {
		return false
	}
	if msg := p.overlap(); msg != "" {
		p.conflict = msg
		if p.st.Message != msg {
			p.event(true, "Conflict", "%s", msg)
		}
		p.st.Message = msg
		p.st.Phase = v1alpha1.PhasePending
		return false
	}
	p.st.ConfigMap = &v1alpha1.ConfigMapRef{UID: cm.UID, ResourceVersion: cm.ResourceVersion}
	p.setOurs(cm.UID)
	p.st.CurrentStep = 0
	p.st.StepStartedAt = &p.now
	p.setPhase(v1alpha1.PhaseProgressing, "started")
	p.event(false, "Started", "started rolling out ConfigMap %s (UID %s, resourceVersion %s) to %s on %d nodes",
		name, cm.UID, cm.ResourceVersion, component(&p.r.Spec), p.selectedCount())
	return true
}

// overlap names the active rollout that holds some of this one's nodes
// and goes first: one that started, or an older one (then by name).
func (p *planner) overlap() string {
	mine := p.r
	myNodes := map[string]bool{}
	for name, n := range p.nodes {
		if n.Selected {
			myNodes[name] = true
		}
	}
	var blockers []string
	for _, o := range p.in.Others {
		if o.Namespace == mine.Namespace && o.Name == mine.Name {
			continue
		}
		if !(o.Phase.Active() || o.Reverting) || nodeapi.ComponentOrDefault(o.Component) != component(&mine.Spec) {
			continue
		}
		if !o.Started && !o.Reverting && !goesFirst(o, mine) {
			continue
		}
		shared := 0
		example := ""
		for n := range o.Nodes {
			if myNodes[n] {
				shared++
				if example == "" || n < example {
					example = n
				}
			}
		}
		if shared > 0 {
			blockers = append(blockers, fmt.Sprintf("ConfigRollout %s/%s (%s, %d shared nodes, e.g. %s)", o.Namespace, o.Name, o.Phase, shared, example))
		}
	}
	if len(blockers) == 0 {
		return ""
	}
	slices.Sort(blockers)
	return fmt.Sprintf("refused: %s is active (or still reverting) on some of the same nodes for %s; this rollout starts when it ends or is deleted",
		strings.Join(blockers, " and "), component(&mine.Spec))
}

// goesFirst reports whether o was created before r (ties: by namespace and
// name).
func goesFirst(o Other, r *v1alpha1.ConfigRollout) bool {
	rc := r.CreationTimestamp.Time
	if !o.Created.Equal(rc) {
		return o.Created.Before(rc)
	}
	if o.Namespace != r.Namespace {
		return o.Namespace < r.Namespace
	}
	return o.Name < r.Name
}

// configMapChanged halts the rollout when its ConfigMap is gone, replaced
// or had its data edited since it started (SameConfig: a new
// resourceVersion of an immutable ConfigMap is the same config).
func (p *planner) configMapChanged() bool {
	cm, pinned := p.in.ConfigMap, p.st.ConfigMap
	name := p.r.Namespace + "/" + p.r.Spec.ConfigMapName
	var why string
	switch {
	case cm == nil:
		why = fmt.Sprintf("ConfigMap %s (UID %s) was deleted while the rollout was active", name, pinned.UID)
	case cm.UID != pinned.UID:
		why = fmt.Sprintf("ConfigMap %s was replaced while the rollout was active (UID %s, now %s)", name, pinned.UID, cm.UID)
	case !SameConfig(pinned.UID, pinned.ResourceVersion, cm):
		// SameConfig: an immutable ConfigMap's new resourceVersion is an
		// edit of its metadata, and the nodes do not take it for a new
		// config either (they keep the checkpoint they have).
		why = fmt.Sprintf("ConfigMap %s was edited while the rollout was active (resourceVersion %s, now %s); roll out a new ConfigMap instead of editing one",
			name, pinned.ResourceVersion, cm.ResourceVersion)
	default:
		return false
	}
	p.halt("ConfigMapChanged", why)
	return true
}

func (p *planner) selectedCount() int {
	n := 0
	for _, node := range p.in.Nodes {
		if node.Selected {
			n++
		}
	}
	return n
}

// maxUnavailable resolves spec.maxUnavailable against the selected count:
// at least 1.
func (p *planner) maxUnavailable(selected int) int {
	mu := p.r.Spec.MaxUnavailable
	if mu == nil {
		return 1
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(mu, selected, false)
	if err != nil || v < 1 {
		return 1
	}
	return v
}

// steps runs the step machine: passes finished steps and pauses, assigns
// nodes for the current node step.
func (p *planner) steps() {
	st, spec := p.st, &p.r.Spec
	if spec.Paused {
		if st.Phase != v1alpha1.PhasePaused {
			p.event(false, "Paused", "paused at %s (spec.paused)", p.stepName(st.CurrentStep))
		}
		p.setPhase(v1alpha1.PhasePaused, fmt.Sprintf("paused at %s: spec.paused is true", p.stepName(st.CurrentStep)))
		return
	}
	selected := p.eligible()
	for int(st.CurrentStep) < len(spec.Steps) {
		i := st.CurrentStep
		step := spec.Steps[i]
		if step.Pause != nil {
			if !p.pauseOver(i, step.Pause) {
				return
			}
			p.nextStep(fmt.Sprintf("pause (%s) is over", p.stepName(i)))
			continue
		}
		if step.Nodes == nil {
			p.halt("InvalidSpec", fmt.Sprintf("spec.steps[%d] has neither nodes nor pause", i))
			return
		}
		target, err := v1alpha1.StepTarget(step.Nodes, selected)
		if err != nil {
			p.halt("InvalidSpec", fmt.Sprintf("spec.steps[%d].nodes: %v", i, err))
			return
		}
		if p.settled() >= target {
			p.nextStep(fmt.Sprintf("%s is done: %d of %d selected nodes run the config", p.stepName(i), target, selected))
			continue
		}
		if p.outsideWindows(i) {
			return
		}
		if st.Phase == v1alpha1.PhasePaused {
			p.event(false, "Resumed", "resumed at %s", p.stepName(i))
		}
		p.setPhase(v1alpha1.PhaseProgressing, "")
		p.assign(target, selected)
		if st.Phase == v1alpha1.PhaseProgressing {
			st.Message = p.progress(i, target, selected) + p.soakNote() + p.notAppliedNote()
			if p.budgetHeld != "" {
				st.Message = truncate(st.Message + "; " + p.budgetHeld)
			}
		}
		return
	}
	if st.Phase != v1alpha1.PhaseCompleted {
		p.setPhase(v1alpha1.PhaseCompleted, fmt.Sprintf("completed: %d nodes promoted", p.countState(v1alpha1.NodePromoted))+p.notAppliedNote())
		p.event(false, "Completed", "completed: %d nodes promoted, %d failed", p.countState(v1alpha1.NodePromoted), p.countState(v1alpha1.NodeFailed))
	}
}

// pauseOver reports whether pause step i is over, and otherwise sets the
// phase and when to plan again.
func (p *planner) pauseOver(i int32, pause *v1alpha1.RolloutPause) bool {
	st := p.st
	if pause.Duration != nil {
		started := p.now.Time
		if st.StepStartedAt != nil {
			started = st.StepStartedAt.Time
		}
		end := started.Add(pause.Duration.Duration)
		if !p.in.Now.Before(end) {
			return true
		}
		p.requeue(end.Sub(p.in.Now))
		msg := fmt.Sprintf("pause (%s) until %s", p.stepName(i), end.UTC().Format(time.RFC3339))
		if st.Phase != v1alpha1.PhasePaused {
			p.event(false, "Paused", "%s", msg)
		}
		p.setPhase(v1alpha1.PhasePaused, msg)
		return false
	}
	if r := p.r.Spec.ResumedStep; r != nil && *r >= i {
		return true
	}
	msg := fmt.Sprintf("pause (%s): waiting until resumed (dynconfigctl rollout resume)", p.stepName(i))
	if st.Phase != v1alpha1.PhasePaused {
		p.event(false, "Paused", "%s", msg)
	}
	p.setPhase(v1alpha1.PhasePaused, msg)
	return false
}

func (p *planner) nextStep(why string) {
	p.event(false, "StepCompleted", "%s", why)
	done := v1alpha1.StepStatus{Step: p.st.CurrentStep, StartedAt: p.st.StepStartedAt, CompletedAt: &p.now,
		Promoted: int32(p.countState(v1alpha1.NodePromoted)), Failed: int32(p.countState(v1alpha1.NodeFailed)) + p.st.LostFailures}
	p.st.Steps = append(p.st.Steps, done)
	if n := len(p.st.Steps) - len(p.r.Spec.Steps); n > 0 {
		p.st.Steps = slices.Delete(p.st.Steps, 0, n)
	}
	p.st.CurrentStep++
	p.st.StepStartedAt = &p.now
}

// settled counts the held nodes that promoted or failed.
func (p *planner) settled() int {
	return p.countState(v1alpha1.NodePromoted) + p.countState(v1alpha1.NodeFailed) + p.countState(nodeNotApplied)
}

func (p *planner) countState(s v1alpha1.NodeState) int {
	n := 0
	for _, v := range p.held {
		if v.state == s {
			n++
		}
	}
	return n
}

// takeable reports whether a node another rollout claims may be assigned:
// its claimer ended (and is not putting its nodes back), or it is in
// scope and gone. why names the claimer otherwise.
func (p *planner) takeable(c *nodeapi.Claim) (ok bool, why string) {
	for _, o := range p.in.Others {
		if o.UID == c.UID {
			if o.Phase.Active() || o.Reverting {
				return false, fmt.Sprintf("ConfigRollout %s (%s)", c.Holder(), o.Phase)
			}
			return true, ""
		}
	}
	if p.in.Scope == "" || p.in.Scope == c.Namespace {
		return true, "" // its rollout is gone: a stale claim
	}
	return false, fmt.Sprintf("ConfigRollout %s (uid %s), which this controller does not watch", c.Holder(), c.UID)
}

// assign claims and assigns new nodes for the current step, up to the
// step's target and the room maxUnavailable leaves. A node another
// rollout holds is left alone (Conflict).
func (p *planner) assign(target, selected int) {
	inTrial := p.countState(v1alpha1.NodeTrial)
	held := inTrial + p.settled()
	room := min(p.maxUnavailable(selected)-inTrial, target-held)
	if room <= 0 {
		return
	}
	var candidates []string
	for _, n := range p.in.Nodes {
		if _, ok := p.held[n.Name]; n.Selected && !ok && !p.notRunning(n.Name) {
			candidates = append(candidates, n.Name)
		}
	}
	slices.Sort(candidates)
	var names []string
	budgets := p.budgets()
	defer p.reportBudgets(budgets)
	for _, name := range candidates {
		if room == 0 {
			break
		}
		n := p.nodes[name]
		if why, bad := p.badClaim[name]; bad {
			p.blocked = append(p.blocked, fmt.Sprintf("node %s (%s)", name, why))
			continue
		}
		if c := p.foreign[name]; c != nil {
			if ok, why := p.takeable(c); !ok {
				p.blocked = append(p.blocked, fmt.Sprintf("node %s (claimed by %s)", name, why))
				continue
			}
		}
		if !budgets.fits(name) {
			continue // held back: its restart would break a PodDisruptionBudget
		}
		prev, ok := parseAssignmentMemo(p.in.Memo, n.Assignment)
		c := &nodeapi.Claim{Namespace: p.r.Namespace, Name: p.r.Name, UID: p.r.UID, Previous: prev, AssignedAt: p.now, Step: p.st.CurrentStep,
			PreviousClaim: p.restorable(p.foreign[name])}
		if p.r.Spec.Analysis != nil {
			// The node keeps its last-known-good until the gates pass.
			until := metav1.NewTime(p.in.Now.Add(p.holdFor()))
			c.HoldUntil = &until
		}
		v := &view{n: n, claim: c, state: v1alpha1.NodeTrial, fresh: true}
		room--
		pt := Patch{Node: name, ResourceVersion: n.ResourceVersion}
		switch {
		case !ok:
			// Nothing to put back: never touch its assignment; the claim
			// records the failure so that an operator sees it.
			c.Previous = nil
			c.Failed = fmt.Sprintf("its assignment annotation is %s; the rollout leaves it alone", describeAnnotation(n.Assignment))
			v.state, v.reason = v1alpha1.NodeFailed, c.Failed
			pt.ClaimOnly = true
			p.event(true, "NodeFailed", "node %s failed: %s", name, c.Failed)
		case p.carries(n, p.ours):
			pt.ClaimOnly = true
		default:
			val := p.oursJSON
			pt.Value = &val
		}
		enc, err := nodeapi.EncodeClaim(c)
		if err != nil {
			p.blocked = append(p.blocked, fmt.Sprintf("node %s (%v)", name, err))
			room++
			continue
		}
		pt.Claim = &enc
		p.res.Patches = append(p.res.Patches, pt)
		p.held[name] = v
		if v.state == v1alpha1.NodeFailed {
			continue
		}
		names = append(names, name)
		if pt.ClaimOnly {
			p.judge(v)
			continue
		}
		p.requeue(p.deadline)
	}
	if len(names) > 0 {
		p.event(false, "Assigned", "%s: assigned %d nodes: %s", p.stepName(p.st.CurrentStep), len(names), abbreviate(names, 10))
	}
	if len(p.blocked) > 0 {
		slices.Sort(p.blocked)
		p.conflict = fmt.Sprintf("%d selected nodes are held by another rollout and left alone: %s", len(p.blocked), abbreviate(p.blocked, 3))
		p.requeue(30 * time.Second)
	}
	if n, _ := p.failures(); n > p.r.Spec.MaxFailures {
		p.tooManyFailures()
	}
}

// abbreviate lists at most max names.
func abbreviate(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
}
