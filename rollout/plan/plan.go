package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// DefaultProgressDeadline is the default of spec.progressDeadlineSeconds.
const DefaultProgressDeadline = 600 * time.Second

// Input is everything Plan decides on.
type Input struct {
	// Rollout is the ConfigRollout: its spec, generation, name and the
	// status written so far. Plan does not modify it.
	Rollout *v1alpha1.ConfigRollout
	// ConfigMap is the ConfigMap spec.configMapName names, nil when it
	// does not exist.
	ConfigMap *ConfigMap
	// Nodes are the nodes the selector matches (Selected) and the nodes
	// of the rollout's records that still exist, selected or not; a
	// recorded node missing here is gone.
	Nodes []Node
	// Others are the other ConfigRollouts, in any namespace, for the
	// overlap check.
	Others []Other
	// Now is the time.
	Now time.Time
}

// ConfigMap is what Plan needs of the rollout's ConfigMap.
type ConfigMap struct {
	// UID and ResourceVersion identify the ConfigMap's content.
	UID             types.UID
	ResourceVersion string
	// HasKey is whether its data holds the payload key.
	HasKey bool
}

// Node is one observed Node.
type Node struct {
	// Name of the Node.
	Name string
	// Selected is whether the rollout's selector matches it.
	Selected bool
	// Assignment is the component's assignment annotation value, nil
	// when the annotation is absent.
	Assignment *string
	// Status is what the component publishes (nodeapi.ReadConfigStatus),
	// nil when nothing.
	Status *nodeapi.ConfigStatus
	// StatusError is why the published status could not be read.
	StatusError string
}

// Other is another rollout, as far as the overlap check needs it.
type Other struct {
	// Namespace and Name identify it.
	Namespace, Name string
	// Component it rolls out to.
	Component string
	// Created is its creationTimestamp.
	Created time.Time
	// Phase is its status phase.
	Phase v1alpha1.RolloutPhase
	// Started is whether it has started (its status pins a ConfigMap).
	Started bool
	// Reverting is whether some of its nodes are still being put back:
	// until they are, it holds them, whatever its phase.
	Reverting bool
	// Nodes are the nodes it selects or holds a record of.
	Nodes map[string]bool
}

// Patch is one change of a Node's assignment annotation.
type Patch struct {
	// Node is the Node's name.
	Node string
	// Value is the annotation's new value; nil removes it.
	Value *string
	// Revert is true when the patch puts a previous source back.
	Revert bool
}

// Event is one thing to record, as an Event on the ConfigRollout and an
// entry of its history.
type Event struct {
	// Warning is true for a Warning Event, false for Normal.
	Warning bool
	// Reason is the Event's CamelCase reason.
	Reason string
	// Message says what happened.
	Message string
}

// Result is what Plan decided.
type Result struct {
	// Status is the rollout's next status. Write it first (with the
	// rollout's resourceVersion); make the patches only once it is
	// written.
	Status v1alpha1.ConfigRolloutStatus
	// Patches are the Node annotation changes to make, assignments first.
	Patches []Patch
	// Events are what happened in this step, already in Status.History.
	Events []Event
	// RequeueAfter is when to plan again if nothing changes before (a
	// pause or a deadline ends); 0 means only on a change.
	RequeueAfter time.Duration
}

// PayloadKey returns the payload key a rollout assigns: spec.payloadKey,
// else the component's default (nodeapi.DefaultPayloadKey); ok is false
// when the spec names none and the component has no default: such a
// rollout does not start (PayloadKeyRequired).
func PayloadKey(spec *v1alpha1.ConfigRolloutSpec) (key string, ok bool) {
	if spec.PayloadKey != "" {
		return spec.PayloadKey, true
	}
	return nodeapi.DefaultPayloadKey(spec.Component)
}

func component(spec *v1alpha1.ConfigRolloutSpec) string {
	return nodeapi.ComponentOrDefault(spec.Component)
}

// Assignment is the NodeConfigSource a rollout assigns.
func Assignment(r *v1alpha1.ConfigRollout, uid types.UID) *corev1.NodeConfigSource {
	key, _ := PayloadKey(&r.Spec)
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: r.Namespace, Name: r.Spec.ConfigMapName, UID: uid, KubeletConfigKey: key,
	}}
}

