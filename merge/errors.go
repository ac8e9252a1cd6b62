package merge

import (
	"errors"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ProblemType classifies a Problem found in one document.
type ProblemType string

// The kinds of problems a document can have.
const (
	// ProblemSyntax: the bytes are not a YAML or JSON object.
	ProblemSyntax ProblemType = "Syntax"
	// ProblemEmpty: the document has no content at all.
	ProblemEmpty ProblemType = "Empty"
	// ProblemUnknownField: a key that the configuration type does not have.
	ProblemUnknownField ProblemType = "UnknownField"
	// ProblemDuplicateField: the same key twice in one object.
	ProblemDuplicateField ProblemType = "DuplicateField"
	// ProblemWrongType: a value of the wrong JSON type (a string for a number...).
	ProblemWrongType ProblemType = "WrongType"
	// ProblemInvalidValue: a value of the right JSON type that its Go type
	// rejects (out of range, or refused by a custom decoder such as a duration).
	ProblemInvalidValue ProblemType = "InvalidValue"
	// ProblemTypeMeta: apiVersion or kind missing or not the profile's, or
	// not the same as the shared document's.
	ProblemTypeMeta ProblemType = "TypeMeta"
	// ProblemDirective: a strategic merge directive ($patch...) that is
	// malformed or not allowed where it appears.
	ProblemDirective ProblemType = "Directive"
	// ProblemMerge: two layers cannot be merged at this path.
	ProblemMerge ProblemType = "Merge"
	// ProblemPath: an override's field path that the type does not have.
	ProblemPath ProblemType = "Path"
)

// Problem is one thing wrong with one document.
type Problem struct {
	Type ProblemType
	// Path is the field path where the problem is, in the notation of
	// k8s.io/apimachinery's field.Path ("authentication.x509",
	// "tlsCipherSuites[2]", "evictionHard[memory.available]"); empty for the
	// document itself. For UnknownField and DuplicateField it is the path of
	// the enclosing object, and Field is the offending key.
	Path   string
	Field  string
	Detail string
}

// String renders the problem without the document name, for example
// `authentication.x509: unknown field "clientCAFle"`.
func (p Problem) String() string {
	var b strings.Builder
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	switch p.Type {
	case ProblemUnknownField:
		b.WriteString("unknown field ")
		b.WriteString(strconv.Quote(p.Field))
	case ProblemDuplicateField:
		b.WriteString("duplicate field")
		if p.Field != "" {
			b.WriteString(" ")
			b.WriteString(strconv.Quote(p.Field))
		}
	}
	if p.Detail != "" {
		if p.Type == ProblemUnknownField || p.Type == ProblemDuplicateField {
			b.WriteString(": ")
		}
		b.WriteString(p.Detail)
	}
	return b.String()
}

// DecodeError lists every problem found in one document. Its message has one
// line per problem, each starting with the document name.
type DecodeError struct {
	// Document names the document: a file path, or something like
	// "configmap kube-system/kubelet-config key kubelet".
	Document string
	Problems []Problem
}

// Error implements error.
func (e *DecodeError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = e.Document + ": " + p.String()
	}
	return strings.Join(lines, "\n")
}

// PolicyError reports a layer that set a field the platform owns.
type PolicyError struct {
	// Document is the layer that set the field.
	Document string
	// Path is the field path of the owned field.
	Path string
	// Owner is Policy.Owner.
	Owner string
	// Locked is true for a locked field and false for a platform value with
	// the ErrorIfBoth rule.
	Locked bool
}

// Error implements error.
func (e *PolicyError) Error() string {
	if e.Locked {
		return e.Document + ": " + e.Path + ": field is managed by the platform (owner: " + strconv.Quote(e.Owner) + ")"
	}
	return e.Document + ": " + e.Path + ": field is also set by the platform (owner: " + strconv.Quote(e.Owner) + "); set it in one place only"
}

// ValidationError carries the profile's validation errors for the merged,
// defaulted configuration.
type ValidationError struct {
	// Document is "merged config".
	Document string
	Errors   field.ErrorList
	// Provenance is the layer that set each field, used to say where a
	// rejected value came from.
	Provenance map[string]string
}

// Error implements error: one line per field error, each naming the layer
// that set the field when that is known.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		line := e.Document + ": " + fe.Error()
		if layer, ok := e.Provenance[fe.Field]; ok {
			line += " (set by " + layer + ")"
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the field errors.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		errs[i] = fe
	}
	return errs
}

// Error is what Pipeline.Merge returns when anything is wrong: every decode
// problem of every layer, then policy violations, then validation errors of
// the merged configuration. errors.As finds the parts.
type Error struct {
	Decode     []*DecodeError
	Policy     []*PolicyError
	Validation *ValidationError
}

// Error implements error.
func (e *Error) Error() string {
	var parts []string
	for _, d := range e.Decode {
		parts = append(parts, d.Error())
	}
	for _, p := range e.Policy {
		parts = append(parts, p.Error())
	}
	if e.Validation != nil {
		parts = append(parts, e.Validation.Error())
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the parts.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, d := range e.Decode {
		errs = append(errs, d)
	}
	for _, p := range e.Policy {
		errs = append(errs, p)
	}
	if e.Validation != nil {
		errs = append(errs, e.Validation)
	}
	return errs
}

func (e *Error) empty() bool {
	return len(e.Decode) == 0 && len(e.Policy) == 0 && e.Validation == nil
}

// ProvenanceOf returns which layer set each field of a Merge whose result
// and error are res and err: the result's Provenance, or, when the layers
// decoded and merged but the merged document did not validate, the
// provenance the validation error carries. ok is false when the layers
// did not get that far (a decode error, or any other failure).
func ProvenanceOf[T any](res *Result[T], err error) (prov map[string]string, ok bool) {
	if err == nil {
		return res.Provenance, true
	}
	var me *Error
	if errors.As(err, &me) && len(me.Decode) == 0 && me.Validation != nil {
		return me.Validation.Provenance, true
	}
	return nil, false
}
