package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ClaimAnnotation is the kubelet's claim annotation: the ConfigRollout that
// changed the Node's assignment, and what to put back (a Claim in JSON).
// A rollout writes it in the same PATCH as the assignment, so that a Node
// never carries a rollout's assignment without its revert record. Its name
// starts with AssignmentAnnotation on purpose: the admission policy that
// keeps nodes (and the nodes/status subresource) from changing any
// "dynconfig.io/config-source*" annotation (deploy/admission-policy.yaml)
// guards it too, so that a node cannot rewrite what a revert will assign
// it, nor drop its claim to escape a revert. It is not an assignment: the
// node side reads only AssignmentAnnotationFor's names.
const ClaimAnnotation = "dynconfig.io/config-source-rollout"

// ClaimAnnotationFor returns a component's claim annotation:
// ClaimAnnotation for the kubelet (or an empty name), else ClaimAnnotation
// + "." + component.
func ClaimAnnotationFor(component string) string {
	return perComponent(ClaimAnnotation, component)
}

// MaxClaimReason bounds Claim.Failed, so that a component's long error
// cannot make the annotation outgrow the Node's annotation budget.
const MaxClaimReason = 1024

// Claim is a rollout's record of one Node it changed, kept on the Node: who
// holds the Node, what it had before and how its trial went.
type Claim struct {
	// Namespace, Name and UID identify the ConfigRollout.
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Previous is the assignment the Node had before the rollout changed
	// it (what a revert restores); nil: none, the component ran its local
	// config.
	Previous *corev1.NodeConfigSource `json:"previous,omitempty"`
	// AssignedAt is when the rollout assigned the Node.
	AssignedAt metav1.Time `json:"assignedAt"`
	// Step is the index of the step that assigned it.
	Step int32 `json:"step"`
	// Failed is why the Node failed the rollout (its component's error, a
	// deadline); empty while it did not.
	Failed string `json:"failed,omitempty"`
	// PreviousClaim is the claim this one replaced: the claim of an
	// earlier rollout that had ended, and still exists, when this one
	// took the Node. A revert restores it with Previous, so that the
	// earlier rollout still holds the Node it had moved (an undo of it
	// puts the Node back). nil: none. It nests at most MaxPreviousClaims
	// deep; EncodeClaim and DecodeClaim drop the oldest beyond.
	PreviousClaim *Claim `json:"previousClaim,omitempty"`
	// Passed is when the rollout's health gates (spec.analysis) passed the
	// Node: its component reported the config promoted, its soak was over
	// and a verdict of every gate taken after it passed. Like Failed, it is
	// final while the rollout is active: the Node counts as promoted and is
	// not checked again. Nil while it did not pass (always, for a rollout
	// without spec.analysis).
	Passed *metav1.Time `json:"passed,omitempty"`
	// HoldUntil, set by a rollout with health gates, asks the Node's
	// component not to make the config its last-known-good before the
	// gates passed it (Passed), nor before HoldUntil when they never say:
	// a config the fleet rejects must never become the node's fallback.
	// PromotionHeld applies it. Nil: no hold (a rollout without gates).
	HoldUntil *metav1.Time `json:"holdUntil,omitempty"`
	// Gates is what the rollout's health gates remember of the Node (its
	// soak start, its pod baseline), so that a new controller carries on
	// (GateMemory). Nil: nothing (a rollout without spec.analysis, or a
	// controller from before the field). A claim kept as PreviousClaim
	// has none: its rollout ended, and its gates with it.
	Gates *GateMemory `json:"gates,omitempty"`
}

// PromotionHeld reports whether the claim holds the promotion of the
// config its rollout assigned, at now: it asks for a hold (HoldUntil), the
// gates neither passed nor failed the Node yet, and HoldUntil is not
// reached. A failed Node is being put back: holding it changes nothing.
func (c *Claim) PromotionHeld(now time.Time) bool {
	return c != nil && c.HoldUntil != nil && c.Passed == nil && c.Failed == "" && now.Before(c.HoldUntil.Time)
}

// MaxPreviousClaims bounds how many claims a Claim carries in its
// PreviousClaim chain, so that rollouts taking a Node over one after
// another cannot grow its annotation without end. A revert restores the
// claim before; what a fourth revert in a row would have restored is gone.
const MaxPreviousClaims = 3

// Holder names the claiming rollout as "namespace/name".
func (c *Claim) Holder() string { return c.Namespace + "/" + c.Name }