// planner carries one Plan call.
type planner struct {
	in       Input
	r        *v1alpha1.ConfigRollout
	st       *v1alpha1.ConfigRolloutStatus
	now      metav1.Time
	nodes    map[string]*Node
	records  map[string]int // name -> index in st.Nodes
	ours     *corev1.NodeConfigSource
	oursJSON string
	deadline time.Duration
	conflict string // why the rollout is refused, "" when it is not
	res      Result
}

// Plan decides the next step of a rollout. It is pure: the same input gives
// the same result, and the input is not modified.
func Plan(in Input) Result {
	p := &planner{in: in, r: in.Rollout, now: metav1.NewTime(in.Now)}
	st := in.Rollout.Status.DeepCopy()
	p.st = st
	st.ObservedGeneration = in.Rollout.Generation
	if st.Phase == "" {
		st.Phase = v1alpha1.PhasePending
	}
	p.nodes = make(map[string]*Node, len(in.Nodes))
	for i := range in.Nodes {
		p.nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	p.indexRecords()
	p.deadline = DefaultProgressDeadline
	if d := in.Rollout.Spec.ProgressDeadlineSeconds; d != nil && *d > 0 {
		p.deadline = time.Duration(*d) * time.Second
	}
	if st.ConfigMap != nil {
		p.setOurs(st.ConfigMap.UID)
	}
	p.repair()

	p.observe()
	p.decide()
	p.reverts()
	p.count()
	p.conditions()
	return p.res
}

// repair brings a status someone edited out of range back into it (the
// API server's schema refuses most of it; an older CRD did not), so that
// planning never indexes outside the spec. It says what it changed.
func (p *planner) repair() {
	st, n := p.st, int32(len(p.r.Spec.Steps))
	switch {
	case st.CurrentStep < 0:
		p.event(true, "StatusRepaired", "status.currentStep %d is negative: planning from step 0 (done steps pass again at once)", st.CurrentStep)
		st.CurrentStep = 0
	case st.CurrentStep > n:
		p.event(true, "StatusRepaired", "status.currentStep %d is past the last step (%d steps): taken as %d, all steps done", st.CurrentStep, n, n)
		st.CurrentStep = n
	}
}

func (p *planner) indexRecords() {
	p.records = make(map[string]int, len(p.st.Nodes))
	for i, r := range p.st.Nodes {
		p.records[r.Name] = i
	}
}

func (p *planner) setOurs(uid types.UID) {
	p.ours = Assignment(p.r, uid)
	b, _ := json.Marshal(p.ours) // a NodeConfigSource always encodes
	p.oursJSON = string(b)
}

func (p *planner) event(warning bool, reason, format string, args ...any) {
	e := Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)}
	p.res.Events = append(p.res.Events, e)
	p.st.History = append(p.st.History, v1alpha1.HistoryEntry{Time: p.now, Reason: reason, Message: e.Message})
	if n := len(p.st.History) - v1alpha1.MaxHistory; n > 0 {
		p.st.History = slices.Delete(p.st.History, 0, n)
	}
}

func (p *planner) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if p.res.RequeueAfter == 0 || d < p.res.RequeueAfter {
		p.res.RequeueAfter = d
	}
}

// parseAssignment reads an assignment annotation value as the node does
// (nodeapi.ParseAssignment): absent, blank and "null" are no assignment; ok
// is false when the value is invalid, so that nothing is restored from it.
func parseAssignment(v *string) (src *corev1.NodeConfigSource, ok bool) {
	if v == nil {
		return nil, true
	}
	src, err := nodeapi.ParseAssignment(*v)
	return src, err == nil
}

// carries reports whether n's assignment is src (nil: no assignment).
func carries(n *Node, src *corev1.NodeConfigSource) bool {
	got, ok := parseAssignment(n.Assignment)
	if !ok {
		return false
	}
	if got == nil || src == nil {
		return got == nil && src == nil
	}
	return apiequality.Semantic.DeepEqual(got, src)
}

// isOurs reports whether src names the rollout's ConfigMap.
func (p *planner) isOurs(src *corev1.NodeConfigSource) bool {
	return src != nil && src.ConfigMap != nil && p.st.ConfigMap != nil && src.ConfigMap.UID == p.st.ConfigMap.UID
}

