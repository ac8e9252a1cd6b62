package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ConfigRollout rolls one ConfigMap out to a component on a set of nodes,
// step by step: it assigns the ConfigMap to a few nodes at a time, waits for
// each node's component to report it promoted, halts when too many nodes
// fail, and puts the nodes it changed back on their previous source when
// told to.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cro,categories=dynconfig
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="ConfigMap",type=string,JSONPath=`.spec.configMapName`,priority=1
// +kubebuilder:printcolumn:name="Component",type=string,JSONPath=`.spec.component`,priority=1
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selected`,priority=1
// +kubebuilder:printcolumn:name="Assigned",type=integer,JSONPath=`.status.assigned`
// +kubebuilder:printcolumn:name="In Trial",type=integer,JSONPath=`.status.inTrial`
// +kubebuilder:printcolumn:name="Promoted",type=integer,JSONPath=`.status.promoted`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Reconciled",type=date,JSONPath=`.status.lastReconcileTime`,priority=1,description="When the rollout controller last reconciled it (its heartbeat): old while a rollout is active means no controller runs it."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,description="Why the rollout stands where it does; steps are counted from 1 (step 2 of 3)."
type ConfigRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to roll out, where and how fast.
	Spec ConfigRolloutSpec `json:"spec"`
	// Status is what the rollout controller observed and did.
	// +optional
	Status ConfigRolloutStatus `json:"status,omitempty"`
}

// ConfigRolloutList is a list of ConfigRollouts.
//
// +kubebuilder:object:root=true
type ConfigRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the rollouts.
	Items []ConfigRollout `json:"items"`
}

// ConfigRolloutSpec says what to roll out, to which nodes and how fast.
// What it rolls out (component, configMapName, payloadKey, nodeSelector,
// steps) cannot change once created; a new rollout is a new object.
//
// +kubebuilder:validation:XValidation:rule="self.component == oldSelf.component && self.configMapName == oldSelf.configMapName",message="component and configMapName are immutable: create a new ConfigRollout"
// +kubebuilder:validation:XValidation:rule="has(self.payloadKey) == has(oldSelf.payloadKey) && (!has(self.payloadKey) || self.payloadKey == oldSelf.payloadKey)",message="payloadKey is immutable: create a new ConfigRollout"
// +kubebuilder:validation:XValidation:rule="self.steps == oldSelf.steps",message="steps are immutable: create a new ConfigRollout"
// +kubebuilder:validation:XValidation:rule="has(self.nodeSelector) == has(oldSelf.nodeSelector) && (!has(self.nodeSelector) || self.nodeSelector == oldSelf.nodeSelector)",message="nodeSelector is immutable: create a new ConfigRollout"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.abort) || !oldSelf.abort || (has(self.abort) && self.abort)",message="abort cannot be undone"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.undo) || !oldSelf.undo || (has(self.undo) && self.undo)",message="undo cannot be undone"
type ConfigRolloutSpec struct {
	// Component is the name of the component whose config this rolls out
	// ("kubelet", "kube-proxy", ...): it selects the Node annotations the
	// rollout writes (the assignment) and reads (the component's status).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:default=kubelet
	// +optional
	Component string `json:"component,omitempty"`
	// ConfigMapName is the ConfigMap, in the rollout's namespace, to roll
	// out. It must not be edited while the rollout is active: an edit
	// halts the rollout.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ConfigMapName string `json:"configMapName"`
	// PayloadKey is the ConfigMap data key that holds the config. Default:
	// the component's key ("kubelet" for the kubelet, "config.conf" for
	// kube-proxy: nodeapi.DefaultPayloadKey); required for any other
	// component (the rollout stays Pending, PayloadKeyRequired, without it).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PayloadKey string `json:"payloadKey,omitempty"`
	// NodeSelector selects the nodes to roll out to. Empty or absent
	// selects every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Steps are the stages of the rollout, in order. A step either sets
	// the cumulative number (or percentage, rounded up) of the selected
	// nodes that must run the config before the next step, or pauses. A
	// rollout whose last node step is below 100% ends there; the rest of
	// the nodes are not touched.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Steps []RolloutStep `json:"steps"`
	// MaxUnavailable is how many nodes (a number, or a percentage of the
	// selected nodes, rounded down but at least 1) may be in trial at
	// once. Default: 1.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^(100|[1-9][0-9]?)%$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxFailures is how many nodes may fail before the rollout halts: it
	// halts when the failure count reaches MaxFailures+1. Default 0: the
	// first failure halts it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxFailures int32 `json:"maxFailures,omitempty"`
	// ProgressDeadlineSeconds is how long a node may take, after it is
	// assigned the config (or after the trial it reports ends, whichever
	// is later), to report it promoted before it counts as failed.
	// Default: 600.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	// Paused stops new assignments while true; nodes already assigned are
	// still followed, and a failure can still halt the rollout.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// ResumedStep releases the pause steps that have no duration: the
	// rollout waits at such a step (index i) until ResumedStep >= i.
	// `dynconfigctl rollout resume` sets it to the current step.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ResumedStep *int32 `json:"resumedStep,omitempty"`
	// RevertOnHalt puts every node this rollout changed back on its
	// previous source when the rollout halts. Default: true.
	// +optional
	RevertOnHalt *bool `json:"revertOnHalt,omitempty"`
	// Abort stops the rollout for good and keeps what is done: no node is
	// assigned or reverted. It cannot be set back to false.
	// +optional
	Abort bool `json:"abort,omitempty"`
	// Undo puts every node this rollout changed back on its previous
	// source (at any phase; an active rollout stops first). It cannot be
	// set back to false.
	// +optional
	Undo bool `json:"undo,omitempty"`
	// Windows are when automatic steps may assign nodes; outside all of
	// them the rollout waits, Paused, naming the next window (nodes in
	// trial are still followed). Empty: any time.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Windows []MaintenanceWindow `json:"windows,omitempty"`
	// AllowKnownBad starts the rollout even though its ConfigMap is known
	// bad: a rollout halted on it, or nodes report it bad (Refused).
	// +optional
	AllowKnownBad bool `json:"allowKnownBad,omitempty"`
	// Analysis sets health gates on each node: see RolloutAnalysis.
	// +optional
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
	// PodDisruptionBudgets says whether the restart of a node counts
	// against the PodDisruptionBudgets of the pods on it (a kubelet
	// restart can set every pod on the node not Ready: KEP-4781).
	// Respect, the default: no node is assigned whose pods would take a
	// budget below what it allows; held nodes wait, and the
	// DisruptionBudget condition names the budgets. Ignore: nodes are
	// assigned without looking at the budgets. It may be changed at any
	// time.
	// +optional
	PodDisruptionBudgets DisruptionBudgetPolicy `json:"podDisruptionBudgets,omitempty"`
	// Preflight says whether the rollout, when it starts and before any
	// node applies the config, asks every selected node that runs the
	// component to check the config against its own layers (its instance
	// config, the drop-ins that sort after dynconfig's, the fields the
	// platform locks, a writable state dir), waits until they answered or
	// preflightTimeoutSeconds passed, and names the nodes that did not
	// pass (status.preflight, the Preflight condition, Events). A node
	// answers Pass, Overridden (another of its layers sets some of the
	// config's fields again: it would run its own values for them while
	// reporting the config promoted) or Fail. Required halts the rollout,
	// before any node applies the config, when a node fails, is
	// overridden or does not answer in time. Warn names them and goes on.
	// Off, the default: no check, as before the field. Read when the
	// rollout starts (a rollout started without it does not check later);
	// set to Off while the check waits, it ends the wait.
	// +optional
	Preflight PreflightPolicy `json:"preflight,omitempty"`
	// PreflightTimeoutSeconds is how long the pre-flight check waits for
	// the nodes' answers (spec.preflight); an agent older than the check
	// never answers. Default: 120.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	PreflightTimeoutSeconds *int32 `json:"preflightTimeoutSeconds,omitempty"`
}

// PreflightPolicy says what a rollout does with the nodes' pre-flight
// answers (spec.preflight).
//
// +kubebuilder:validation:Enum=Required;Warn;Off
type PreflightPolicy string

// The values of spec.preflight.
const (
	// PreflightRequired halts the rollout before any node applies the
	// config when a selected node answers Fail or Overridden, or does not
	// answer within the timeout.
	PreflightRequired PreflightPolicy = "Required"
	// PreflightWarn names those nodes (status.preflight, the Preflight
	// condition, a Warning Event) and goes on.
	PreflightWarn PreflightPolicy = "Warn"
	// PreflightOff ("" too) asks nothing: the rollout starts assigning at
	// once.
	PreflightOff PreflightPolicy = "Off"
)

// PreflightStatus is the pre-flight check of a rollout (spec.preflight).
type PreflightStatus struct {
	// Policy is spec.preflight when the check started.
	Policy PreflightPolicy `json:"policy"`
	// StartedAt is when the nodes were asked; the timeout counts from it.
	StartedAt metav1.Time `json:"startedAt"`
	// CompletedAt is when every asked node had answered, or the timeout
	// passed; nil while the check waits.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Asked is how many nodes were asked (the selected nodes that run the
	// component).
	// +kubebuilder:validation:Minimum=0
	Asked int32 `json:"asked"`
	// Passed, Overridden and Failed count the answers; NoAnswer the nodes
	// that had not answered when the check completed (or have not yet).
	// +optional
	Passed int32 `json:"passed,omitempty"`
	// +optional
	Overridden int32 `json:"overridden,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	NoAnswer int32 `json:"noAnswer,omitempty"`
	// Nodes are some of the nodes that did not pass, by name: at most
	// MaxFailureRecords.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Nodes []NodePreflight `json:"nodes,omitempty"`
}

