package nodeapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigPhase is where a component stands with its assigned config.
type ConfigPhase string

// The phases of ConfigStatus.
const (
	// PhaseLocal: nothing is assigned (or remote config is disabled); the
	// component runs its local config.
	PhaseLocal ConfigPhase = "Local"
	// PhaseTrial: the component runs the assigned config, which is not yet
	// last-known-good: it is in its trial period (or waits for health).
	PhaseTrial ConfigPhase = "Trial"
	// PhasePromoted: the component runs the assigned config and it is
	// last-known-good.
	PhasePromoted ConfigPhase = "Promoted"
	// PhaseRolledBack: the assigned config is bad or unusable (see Error);
	// the component runs its last-known-good config, or its local config.
	// This is a verdict on the config.
	PhaseRolledBack ConfigPhase = "RolledBack"
	// PhaseDeadEnd: the assigned config is bad and the rollback target
	// crash-loops too; the node needs a repair (see Error).
	PhaseDeadEnd ConfigPhase = "DeadEnd"
	// PhaseSyncFailed: the component could not find out what to run (it
	// could not read its assignment or the ConfigMap, e.g. the API server
	// answered an error or not at all) and runs its last-known-good until
	// it can. This is no verdict on the assigned config: the component
	// tries again, and a reader should wait rather than count it as bad.
	PhaseSyncFailed ConfigPhase = "SyncFailed"
	// PhaseNotApplied: the component could not apply the assigned config
	// here (see Error: e.g. the node could not be drained for it within
	// its drain timeout) and runs the config it ran before, which is not
	// marked bad. This is no verdict on the assigned config: the config
	// may be good on other nodes. The component does not try it again
	// until its assignment changes or its agent restarts. A reader from
	// before this phase does not know it and waits (the skew rule in
	// doc.go); the rollout planner counts such a node as not applied,
	// neither promoted nor failed.
	PhaseNotApplied ConfigPhase = "NotApplied"
)

// phases lists every phase this version knows, in the order errors name
// them.
var phases = []ConfigPhase{PhaseLocal, PhaseTrial, PhasePromoted, PhaseRolledBack, PhaseDeadEnd, PhaseSyncFailed, PhaseNotApplied}

// Bad reports whether the phase is a verdict that the assigned config is
// bad: RolledBack or DeadEnd. SyncFailed and NotApplied are not, nor is
// a phase this version does not know.
func (p ConfigPhase) Bad() bool { return p == PhaseRolledBack || p == PhaseDeadEnd }

// Known reports whether this version knows the phase. A phase it does not
// know was written by a newer component, and means "wait": it is no
// verdict (not Bad, not Promoted), as Trial is not.
func (p ConfigPhase) Known() bool { return slices.Contains(phases, p) }

// ConfigStatus is what a component publishes about its config, readable by
// any process that can read the Node: what the old Node.status.config
// carried (the assigned, active and last-known-good sources and an error)
// plus the trial phase. A nil source means the local config.
//
// It lives in a Node annotation (StatusAnnotationFor) rather than in
// Node.status.config because the API server drops status.config unless it
// is already set (the field belongs to the removed DynamicKubeletConfig
// feature) and because several components share one Node: each gets its own
// annotation. A component writes it in the same PATCH of the status
// subresource as its condition, so the two never disagree and a transition
// costs one write.
type ConfigStatus struct {
	// Assigned is the config the node is assigned (what the assignment
	// annotation names, resolved to a UID and resourceVersion).
	Assigned *corev1.NodeConfigSource `json:"assigned,omitempty"`
	// Active is the config the component runs.
	Active *corev1.NodeConfigSource `json:"active,omitempty"`
	// LastKnownGood is the config the component falls back to.
	LastKnownGood *corev1.NodeConfigSource `json:"lastKnownGood,omitempty"`
	// Error is the condition's reason while it is not True: why Active is
	// not Assigned, or why the assignment could not be read.
	Error string `json:"error,omitempty"`
	// Phase is where the component stands with Assigned.
	Phase ConfigPhase `json:"phase"`
	// TrialEnds is when Active, in PhaseTrial, completes its trial by
	// uptime (promotion may still wait for health).
	TrialEnds *metav1.Time `json:"trialEnds,omitempty"`
}