// observe moves each record on from what its node reports.
func (p *planner) observe() {
	for i := range p.st.Nodes {
		rec := &p.st.Nodes[i]
		n, ok := p.nodes[rec.Name]
		if !ok {
			if rec.State != v1alpha1.NodeReverted && rec.State != v1alpha1.NodeGone {
				if rec.State == v1alpha1.NodeFailed {
					rec.FailedBeforeRevert = true
				}
				rec.State = v1alpha1.NodeGone
				p.event(false, "NodeGone", "node %s was deleted", rec.Name)
			}
			continue
		}
		switch rec.State {
		case v1alpha1.NodeAssigning:
			switch {
			case p.ours != nil && carries(n, p.ours):
				rec.State = v1alpha1.NodeTrial
				p.judge(rec, n)
			case p.carriesPrevious(rec, n):
				p.checkDeadline(rec, n) // not written yet, or the write was lost
			default:
				p.changedBySomeoneElse(rec, n, "")
			}
		case v1alpha1.NodeTrial:
			if !carries(n, p.ours) {
				p.changedBySomeoneElse(rec, n, "")
				continue
			}
			p.judge(rec, n)
		case v1alpha1.NodePromoted:
			// Until the rollout ends its nodes are its own: a change is a
			// failure (another rollout over the same nodes, an operator).
			// Once it ended, a later rollout may supersede it.
			if st := p.st.Phase; (st == v1alpha1.PhaseProgressing || st == v1alpha1.PhasePaused) && !carries(n, p.ours) {
				p.changedBySomeoneElse(rec, n, " after it promoted")
			}
		}
	}
}

// changedBySomeoneElse fails a node whose assignment is neither the
// rollout's nor the one it had before.
func (p *planner) changedBySomeoneElse(rec *v1alpha1.NodeRecord, n *Node, when string) {
	rec.State = v1alpha1.NodeFailed
	rec.Reason = fmt.Sprintf("its assignment was changed by someone else%s (now %s)", when, describeAnnotation(n.Assignment))
	p.event(true, "NodeFailed", "node %s failed: %s", rec.Name, rec.Reason)
}

// carriesPrevious reports whether n carries the assignment rec recorded
// as its previous one (false when the record is damaged).
func (p *planner) carriesPrevious(rec *v1alpha1.NodeRecord, n *Node) bool {
	prev, ok := p.st.PreviousOf(rec)
	return ok && carries(n, prev)
}

// describeAnnotation says what an assignment annotation value means: absent,
// the source it names (nodeapi.DescribeSource; "local" for blank and
// "null"), or why it is invalid.
func describeAnnotation(v *string) string {
	if v == nil {
		return "absent"
	}
	src, err := nodeapi.ParseAssignment(*v)
	if err != nil {
		const shown = 80 // an annotation value may be 256 KiB: quote its start only
		if len(*v) > shown {
			return fmt.Sprintf("%q... (%d bytes), which is invalid (%v)", (*v)[:shown], len(*v), err)
		}
		return fmt.Sprintf("%q, which is invalid (%v)", *v, err)
	}
	return nodeapi.DescribeSource(src)
}

// judge moves a node in trial to promoted or failed from its component's
// status, or fails it at its deadline.
func (p *planner) judge(rec *v1alpha1.NodeRecord, n *Node) {
	s := n.Status
	if s != nil {
		switch {
		case s.Phase == nodeapi.PhasePromoted && p.isOurs(s.Active):
			rec.State = v1alpha1.NodePromoted
			return
		case (s.Phase == nodeapi.PhaseRolledBack || s.Phase == nodeapi.PhaseDeadEnd) && p.isOurs(s.Assigned):
			rec.State = v1alpha1.NodeFailed
			rec.Reason = fmt.Sprintf("%s reports %s", component(&p.r.Spec), s.Phase)
			if s.Error != "" {
				rec.Reason += ": " + s.Error
			}
			p.event(true, "NodeFailed", "node %s failed: %s", rec.Name, rec.Reason)
			return
		}
	}
	p.checkDeadline(rec, n)
}