// Validate checks a claim: namespace and name are a ConfigRollout's
// (DNS-1123), uid is set, assignedAt is set, previous is a valid
// assignment, failed is at most MaxClaimReason bytes of UTF-8 and step is
// not negative.
func (c *Claim) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %s: %v", echo(c.Namespace), msgs))
	}
	if msgs := validation.IsDNS1123Subdomain(c.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %s: %v", echo(c.Name), msgs))
	}
	if c.UID == "" {
		errs = append(errs, errors.New("uid: required"))
	}
	if c.AssignedAt.IsZero() {
		errs = append(errs, errors.New("assignedAt: required"))
	}
	if c.Step < 0 {
		errs = append(errs, fmt.Errorf("step: must not be negative, got %d", c.Step))
	}
	if len(c.Failed) > MaxClaimReason {
		errs = append(errs, fmt.Errorf("failed: at most %d bytes, got %d", MaxClaimReason, len(c.Failed)))
	}
	if !utf8.ValidString(c.Failed) {
		errs = append(errs, errors.New("failed: not UTF-8"))
	}
	if err := Validate(c.Previous); err != nil {
		errs = append(errs, fmt.Errorf("previous: %w", err))
	}
	if c.Gates != nil {
		if err := c.Gates.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("gates: %w", err))
		}
	}
	if c.PreviousClaim != nil {
		if err := c.PreviousClaim.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("previousClaim: %w", err))
		}
	}
	return errors.Join(errs...)
}

// trimPrevious returns c with its PreviousClaim chain cut to
// MaxPreviousClaims, and without the Gates of the claims in it (copies
// where it changes; c is not modified).
func trimPrevious(c *Claim) *Claim {
	depth, p, gates := 0, c.PreviousClaim, false
	for p != nil && depth < MaxPreviousClaims {
		gates = gates || p.Gates != nil
		depth, p = depth+1, p.PreviousClaim
	}
	if p == nil && !gates {
		return c
	}
	var cut func(c *Claim, left int) *Claim
	cut = func(c *Claim, left int) *Claim {
		cc := *c
		if left < MaxPreviousClaims {
			cc.Gates = nil
		}
		if left == 0 || cc.PreviousClaim == nil {
			cc.PreviousClaim = nil
		} else {
			cc.PreviousClaim = cut(c.PreviousClaim, left-1)
		}
		return &cc
	}
	return cut(c, MaxPreviousClaims)
}

// claimEnvelope is a Claim as decoded: with its formatVersion.
type claimEnvelope struct {
	Claim
	formatVersion
}

// DecodeClaim decodes a claim annotation value that any supported version
// of the rollout controller wrote (the skew rule in doc.go): field names
// match case-sensitively, a duplicate key and trailing data are errors,
// unknown fields are ignored; a formatVersion above FormatVersion is an
// error wrapping ErrNewerFormat. The claim is validated, and its
// PreviousClaim chain cut to MaxPreviousClaims. A blank value or "null" is
// no claim: nil and no error.
func DecodeClaim(value string) (*Claim, error) {
	var e claimEnvelope
	if ok, err := decodeVersioned(value, "rollout claim", &e); !ok {
		return nil, err
	}
	c := trimPrevious(&e.Claim)
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid rollout claim: %w", err)
	}
	return c, nil
}

// ReadClaim returns the claim a Node carries for a component (nil when
// none); an error names the annotation and the Node.
func ReadClaim(node *corev1.Node, component string) (*Claim, error) {
	key := ClaimAnnotationFor(component)
	v, ok := node.Annotations[key]
	if !ok {
		return nil, nil
	}
	c, err := DecodeClaim(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s of Node %s: %w", key, node.Name, err)
	}
	return c, nil
}

// EncodeClaim encodes a valid claim as an annotation value, in format
// version 1 (no formatVersion field); a Failed reason longer than
// MaxClaimReason is cut to fit (in the previous claims too), and the
// PreviousClaim chain to MaxPreviousClaims.
func EncodeClaim(c *Claim) (string, error) {
	cc := *cutReasons(trimPrevious(c))
	if err := cc.Validate(); err != nil {
		return "", fmt.Errorf("rollout claim: %w", err)
	}
	b, err := json.Marshal(&cc)
	if err != nil {
		return "", fmt.Errorf("encoding the rollout claim: %w", err)
	}
	return string(b), nil
}

// cutReasons returns c with every Failed reason of its chain cut to
// MaxClaimReason (copies; c is not modified).
func cutReasons(c *Claim) *Claim {
	cc := *c
	if len(cc.Failed) > MaxClaimReason {
		cut := MaxClaimReason - len("...")
		for cut > 0 && !utf8.RuneStart(cc.Failed[cut]) {
			cut--
		}
		cc.Failed = cc.Failed[:cut] + "..."
	}
	if cc.PreviousClaim != nil {
		cc.PreviousClaim = cutReasons(cc.PreviousClaim)
	}
	return &cc
}
