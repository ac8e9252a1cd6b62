package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The pre-flight check: before any node applies a rollout's config, the
// rollout asks each selected node to check it against the node's own
// layers (its instance config, the drop-ins that sort after dynconfig's,
// the fields the platform locks, a writable state dir), and each node
// answers in its ConfigStatus (ConfigStatus.Preflight). The ask is one
// annotation the rollout controller writes on the Node
// (PreflightAnnotationFor), the same value on every node: one write per
// node. The node answers without applying anything: the candidate is not
// checkpointed, not made current, and nothing restarts.
//
// Both are under the skew rule (doc.go): an agent older than this field
// never answers (the rollout's timeout decides what that means, see
// spec.preflight of the ConfigRollout), and a reader of either value ignores
// fields it does not know; a verdict it does not know is no answer yet.

// PreflightAnnotation is the kubelet's pre-flight request annotation (a
// PreflightRequest in JSON). Its name starts with AssignmentAnnotation on
// purpose, as ClaimAnnotation's does: the admission policy that keeps
// nodes from changing "dynconfig.io/config-source*" annotations
// (deploy/admission-policy.yaml) guards it, so that a node cannot ask
// itself about another config. It is not an assignment: the node side
// reads only AssignmentAnnotationFor's names as assignments.
const PreflightAnnotation = "dynconfig.io/config-source-preflight"

// PreflightAnnotationFor returns a component's pre-flight request
// annotation: PreflightAnnotation for the kubelet (or an empty name), else
// PreflightAnnotation + "." + component.
func PreflightAnnotationFor(component string) string {
	return perComponent(PreflightAnnotation, component)
}

// PreflightRequest is a rollout's ask, kept on a Node, that the node's
// component check a candidate config against its own layers and answer in
// its ConfigStatus (Preflight). A node answers the request it finds, for as
// long as it is there (a later request replaces it).
type PreflightRequest struct {
	// Namespace, Name and UID identify the ConfigRollout that asks.
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Candidate is the config to check: a ConfigMap with its uid and the
	// resourceVersion the rollout pinned, and its payload key. The node
	// echoes it in its answer (PreflightResult.Candidate).
	Candidate *corev1.NodeConfigSource `json:"candidate"`
}

// Holder names the asking rollout as "namespace/name".
func (r *PreflightRequest) Holder() string { return r.Namespace + "/" + r.Name }

// Validate checks a request: namespace and name are a ConfigRollout's
// (DNS-1123), uid is set, candidate is a valid assignment with a
// resourceVersion.
func (r *PreflightRequest) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(r.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %s: %v", echo(r.Namespace), msgs))
	}
	if msgs := validation.IsDNS1123Subdomain(r.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %s: %v", echo(r.Name), msgs))
	}
	if r.UID == "" {
		errs = append(errs, errors.New("uid: required"))
	}
	switch {
	case r.Candidate == nil:
		errs = append(errs, errors.New("candidate: required"))
	case Validate(r.Candidate) != nil:
		errs = append(errs, fmt.Errorf("candidate: %w", Validate(r.Candidate)))
	case r.Candidate.ConfigMap.ResourceVersion == "":
		errs = append(errs, errors.New("candidate: configMap.resourceVersion: required"))
	}
	return errors.Join(errs...)
}

// preflightRequestEnvelope is a PreflightRequest as decoded: with its
// formatVersion.
type preflightRequestEnvelope struct {
	PreflightRequest
	formatVersion
}

// DecodePreflightRequest decodes a pre-flight request annotation value that
// any supported version of the rollout controller wrote, with the rules of
// DecodeClaim: names match case-sensitively, a duplicate key and trailing
// data are errors, unknown fields are ignored, a formatVersion above
// FormatVersion wraps ErrNewerFormat. The request is validated. A blank
// value or "null" is no request: nil and no error.
func DecodePreflightRequest(value string) (*PreflightRequest, error) {
	var e preflightRequestEnvelope
	if ok, err := decodeVersioned(value, "pre-flight request", &e); !ok {
		return nil, err
	}
	r := e.PreflightRequest
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("invalid pre-flight request: %w", err)
	}
	return &r, nil
}

// ReadPreflightRequest returns the pre-flight request a Node carries for a
// component (nil when none); an error names the annotation and the Node.
func ReadPreflightRequest(node *corev1.Node, component string) (*PreflightRequest, error) {
	key := PreflightAnnotationFor(component)
	v, ok := node.Annotations[key]
	if !ok {
		return nil, nil
	}
	r, err := DecodePreflightRequest(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s of Node %s: %w", key, node.Name, err)
	}
	return r, nil
}

// EncodePreflightRequest encodes a valid request as an annotation value,
// in format version 1 (no formatVersion field).
func EncodePreflightRequest(r *PreflightRequest) (string, error) {
	if err := r.Validate(); err != nil {
		return "", fmt.Errorf("pre-flight request: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding the pre-flight request: %w", err)
	}
	return string(b), nil
}

// PreflightVerdict is a node's answer to a pre-flight request.
type PreflightVerdict string