// checkDeadline fails a node that made no progress within the deadline,
// counted from its assignment or from the end of the trial it reports on
// the rollout's config, whichever is later.
func (p *planner) checkDeadline(rec *v1alpha1.NodeRecord, n *Node) {
	start := rec.AssignedAt.Time
	s := n.Status
	if s != nil && s.Phase == nodeapi.PhaseTrial && p.isOurs(s.Active) && s.TrialEnds != nil && s.TrialEnds.After(start) {
		start = s.TrialEnds.Time
	}
	end := start.Add(p.deadline)
	if p.in.Now.Before(end) {
		p.requeue(end.Sub(p.in.Now))
		return
	}
	last := "no status"
	switch {
	case n.StatusError != "":
		last = "an unreadable status: " + n.StatusError
	case s != nil:
		last = "phase " + string(s.Phase)
		if s.Error != "" {
			last += " (" + s.Error + ")"
		}
	}
	rec.Reason = fmt.Sprintf("no progress within %v: the node reports %s", p.deadline, last)
	if rec.State == v1alpha1.NodeAssigning {
		rec.Reason = fmt.Sprintf("not assigned within %v", p.deadline)
	}
	rec.State = v1alpha1.NodeFailed
	p.event(true, "NodeFailed", "node %s failed: %s", rec.Name, rec.Reason)
}

// decide moves the rollout's phase and step on and picks the nodes to
// assign.
func (p *planner) decide() {
	st, spec := p.st, &p.r.Spec
	switch {
	case spec.Undo:
		if st.Phase != v1alpha1.PhaseReverted {
			n := p.revertAll("undo")
			p.setPhase(v1alpha1.PhaseReverted, fmt.Sprintf("undone: %d nodes put back on their previous source", n))
			p.event(false, "Undo", "undo: %d nodes put back on their previous source", n)
		}
		return
	case p.r.DeletionTimestamp != nil:
		p.deleted()
		return
	case !st.Phase.Active():
		return
	case spec.Abort:
		p.setPhase(v1alpha1.PhaseAborted, "aborted: no node is assigned any more; what was done stays")
		p.event(false, "Aborted", "aborted at step %d; what was done stays", st.CurrentStep)
		return
	}
	if st.ConfigMap == nil && !p.start() {
		return
	}
	if p.configMapChanged() {
		return
	}
	if p.tooManyFailures() {
		return
	}
	p.steps()
}

// deleted stops a rollout that is being deleted. An active one puts every
// node it changed back on its previous source first, as a halt with
// revertOnHalt does: nothing else would remember what to put back once the
// object is gone. A rollout that already ended (completed, aborted, halted,
// reverted) leaves its nodes as they are.
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
	p.res.Patches = slices.DeleteFunc(p.res.Patches, func(pt Patch) bool { return !pt.Revert })
	n := p.revertAll("deletion")
	p.setPhase(v1alpha1.PhaseReverted, fmt.Sprintf("deleted while active at step %d: %d nodes put back on their previous source", st.CurrentStep, n))
	p.event(true, "Deleted", "deleted while active at step %d: reverting %d nodes to their previous source before the ConfigRollout goes", st.CurrentStep, n)
}

// Finalizer is the finalizer the rollout controller keeps on an active
// ConfigRollout, so that deleting it reverts the nodes it changed before the
// revert records go with the object.
const Finalizer = "dynconfig.io/revert-records"

// Finalized reports whether a ConfigRollout needs its finalizer no more:
// it is not active and no node of it is still being put back.
func Finalized(st *v1alpha1.ConfigRolloutStatus) bool {
	if st.Phase.Active() {
		return false
	}
	for _, rec := range st.Nodes {
		if rec.State == v1alpha1.NodeReverting {
			return false
		}
	}
	return true
}