// NodePreflight is one node's pre-flight answer that was not Pass.
type NodePreflight struct {
	// Node is the Node's name.
	Node string `json:"node"`
	// Verdict is the node's answer (Fail, Overridden), or NoAnswer.
	// +kubebuilder:validation:MaxLength=63
	Verdict string `json:"verdict"`
	// Fields are, for Overridden, the config's fields another layer of the
	// node sets again, each "path (by LAYER)".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	Fields []string `json:"fields,omitempty"`
	// Message says why, for Fail and NoAnswer.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// PreflightNoAnswer is NodePreflight.Verdict for a node that did not
// answer in time.
const PreflightNoAnswer = "NoAnswer"

// DisruptionBudgetPolicy says whether a rollout budgets its node restarts
// against PodDisruptionBudgets.
//
// +kubebuilder:validation:Enum=Respect;Ignore
type DisruptionBudgetPolicy string

// The values of spec.podDisruptionBudgets.
const (
	// DisruptionBudgetsRespect ("" too) holds back a node whose restart
	// would take a PodDisruptionBudget below what it allows.
	DisruptionBudgetsRespect DisruptionBudgetPolicy = "Respect"
	// DisruptionBudgetsIgnore assigns nodes without looking at the
	// budgets.
	DisruptionBudgetsIgnore DisruptionBudgetPolicy = "Ignore"
)

// RolloutStep is one stage of a rollout: exactly one of Nodes and Pause.
//
// +kubebuilder:validation:XValidation:rule="has(self.nodes) != has(self.pause)",message="a step sets exactly one of nodes and pause"
type RolloutStep struct {
	// Nodes is the cumulative number, or percentage (rounded up), of the
	// selected nodes that run the config once this step is done.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^(100|[1-9][0-9]?)%$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1"
	// +optional
	Nodes *intstr.IntOrString `json:"nodes,omitempty"`
	// Pause waits before the next step: for Duration when it is set, else
	// until the step is resumed (spec.resumedStep).
	// +optional
	Pause *RolloutPause `json:"pause,omitempty"`
}

// RolloutPause is a pause step.
type RolloutPause struct {
	// Duration is how long to wait; absent means until resumed.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// RolloutPhase is where a rollout stands.
//
// +kubebuilder:validation:Enum=Pending;Progressing;Paused;Halted;Completed;Reverted;Aborted
type RolloutPhase string

// The phases of a rollout. Pending, Progressing and Paused are active (the
// rollout holds its nodes); the others are final, except that Undo still
// acts on Completed, Halted and Aborted.
const (
	// PhasePending: not started yet (its ConfigMap is missing or another
	// rollout holds some of its nodes; see the conditions).
	PhasePending RolloutPhase = "Pending"
	// PhaseProgressing: assigning nodes and waiting for them.
	PhaseProgressing RolloutPhase = "Progressing"
	// PhasePaused: spec.paused, or waiting at a pause step.
	PhasePaused RolloutPhase = "Paused"
	// PhaseHalted: too many nodes failed, or the ConfigMap was edited.
	PhaseHalted RolloutPhase = "Halted"
	// PhaseCompleted: every step is done.
	PhaseCompleted RolloutPhase = "Completed"
	// PhaseReverted: undone; every node it changed is back on its
	// previous source (or being put back, see the node records).
	PhaseReverted RolloutPhase = "Reverted"
	// PhaseAborted: stopped by spec.abort; what was done stays.
	PhaseAborted RolloutPhase = "Aborted"
)

// Active reports whether a rollout in phase p holds its nodes: one active
// rollout per node set.
func (p RolloutPhase) Active() bool {
	return p == "" || p == PhasePending || p == PhaseProgressing || p == PhasePaused
}

// NodeState is where one node stands in a rollout.
//
// +kubebuilder:validation:Enum=Assigning;Trial;Promoted;Failed;Skipped;Reverting;Reverted;Superseded;Gone
type NodeState string

// The states of a node record.
const (
	// NodeAssigning: recorded (with its previous source) before the
	// assignment is written; becomes Trial once the Node carries it.
	NodeAssigning NodeState = "Assigning"
	// NodeTrial: the Node carries the assignment; not yet promoted.
	NodeTrial NodeState = "Trial"
	// NodePromoted: the component reports the config promoted.
	NodePromoted NodeState = "Promoted"
	// NodeFailed: the component reports the config bad, or made no
	// progress within the deadline (see Reason).
	NodeFailed NodeState = "Failed"
	// NodeSkipped: never touched, because its assignment annotation does
	// not decode (so a revert could not restore it); counts as a failure.
	NodeSkipped NodeState = "Skipped"
	// NodeReverting: the previous source is to be put back.
	NodeReverting NodeState = "Reverting"
	// NodeReverted: the Node carries its previous source again.
	NodeReverted NodeState = "Reverted"
	// NodeSuperseded: someone else (another rollout, an operator) changed
	// the Node's assignment after this rollout did; a revert leaves it as
	// it is rather than overwrite their change (Reason says what it
	// carries).
	NodeSuperseded NodeState = "Superseded"
	// NodeGone: the Node was deleted.
	NodeGone NodeState = "Gone"
)

// ConfigMapRef pins the ConfigMap a rollout started with.
type ConfigMapRef struct {
	// UID of the ConfigMap.
	UID types.UID `json:"uid"`
	// ResourceVersion of the ConfigMap when the rollout started.
	ResourceVersion string `json:"resourceVersion"`
}

// NodeRecord is what an older rollout controller recorded in the status
// about a node it changed. Read (and migrated onto the Node), never
// written: the record now lives on the Node (nodeapi.Claim).
type NodeRecord struct {
	// Name of the Node.
	Name string `json:"name"`
	// PreviousIndex points at the assignment the node had before (what a
	// revert restores) in the status's previousSources; absent (and no
	// previous): none, the node ran its local config. Use
	// ConfigRolloutStatus.PreviousOf to read it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PreviousIndex *int32 `json:"previousIndex,omitempty"`
	// Previous is the assignment the node had before, written in full by
	// controllers older than previousIndex; read, never written.
	// +optional
	Previous *corev1.NodeConfigSource `json:"previous,omitempty"`
	// State is where the node stands.
	State NodeState `json:"state"`
	// Step is the index of the step that assigned the node.
	Step int32 `json:"step"`
	// AssignedAt is when the node was assigned.
	AssignedAt metav1.Time `json:"assignedAt"`
	// Reason says why the node failed (its component's error), or why it
	// was reverted.
	// +optional
	Reason string `json:"reason,omitempty"`
	// FailedBeforeRevert is true for a Reverting or Reverted node that had
	// failed, so that the failure count survives the revert.
	// +optional
	FailedBeforeRevert bool `json:"failedBeforeRevert,omitempty"`
}

// HistoryEntry is one thing that happened to a rollout.
type HistoryEntry struct {
	// Time it happened.
	Time metav1.Time `json:"time"`
	// Reason is a CamelCase word (the Event's reason).
	Reason string `json:"reason"`
	// Message says what happened.
	Message string `json:"message"`
}

// MaxHistory is how many HistoryEntries a status keeps (the newest).
const MaxHistory = 32

// MaxFailureRecords is how many NodeFailures a status lists.
const MaxFailureRecords = 16

// NodeFailure is one failed node and why.
type NodeFailure struct {
	// Node is the Node's name.
	Node string `json:"node"`
	// Reason says why it failed.
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
}

// StepStatus is one step done.
type StepStatus struct {
	// Step is the step's index in spec.steps.
	Step int32 `json:"step"`
	// StartedAt and CompletedAt are when it started and ended.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Promoted and Failed are the counts when it ended.
	// +optional
	Promoted int32 `json:"promoted,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// The condition types of a rollout.
const (
	// ConditionProgressing is True while the rollout assigns nodes or
	// waits for them.
	ConditionProgressing = "Progressing"
	// ConditionHalted is True once the rollout halted.
	ConditionHalted = "Halted"
	// ConditionConflict is True while another active rollout holds some
	// of this one's nodes; the rollout does not start until it ends.
	ConditionConflict = "Conflict"
	// ConditionDisruptionBudget is True while the rollout holds back
	// nodes whose restart would take a PodDisruptionBudget below what it
	// allows (spec.podDisruptionBudgets); its message names the budgets.
	// It is written each time the rollout picks nodes to assign.
	ConditionDisruptionBudget = "DisruptionBudget"
	// ConditionPreflight is the pre-flight check (spec.preflight): Unknown
	// while it waits for the nodes' answers, True when every asked node
	// passed, False when some did not (its message names them); absent for
	// a rollout that checked nothing.
	ConditionPreflight = "Preflight"
)

// ConfigRolloutStatus is what the rollout controller observed and did.
type ConfigRolloutStatus struct {
	// ObservedGeneration is the spec generation this status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is where the rollout stands.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Message says why it stands there.
	// +optional
	Message string `json:"message,omitempty"`
	// CurrentStep is the index of the step in progress (len(steps) once
	// completed).
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentStep int32 `json:"currentStep"`
	// StepStartedAt is when the current step started (pauses count from
	// it).
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`
	// LastReconcileTime is when the rollout controller last planned this
	// rollout (a heartbeat, refreshed at least every heartbeat interval,
	// default 1m, while the rollout has work left): an old one means no
	// controller runs it.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
	// ConfigMap is the ConfigMap's identity when the rollout started.
	// +optional
	ConfigMap *ConfigMapRef `json:"configMap,omitempty"`
	// Selected is how many nodes the selector matches.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Selected int32 `json:"selected"`
	// Assigned is how many nodes the rollout assigned (in any state but
	// Reverted and Gone).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Assigned int32 `json:"assigned"`
	// InTrial is how many assigned nodes have not yet promoted or failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InTrial int32 `json:"inTrial"`
	// Promoted is how many nodes report the config promoted.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Promoted int32 `json:"promoted"`
	// Failed is how many nodes failed or were skipped (reverted ones
	// included).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed"`
	// Reverting is how many nodes still carry this rollout's claim while
	// it puts them back on their previous source (undo, a halt with
	// revertOnHalt, a deletion while active).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Reverting int32 `json:"reverting,omitempty"`
	// Blocked is how many selected nodes another rollout claims (see the
	// Conflict condition): they are not assigned until it lets them go.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Blocked int32 `json:"blocked,omitempty"`
	// LostFailures counts failures whose record is no longer on a Node
	// (a record of an older controller, migrated away): they still count
	// in Failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LostFailures int32 `json:"lostFailures,omitempty"`
	// NotRunning is how many selected nodes carry no status of the
	// component at all (ComponentNotRunning): not assigned, not failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NotRunning int32 `json:"notRunning,omitempty"`
	// Preflight is the pre-flight check (spec.preflight); nil when none
	// ran.
	// +optional
	Preflight *PreflightStatus `json:"preflight,omitempty"`
	// NextWindow is when the next maintenance window opens, while the
	// rollout waits outside spec.windows.
	// +optional
	NextWindow *metav1.Time `json:"nextWindow,omitempty"`
	// Failures are some of the failed nodes, with their reasons: at most
	// MaxFailureRecords, by node name. Failed is the count; each failed
	// Node carries its reason in its claim annotation
	// (nodeapi.ClaimAnnotationFor).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Failures []NodeFailure `json:"failures,omitempty"`
	// Steps are the steps done so far, in order, with when they ended and
	// the counts then.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Steps []StepStatus `json:"steps,omitempty"`
	// PreviousSources are the previous assignments that the node records
	// of an older controller (status.nodes) point at. Read, never grown:
	// dropped once those records are migrated onto the Nodes.
	// +optional
	// +listType=atomic
	PreviousSources []corev1.NodeConfigSource `json:"previousSources,omitempty"`
	// Nodes are the per-node records of an older controller, read so that
	// what it changed can still be put back: each is moved onto its Node
	// as a claim annotation (nodeapi.Claim) and dropped from here. The
	// record of each node a rollout changes is on the Node, written in the
	// same patch as its assignment, so that this status does not grow with
	// the fleet.
	// +optional
	// +listType=atomic
	Nodes []NodeRecord `json:"nodes,omitempty"`
	// Conditions are Progressing, Halted and Conflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// History is what happened, oldest first, at most MaxHistory entries.
	// +optional
	// +listType=atomic
	History []HistoryEntry `json:"history,omitempty"`
}

// PreviousOf returns the assignment rec's node had before the rollout
// changed it (nil: none, the node ran its local config). ok is false when
// the record points outside PreviousSources: the record is damaged and
// nothing safe can be restored from it.
func (s *ConfigRolloutStatus) PreviousOf(rec *NodeRecord) (src *corev1.NodeConfigSource, ok bool) {
	switch {
	case rec.PreviousIndex != nil:
		i := int(*rec.PreviousIndex)
		if i < 0 || i >= len(s.PreviousSources) {
			return nil, false
		}
		return &s.PreviousSources[i], true
	case rec.Previous != nil:
		return rec.Previous, true
	}
	return nil, true
}

// CountsAsFailed reports whether the record counts against maxFailures: a
// node that failed or was skipped, also once it was reverted.
func (r *NodeRecord) CountsAsFailed() bool {
	return r.State == NodeFailed || r.State == NodeSkipped || r.FailedBeforeRevert
}

// StepTarget resolves a node step (RolloutStep.Nodes) against the number of
// selected nodes: a percentage rounds up, and the result is at most
// selected.
func StepTarget(v *intstr.IntOrString, selected int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, selected, true)
	if err != nil {
		return 0, err
	}
	return max(0, min(n, selected)), nil
}