// Equal reports whether s and o say the same thing.
func (s *ConfigStatus) Equal(o *ConfigStatus) bool {
	if s == nil || o == nil {
		return s == o
	}
	return reflect.DeepEqual(normalize(s), normalize(o))
}

// normalize drops what JSON does not keep (sub-second times), so that a
// status read back from the Node equals the one written.
func normalize(s *ConfigStatus) ConfigStatus {
	c := *s
	if c.TrialEnds != nil {
		t := metav1.NewTime(c.TrialEnds.Rfc3339Copy().Time.UTC())
		c.TrialEnds = &t
	}
	return c
}

// MaxPhaseLength bounds a phase. Every phase, including those of later
// versions, is a CamelCase word of ASCII letters and digits of at most
// this many bytes, so that a reader can show one it does not know.
const MaxPhaseLength = 63

// Validate checks what a reader needs: a phase is set and has the form
// every phase has (MaxPhaseLength); one this version does not know is
// valid and means "wait" (ConfigPhase.Known); the sources are valid
// assignments.
func (s *ConfigStatus) Validate() error {
	if s.Phase == "" {
		return fmt.Errorf("phase: required (one of %s)", phaseList())
	}
	if !phaseForm(s.Phase) {
		return fmt.Errorf("phase %s: not a phase (1 to %d ASCII letters and digits; this version knows %s)", echo(string(s.Phase)), MaxPhaseLength, phaseList())
	}
	for _, f := range []struct {
		name string
		src  *corev1.NodeConfigSource
	}{{"assigned", s.Assigned}, {"active", s.Active}, {"lastKnownGood", s.LastKnownGood}} {
		if err := Validate(f.src); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

func phaseList() string {
	names := make([]string, len(phases))
	for i, p := range phases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// phaseForm reports whether p has the form of a phase (MaxPhaseLength).
func phaseForm(p ConfigPhase) bool {
	if len(p) > MaxPhaseLength {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// statusEnvelope is a ConfigStatus as decoded: with its formatVersion.
type statusEnvelope struct {
	ConfigStatus
	formatVersion
}

// ParseConfigStatus decodes an annotation value that any supported version
// of a component wrote (the skew rule in doc.go): field names match
// case-sensitively, a duplicate key and trailing data are errors, unknown
// fields are ignored, and a phase this version does not know is kept (it
// means "wait"). A missing phase, an invalid source and a formatVersion
// above FormatVersion (wrapping ErrNewerFormat) are errors.
func ParseConfigStatus(value string) (*ConfigStatus, error) {
	var e statusEnvelope
	if err := decodeLenient([]byte(value), &e); err != nil {
		return nil, fmt.Errorf("decoding the config status: %w", err)
	}
	if err := e.check(); err != nil {
		return nil, fmt.Errorf("config status: %w", err)
	}
	s := e.ConfigStatus
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("config status: %w", err)
	}
	return &s, nil
}

// ReadConfigStatus returns the ConfigStatus a component published on node,
// or nil and no error when it published none. The error names the node and
// the annotation.
func ReadConfigStatus(node *corev1.Node, component string) (*ConfigStatus, error) {
	key := StatusAnnotationFor(component)
	v, ok := node.Annotations[key]
	if !ok {
		return nil, nil
	}
	s, err := ParseConfigStatus(v)
	if err != nil {
		return nil, fmt.Errorf("node %q annotation %s: %w", node.Name, key, err)
	}
	return s, nil
}

// MarshalAnnotation encodes s as an annotation value, in format version 1
// (no formatVersion field). A writer writes only the phases it knows: an
// unknown or missing phase is an error.
func (s *ConfigStatus) MarshalAnnotation() (string, error) {
	if !s.Phase.Known() {
		return "", fmt.Errorf("encoding the config status: phase %s: not one of %s", echo(string(s.Phase)), phaseList())
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encoding the config status: %w", err)
	}
	return string(b), nil
}