// start pins the ConfigMap and starts the rollout, or says why it cannot.
func (p *planner) start() bool {
	cm, name := p.in.ConfigMap, p.r.Namespace+"/"+p.r.Spec.ConfigMapName
	switch {
	case cm == nil:
		p.pending("ConfigMapNotFound", fmt.Sprintf("waiting for ConfigMap %s, which does not exist", name))
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

func (p *planner) pending(reason, msg string) {
	if p.st.Message != msg {
		p.event(false, reason, "%s", msg)
	}
	p.st.Phase = v1alpha1.PhasePending
	p.st.Message = msg
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
// or edited since it started.
func (p *planner) configMapChanged() bool {
	cm, pinned := p.in.ConfigMap, p.st.ConfigMap
	name := p.r.Namespace + "/" + p.r.Spec.ConfigMapName
	var why string
	switch {
	case cm == nil:
		why = fmt.Sprintf("ConfigMap %s (UID %s) was deleted while the rollout was active", name, pinned.UID)
	case cm.UID != pinned.UID:
		why = fmt.Sprintf("ConfigMap %s was replaced while the rollout was active (UID %s, now %s)", name, pinned.UID, cm.UID)
	case cm.ResourceVersion != pinned.ResourceVersion:
		why = fmt.Sprintf("ConfigMap %s was edited while the rollout was active (resourceVersion %s, now %s); roll out a new ConfigMap instead of editing one",
			name, pinned.ResourceVersion, cm.ResourceVersion)
	default:
		return false
	}
	p.halt("ConfigMapChanged", why)
	return true
}

func (p *planner) failures() (n int32, reasons []string) {
	for _, r := range p.st.Nodes {
		if r.CountsAsFailed() {
			n++
			reasons = append(reasons, r.Name+": "+r.Reason)
		}
	}
	return n, reasons
}

func (p *planner) tooManyFailures() bool {
	n, reasons := p.failures()
	if n <= p.r.Spec.MaxFailures {
		return false
	}
	const shown = 3
	if len(reasons) > shown {
		reasons = append(reasons[:shown], fmt.Sprintf("and %d more", len(reasons)-shown))
	}
	p.halt("TooManyFailures", fmt.Sprintf("%d nodes failed, more than maxFailures %d: %s", n, p.r.Spec.MaxFailures, strings.Join(reasons, "; ")))
	return true
}

// halt stops the rollout and, with revertOnHalt, reverts its nodes.
func (p *planner) halt(reason, why string) {
	p.setPhase(v1alpha1.PhaseHalted, "halted: "+why)
	meta.SetStatusCondition(&p.st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionHalted, Status: metav1.ConditionTrue, Reason: reason,
		Message: truncate(why), ObservedGeneration: p.r.Generation, LastTransitionTime: p.now,
	})
	// Halt: no new assignment, not even one asked earlier in this plan.
	p.res.Patches = slices.DeleteFunc(p.res.Patches, func(pt Patch) bool { return !pt.Revert })
	p.event(true, "Halted", "halted at step %d: %s", p.st.CurrentStep, why)
	if r := p.r.Spec.RevertOnHalt; r == nil || *r {
		n := p.revertAll("revertOnHalt")
		p.event(true, "Reverting", "reverting %d nodes to their previous source", n)
	}
}

// revertAll marks every node the rollout changed (and has not reverted)
// Reverting, and returns how many.
func (p *planner) revertAll(why string) int {
	n := 0
	for i := range p.st.Nodes {
		rec := &p.st.Nodes[i]
		switch rec.State {
		case v1alpha1.NodeAssigning, v1alpha1.NodeTrial, v1alpha1.NodePromoted, v1alpha1.NodeFailed:
			if rec.State == v1alpha1.NodeFailed {
				rec.FailedBeforeRevert = true
			}
			rec.State = v1alpha1.NodeReverting
			if rec.Reason == "" {
				rec.Reason = why
			} else {
				rec.Reason += "; reverted by " + why
			}
			n++
		}
	}
	return n
}

func (p *planner) setPhase(ph v1alpha1.RolloutPhase, msg string) {
	p.st.Phase = ph
	p.st.Message = msg
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
			p.event(false, "Paused", "paused at step %d (spec.paused)", st.CurrentStep)
		}
		p.setPhase(v1alpha1.PhasePaused, fmt.Sprintf("paused at step %d: spec.paused is true", st.CurrentStep))
		return
	}
	selected := p.selectedCount()
	for int(st.CurrentStep) < len(spec.Steps) {
		i := st.CurrentStep
		step := spec.Steps[i]
		if step.Pause != nil {
			if !p.pauseOver(i, step.Pause) {
				return
			}
			p.nextStep(fmt.Sprintf("pause step %d is over", i))
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
			p.nextStep(fmt.Sprintf("step %d is done: %d of %d selected nodes run the config", i, target, selected))
			continue
		}
		if st.Phase == v1alpha1.PhasePaused {
			p.event(false, "Resumed", "resumed at step %d", i)
		}
		p.setPhase(v1alpha1.PhaseProgressing, fmt.Sprintf("step %d: %d of %d nodes", i, target, selected))
		p.assign(target, selected)
		return
	}
	if st.Phase != v1alpha1.PhaseCompleted {
		p.setPhase(v1alpha1.PhaseCompleted, fmt.Sprintf("completed: %d nodes promoted", p.countState(v1alpha1.NodePromoted)))
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
		msg := fmt.Sprintf("pause step %d until %s", i, end.UTC().Format(time.RFC3339))
		if st.Phase != v1alpha1.PhasePaused {
			p.event(false, "Paused", "%s", msg)
		}
		p.setPhase(v1alpha1.PhasePaused, msg)
		return false
	}
	if r := p.r.Spec.ResumedStep; r != nil && *r >= i {
		return true
	}
	msg := fmt.Sprintf("pause step %d: waiting until resumed (dynconfigctl rollout resume)", i)
	if st.Phase != v1alpha1.PhasePaused {
		p.event(false, "Paused", "%s", msg)
	}
	p.setPhase(v1alpha1.PhasePaused, msg)
	return false
}