// The verdicts of PreflightResult.
const (
	// PreflightPass: the candidate builds with the node's layers (strict
	// decode, the platform's policy, validation), no other layer sets a
	// field of it again, and the state dir is writable.
	PreflightPass PreflightVerdict = "Pass"
	// PreflightOverridden: the candidate builds, but another layer of the
	// node (a drop-in that sorts after dynconfig's, the instance config, a
	// flag) sets some of its fields again, so the node would run its own
	// values for them (Fields) while reporting the config promoted.
	PreflightOverridden PreflightVerdict = "Overridden"
	// PreflightFail: the node could not run the candidate (Message says
	// why: a decode or validation error, a locked field it sets, a state
	// dir it cannot write).
	PreflightFail PreflightVerdict = "Fail"
)

// verdicts lists every verdict this version knows.
var verdicts = []PreflightVerdict{PreflightPass, PreflightOverridden, PreflightFail}

// Known reports whether this version knows the verdict. One it does not
// know was written by a newer component, and is no answer yet ("wait"),
// as an unknown phase is.
func (v PreflightVerdict) Known() bool { return slices.Contains(verdicts, v) }

// MaxPreflightFields bounds PreflightResult.Fields; MaxPreflightField
// bounds each entry. The encoder cuts longer lists, saying how many more
// there were in the last entry.
const (
	MaxPreflightFields = 16
	MaxPreflightField  = 512
)

// PreflightResult is a node's answer to a pre-flight request, published
// in its ConfigStatus (ConfigStatus.Preflight) for as long as the request
// is on the Node.
type PreflightResult struct {
	// Candidate is the request's candidate, as the request named it: the
	// answer is for that config only (Answers).
	Candidate *corev1.NodeConfigSource `json:"candidate,omitempty"`
	// Verdict is the answer.
	Verdict PreflightVerdict `json:"verdict"`
	// Fields, for Overridden, are the candidate's fields that another
	// layer sets again, each "path (by LAYER)", sorted; at most
	// MaxPreflightFields.
	Fields []string `json:"fields,omitempty"`
	// Message, for Fail, says why (at most MaxClaimReason bytes).
	Message string `json:"message,omitempty"`
}

// Answers reports whether r is a known verdict on candidate: the same
// ConfigMap (namespace, name, uid), resourceVersion and payload key.
func (r *PreflightResult) Answers(candidate *corev1.NodeConfigSource) bool {
	if r == nil || !r.Verdict.Known() || r.Candidate == nil || r.Candidate.ConfigMap == nil || candidate == nil || candidate.ConfigMap == nil {
		return false
	}
	return *r.Candidate.ConfigMap == *candidate.ConfigMap
}

// Describe says what r says, for a rollout's status: the verdict, and the
// fields or the message.
func (r *PreflightResult) Describe() string {
	switch {
	case r.Verdict == PreflightOverridden && len(r.Fields) > 0:
		return fmt.Sprintf("%s: %s", r.Verdict, strings.Join(r.Fields, ", "))
	case r.Message != "":
		return fmt.Sprintf("%s: %s", r.Verdict, r.Message)
	}
	return string(r.Verdict)
}

// validate checks what a reader needs of a result: a verdict of the form
// of a phase (MaxPhaseLength; one this version does not know is kept and
// is no answer), a valid candidate when set, bounded fields and message.
func (r *PreflightResult) validate() error {
	var errs []error
	if r.Verdict == "" || !phaseForm(ConfigPhase(r.Verdict)) {
		errs = append(errs, fmt.Errorf("verdict %s: not a verdict (1 to %d ASCII letters and digits)", echo(string(r.Verdict)), MaxPhaseLength))
	}
	if err := Validate(r.Candidate); err != nil {
		errs = append(errs, fmt.Errorf("candidate: %w", err))
	}
	if len(r.Fields) > MaxPreflightFields {
		errs = append(errs, fmt.Errorf("fields: at most %d, got %d", MaxPreflightFields, len(r.Fields)))
	}
	for i, f := range r.Fields {
		if len(f) > MaxPreflightField || !utf8.ValidString(f) {
			errs = append(errs, fmt.Errorf("fields[%d]: at most %d bytes of UTF-8", i, MaxPreflightField))
			break
		}
	}
	if len(r.Message) > MaxClaimReason || !utf8.ValidString(r.Message) {
		errs = append(errs, fmt.Errorf("message: at most %d bytes of UTF-8, got %d bytes", MaxClaimReason, len(r.Message)))
	}
	return errors.Join(errs...)
}

// boundPreflight returns r with its fields and message cut to the bounds
// (a copy; r is not modified); nil stays nil.
func boundPreflight(r *PreflightResult) *PreflightResult {
	if r == nil {
		return nil
	}
	c := *r
	c.Fields = nil
	for i, f := range r.Fields {
		if i == MaxPreflightFields-1 && len(r.Fields) > MaxPreflightFields {
			c.Fields = append(c.Fields, fmt.Sprintf("and %d more", len(r.Fields)-i))
			break
		}
		c.Fields = append(c.Fields, cutUTF8(f, MaxPreflightField))
	}
	c.Message = cutUTF8(c.Message, MaxClaimReason)
	return &c
}

// cutUTF8 cuts s to at most max bytes at a rune boundary, ending in "..."
// when cut; invalid UTF-8 is replaced.
func cutUTF8(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
