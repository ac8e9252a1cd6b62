// Plan's input and result, the planner, and the order of its steps.

package plan

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// Scope is the namespace whose ConfigRollouts the caller sees ("" for
	// every namespace): a claim on a Node by a rollout in scope that is
	// not among Others is stale (the rollout was deleted) and may be
	// taken over; one by a rollout out of scope belongs to another
	// controller and is never assigned over.
	Scope string
	// BadReports are the nodes, across the fleet, whose component reports
	// a config bad (BadReportOf); with Others' halted rollouts, what the
	// fleet knows bad (knownbad.go). Only read before the rollout starts.
	BadReports []BadReport
	// KnownBadNodes is how many BadReports of the ConfigMap refuse it;
	// 0: DefaultKnownBadNodes.
	KnownBadNodes int
	// Memo, when set, remembers decoded annotation values across calls
	// (the caller keeps it); nil decodes every value.
	Memo *Memo
	// Disruption is what the caller knows of the PodDisruptionBudgets of
	// the pods on the nodes (disruption.go); nil: no budgets.
	Disruption *Disruption
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
	// Immutable is its `immutable` field: a rollout starts on an
	// immutable ConfigMap only.
	Immutable bool
}

// Node is one observed Node.
type Node struct {
	// Name of the Node.
	Name string
	// Selected is whether the rollout's selector matches it.
	Selected bool
	// ResourceVersion is the Node's; every patch of it is made on this
	// version, so that two controllers cannot both claim it.
	ResourceVersion string
	// Assignment is the component's assignment annotation value, nil
	// when the annotation is absent.
	Assignment *string
	// Claim is the component's claim annotation value
	// (nodeapi.ClaimAnnotationFor), nil when absent: which rollout
	// changed the node and what it had before.
	Claim *string
	// Status is what the component publishes (nodeapi.ReadConfigStatus),
	// nil when nothing.
	Status *nodeapi.ConfigStatus
	// StatusError is why the published status could not be read.
	StatusError string
	// Analysis is the verdict of the health gates (spec.analysis) on the
	// node, nil when none was taken (gates.go).
	Analysis *Analysis
	// Preflight is the component's pre-flight request annotation value
	// (nodeapi.PreflightAnnotationFor), nil when absent (preflight.go).
	Preflight *string
}

// Other is another rollout, as far as the overlap check needs it.
type Other struct {
	// Namespace and Name identify it.
	Namespace, Name string
	// UID is its uid, which the claims it writes on Nodes name.
	UID types.UID
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
	// ConfigMap is the ConfigMap it pinned when it started (nil: not
	// started); HaltReason and HaltMessage its Halted condition's reason
	// and message while that is True (once it halted, also after an
	// undo; "" when it never halted): a halt marks the ConfigMap known
	// bad (HaltMarksBad).
	ConfigMap               *v1alpha1.ConfigMapRef
	HaltReason, HaltMessage string
}

// Patch is one change of a Node: its assignment annotation and its claim
// annotation, in one request, made on the Node's ResourceVersion.
type Patch struct {
	// Node is the Node's name.
	Node string
	// ResourceVersion is the Node's version the patch was planned on
	// (a precondition: the patch fails with a conflict if it changed).
	ResourceVersion string
	// ClaimOnly leaves the assignment annotation as it is; else Value is
	// its new value.
	ClaimOnly bool
	// Value is the assignment annotation's new value; nil removes it.
	Value *string
	// Claim is the claim annotation's new value; nil removes it.
	Claim *string
	// Revert is true when the patch lets the node go (puts a previous
	// source back, or only removes the claim); Claim is then nil, or the
	// claim this rollout replaced (Claim.PreviousClaim), put back.
	Revert bool
	// Preflight, when set, makes this a pre-flight request (preflight.go):
	// the patch writes this value as the component's request annotation
	// and nothing else (no precondition; every other field is ignored).
	Preflight *string
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
	// Finalized is true when the rollout needs its Finalizer no more: it
	// is not active, no Node carries its claim and no record of an older
	// controller is left to migrate. (A rollout that ended keeps its
	// claims, for undo, until it is deleted.)
	Finalized bool
	// Watch are the nodes whose health gates (spec.analysis) the caller
	// is to run and report in Node.Analysis (gates.go).
	Watch []Watch
}

// view is what the planner knows of one node it holds: the claim it (or an
// older controller's record) keeps for it, and where the node stands.
type view struct {
	n     *Node
	claim *nodeapi.Claim
	// onNode is whether the claim is on the Node; false for one rebuilt
	// from a status.nodes record of an older controller, or made in this
	// plan (fresh).
	onNode bool
	fresh  bool
	// passing is whether this plan passed the node's gates (passNode):
	// the pass is not on the Node yet.
	passing bool
	state   v1alpha1.NodeState
	reason  string
}