func (p *planner) nextStep(why string) {
	p.event(false, "StepCompleted", "%s", why)
	p.st.CurrentStep++
	p.st.StepStartedAt = &p.now
}

// settled counts the recorded nodes that promoted or failed and still
// exist.
func (p *planner) settled() int {
	return p.countState(v1alpha1.NodePromoted) + p.countState(v1alpha1.NodeFailed) + p.countState(v1alpha1.NodeSkipped)
}

func (p *planner) countState(s v1alpha1.NodeState) int {
	n := 0
	for _, r := range p.st.Nodes {
		if r.State == s {
			n++
		}
	}
	return n
}

// assign records new nodes for the current step, up to the step's target
// and the room maxUnavailable leaves.
func (p *planner) assign(target, selected int) {
	inTrial := p.countState(v1alpha1.NodeAssigning) + p.countState(v1alpha1.NodeTrial)
	held := inTrial + p.settled()
	room := min(p.maxUnavailable(selected)-inTrial, target-held)
	if room <= 0 {
		return
	}
	var candidates []string
	for _, n := range p.in.Nodes {
		if _, recorded := p.records[n.Name]; n.Selected && !recorded {
			candidates = append(candidates, n.Name)
		}
	}
	slices.Sort(candidates)
	var names []string
	for _, name := range candidates {
		if room == 0 {
			break
		}
		n := p.nodes[name]
		prev, ok := parseAssignment(n.Assignment)
		rec := v1alpha1.NodeRecord{Name: name, PreviousIndex: p.intern(prev), State: v1alpha1.NodeAssigning, Step: p.st.CurrentStep, AssignedAt: p.now}
		if !ok {
			// Nothing to put back: never touch it, count it failed so an
			// operator sees it.
			rec.State = v1alpha1.NodeSkipped
			rec.Reason = fmt.Sprintf("its assignment annotation is %s; the rollout leaves it alone", describeAnnotation(n.Assignment))
			p.event(true, "NodeFailed", "node %s failed: %s", name, rec.Reason)
		} else if carries(n, p.ours) {
			rec.State = v1alpha1.NodeTrial
		}
		p.st.Nodes = append(p.st.Nodes, rec)
		p.records[name] = len(p.st.Nodes) - 1
		room--
		if rec.State == v1alpha1.NodeSkipped {
			continue
		}
		names = append(names, name)
		if rec.State == v1alpha1.NodeTrial {
			p.judge(&p.st.Nodes[len(p.st.Nodes)-1], n)
			continue
		}
		v := p.oursJSON
		p.res.Patches = append(p.res.Patches, Patch{Node: name, Value: &v})
		p.requeue(p.deadline)
	}
	if len(names) > 0 {
		p.event(false, "Assigned", "step %d: assigned %d nodes: %s", p.st.CurrentStep, len(names), abbreviate(names, 10))
	}
	if n, _ := p.failures(); n > p.r.Spec.MaxFailures {
		p.tooManyFailures()
	}
}

// intern returns the index of src in status.previousSources, appending it
// when it is new; nil for no source.
func (p *planner) intern(src *corev1.NodeConfigSource) *int32 {
	if src == nil {
		return nil
	}
	for i := range p.st.PreviousSources {
		if apiequality.Semantic.DeepEqual(&p.st.PreviousSources[i], src) {
			return ptr.To(int32(i))
		}
	}
	p.st.PreviousSources = append(p.st.PreviousSources, *src)
	return ptr.To(int32(len(p.st.PreviousSources) - 1))
}