// planner carries one Plan call.
type planner struct {
	in       Input
	r        *v1alpha1.ConfigRollout
	st       *v1alpha1.ConfigRolloutStatus
	now      metav1.Time
	nodes    map[string]*Node
	held     map[string]*view // the nodes this rollout claims, by name
	names    []string         // held's names, sorted; nil when held changed
	foreign  map[string]*nodeapi.Claim
	badClaim map[string]string // nodes whose claim annotation does not decode: why
	ours     *corev1.NodeConfigSource
	oursJSON string
	oursErr  error // why ours does not encode (an edited spec)
	deadline time.Duration
	conflict string // why the rollout is refused, "" when it is not
	// budgetHeld is what this round's budget check held back (the
	// DisruptionBudget condition's message while True), for the status
	// message; "" when it held nothing.
	budgetHeld string
	blocked    []string
	absent     []string // selected nodes that do not run the component (notrunning.go)
	refused    string   // the Refused condition's reason, "" when not refused
	res        Result
}

// Plan decides the next step of a rollout. It is pure: the same input gives
// the same result, and the input is not modified.
func Plan(in Input) Result {
	p := &planner{in: in, r: in.Rollout, now: metav1.NewTime(in.Now)}
	st := in.Rollout.Status.DeepCopy()
	p.st = st
	wasActive := st.Phase.Active()
	st.ObservedGeneration = in.Rollout.Generation
	if st.Phase == "" {
		st.Phase = v1alpha1.PhasePending
	}
	p.nodes = make(map[string]*Node, len(in.Nodes))
	for i := range in.Nodes {
		p.nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	p.deadline = DefaultProgressDeadline
	if d := in.Rollout.Spec.ProgressDeadlineSeconds; d != nil && *d > 0 {
		p.deadline = time.Duration(*d) * time.Second
	}
	if st.ConfigMap != nil {
		p.setOurs(st.ConfigMap.UID)
	}
	p.repair()
	p.readClaims()
	p.migrate()
	p.findNotRunning()

	p.observe(wasActive)
	p.decide()
	p.preflightEnded()
	p.reverts()
	p.count(wasActive)
	p.conditions()
	p.fleetStatus(wasActive)
	p.notAppliedStatus(wasActive)
	p.res.Finalized = p.finalized()
	p.res.Watch = p.watches()
	return p.res
}

// repair brings a status someone edited out of range back into it (the
// API server's schema refuses most of it; an older CRD did not), so that
// planning never indexes outside the spec. It says what it changed.
func (p *planner) repair() {
	st, n := p.st, int32(len(p.r.Spec.Steps))
	switch {
	case st.CurrentStep < 0:
		p.event(true, "StatusRepaired", "status.currentStep %d is negative: planning from the first step (done steps pass again at once)", st.CurrentStep)
		st.CurrentStep = 0
	case st.CurrentStep > n:
		p.event(true, "StatusRepaired", "status.currentStep %d is past the last step (%d steps): taken as %d, all steps done", st.CurrentStep, n, n)
		st.CurrentStep = n
	}
}

// readClaims sorts the nodes' claims: this rollout's (by uid), another
// rollout's, and undecodable ones.
func (p *planner) readClaims() {
	p.held = map[string]*view{}
	p.foreign = map[string]*nodeapi.Claim{}
	p.badClaim = map[string]string{}
	for i := range p.in.Nodes {
		n := &p.in.Nodes[i]
		if n.Claim == nil {
			continue
		}
		c, err := p.in.Memo.claim(*n.Claim)
		switch {
		case err != nil:
			p.badClaim[n.Name] = err.Error()
		case c == nil:
		case c.UID == p.r.UID && p.r.UID != "":
			p.held[n.Name] = &view{n: n, claim: c, onNode: true}
		default:
			p.foreign[n.Name] = c
		}
	}
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

// heldNames returns the names of the held nodes, sorted.
func (p *planner) heldNames() []string {
	if p.names != nil && len(p.names) == len(p.held) {
		return p.names
	}
	names := make([]string, 0, len(p.held))
	for name := range p.held {
		names = append(names, name)
	}
	slices.Sort(names)
	p.names = names
	return names
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
		p.event(false, "Aborted", "aborted at %s; what was done stays", p.stepName(st.CurrentStep))
		return
	}
	if st.ConfigMap == nil && !p.start() {
		return
	}
	if p.configMapChanged() {
		return
	}
	if p.oursErr != nil {
		p.halt("InvalidSpec", fmt.Sprintf("the assignment would be invalid: %v", p.oursErr))
		return
	}
	if p.tooManyFailures() || p.preflightHolds() {
		return
	}
	p.steps()
}