// abbreviate lists at most max names.
func abbreviate(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
}

// reverts asks for the patch of every Reverting node that does not carry
// its previous source yet, and moves the others to Reverted. A record that
// is still Assigning when the rollout stops (the patch may or may not have
// been made) is reverted the same way: a no-op when it was not.
func (p *planner) reverts() {
	var patched []string
	for i := range p.st.Nodes {
		rec := &p.st.Nodes[i]
		if rec.State != v1alpha1.NodeReverting {
			continue
		}
		n, ok := p.nodes[rec.Name]
		if !ok {
			rec.State = v1alpha1.NodeGone
			continue
		}
		prev, ok := p.st.PreviousOf(rec)
		if !ok {
			// Someone damaged the record: putting back a guess could be
			// worse than leaving the node alone.
			rec.State = v1alpha1.NodeSkipped
			rec.Reason = fmt.Sprintf("its record's previousIndex %d is not in status.previousSources (%d entries): the previous source is unknown, the node is left as it is",
				*rec.PreviousIndex, len(p.st.PreviousSources))
			p.event(true, "NodeFailed", "node %s cannot be reverted: %s", rec.Name, rec.Reason)
			continue
		}
		if carries(n, prev) {
			rec.State = v1alpha1.NodeReverted
			continue
		}
		if !carries(n, p.ours) {
			// Not what this rollout wrote: someone changed it since.
			// Putting the old source back would undo their change.
			rec.State = v1alpha1.NodeSuperseded
			rec.Reason += fmt.Sprintf("; not reverted: its assignment was changed by someone else (now %s), left as it is", describeAnnotation(n.Assignment))
			p.event(true, "NodeSuperseded", "node %s is not reverted: its assignment was changed by someone else (now %s)", rec.Name, describeAnnotation(n.Assignment))
			continue
		}
		var value *string
		if prev != nil {
			b, _ := json.Marshal(prev)
			v := string(b)
			value = &v
		}
		p.res.Patches = append(p.res.Patches, Patch{Node: rec.Name, Value: value, Revert: true})
		patched = append(patched, rec.Name)
	}
	if len(patched) > 0 {
		p.requeue(30 * time.Second)
	}
	// Assigning records of a stopped rollout: the assignment may not have
	// been made; nothing will make it now.
	if !p.st.Phase.Active() && p.st.Phase != v1alpha1.PhaseCompleted {
		for i := range p.st.Nodes {
			rec := &p.st.Nodes[i]
			if rec.State == v1alpha1.NodeAssigning {
				if n, ok := p.nodes[rec.Name]; ok && p.carriesPrevious(rec, n) {
					rec.State = v1alpha1.NodeReverted
					rec.Reason = "the rollout stopped before the node was assigned"
				}
			}
		}
	}
	// The assignments still to make (a lost write, a new leader).
	if p.st.Phase == v1alpha1.PhaseProgressing || p.st.Phase == v1alpha1.PhasePaused {
		seen := map[string]bool{}
		for _, pt := range p.res.Patches {
			seen[pt.Node] = true
		}
		for _, rec := range p.st.Nodes {
			if rec.State != v1alpha1.NodeAssigning || seen[rec.Name] {
				continue
			}
			if n, ok := p.nodes[rec.Name]; ok && !carries(n, p.ours) && p.carriesPrevious(&rec, n) {
				v := p.oursJSON
				p.res.Patches = append(p.res.Patches, Patch{Node: rec.Name, Value: &v})
			}
		}
	}
}

// count fills the counts.
func (p *planner) count() {
	st := p.st
	st.Selected = int32(p.selectedCount())
	st.Assigned, st.InTrial, st.Promoted, st.Failed = 0, 0, 0, 0
	for _, r := range st.Nodes {
		switch r.State {
		case v1alpha1.NodeAssigning, v1alpha1.NodeTrial:
			st.Assigned++
			st.InTrial++
		case v1alpha1.NodePromoted:
			st.Assigned++
			st.Promoted++
		case v1alpha1.NodeFailed:
			st.Assigned++
		}
		if r.CountsAsFailed() {
			st.Failed++
		}
	}
	p.res.Status = *st
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
