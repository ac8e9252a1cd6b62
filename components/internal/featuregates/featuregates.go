package featuregates

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Spec is what a component of Kubernetes 1.37 does with a feature gate that
// the configuration does not mention.
type Spec struct {
	// Default is the gate's value when nothing sets it.
	Default bool
	// Locked gates cannot be set to anything but their default: the
	// component refuses to start when a configuration tries.
	Locked bool
	// Stage is the gate's maturity: AllAlpha and AllBeta set every alpha
	// (beta) gate the configuration does not set itself.
	Stage Stage
}

// Stage is a feature gate's maturity at Kubernetes 1.37.
type Stage uint8

// The stages. The zero Stage is GA, which is also what Lookup reports for
// a name it does not know.
const (
	GA Stage = iota
	Alpha
	Beta
	Deprecated
	// PreAlpha gates are registered but not available in 1.37: the
	// component refuses a configuration that sets one.
	PreAlpha
)

// The special gates that set every alpha or beta gate a configuration does
// not set itself.
const (
	AllAlpha = "AllAlpha"
	AllBeta  = "AllBeta"
)

// Gates that both profiles read: the component-base logging gates, which
// allow the alpha and beta logging options.
const (
	LoggingAlphaOptions = "LoggingAlphaOptions"
	LoggingBetaOptions  = "LoggingBetaOptions"
)

// Lookup returns the spec of the named gate at 1.37; known is false for a
// name neither component registers.
func Lookup(name string) (spec Spec, known bool) {
	spec, known = v137.specs[name]
	return spec, known
}

// Dependents returns, sorted, the gates that may only be enabled while the
// named gate is.
func Dependents(name string) []string {
	var out []string
	for _, dependent := range v137.dependents() {
		if slices.Contains(v137.deps[dependent], name) {
			out = append(out, dependent)
		}
	}
	return out
}

// Gates is the featureGates map of a configuration: the gates it sets, over
// the 1.37 defaults. A nil Gates sets none.
type Gates map[string]bool

// Enabled reports whether the named gate is on: the configuration's own
// setting, else AllAlpha or AllBeta for an alpha or beta gate when the
// configuration sets those, else the 1.37 default. A locked gate is always
// at its default, and a gate not available in 1.37 always off: Validate
// reports an attempt to change either once, on featureGates, and the rules
// a gate governs then judge their fields by the gate's real value. A name
// the table lacks is on only when the configuration sets it on.
func (g Gates) Enabled(name string) bool { return v137.enabled(g, name) }

// Wording is how a component names itself in the errors of Validate, so that
// each profile keeps its own component's words.
type Wording struct {
	// Component ends the error for an unknown name, "not a feature gate of
	// <Component>": "kube-proxy 1.37".
	Component string
	// Release ends the error for a gate not yet available, "feature gate X
	// is not available in <Release>": "Kubernetes 1.37".
	Release string
}

// Validate appends to errs the problems of g as the component finds them
// when it sets its gates from the configuration, and returns the result:
// every name must be a gate of 1.37, a locked gate may only be set to its
// default, and a gate not yet available in 1.37 may not be set (one error
// each, at featureGates[name], in name order). Only when all of that holds,
// every enabled gate must have the gates it depends on enabled: one error per
// such gate, in name order, at the gate the configuration sets that causes
// the conflict (the gate itself, else the first dependency it turns off,
// else AllAlpha, else AllBeta), else at featureGates.
func (g Gates) Validate(errs field.ErrorList, w Wording) field.ErrorList {
	return v137.validate(g, errs, w)
}

// table is a gate table: the generated one (v137), or a small one a test
// makes.
type table struct {
	specs map[string]Spec
	// deps lists, for each gate that has them, the gates that must be
	// enabled when it is.
	deps map[string][]string
	// dependents returns the keys of deps, sorted.
	dependents func() []string
}

// v137 is the table of the gates the kubelet and kube-proxy of 1.37
// register.
var v137 = newTable(knownGates, gateDependencies)

func newTable(specs map[string]Spec, deps map[string][]string) *table {
	return &table{specs: specs, deps: deps, dependents: sync.OnceValue(func() []string { return slices.Sorted(maps.Keys(deps)) })}
}

func (t *table) enabled(g Gates, name string) bool {
	spec := t.specs[name]
	if spec.Locked || spec.Stage == PreAlpha {
		return spec.Default
	}
	if v, ok := g[name]; ok {
		return v
	}
	switch spec.Stage {
	case Alpha:
		if v, ok := g[AllAlpha]; ok {
			return v
		}
	case Beta:
		if v, ok := g[AllBeta]; ok {
			return v
		}
	}
	return spec.Default
}

func (t *table) validate(g Gates, errs field.ErrorList, w Wording) field.ErrorList {
	if len(g) == 0 {
		return errs // the defaults satisfy every dependency
	}
	path := field.NewPath("featureGates")
	n := len(errs)
	// Map order is random; the order of the errors must not be.
	names := slices.AppendSeq(make([]string, 0, len(g)), maps.Keys(g))
	slices.Sort(names)
	for _, name := range names {
		spec, known := t.specs[name]
		switch {
		case !known:
			msg := "not a feature gate of " + w.Component
			if alt := t.nameFold(name); alt != "" {
				msg += fmt.Sprintf(" (gate names are case-sensitive: did you mean %s?)", alt)
			}
			errs = append(errs, field.Invalid(path.Key(name), name, msg))
		case spec.Locked && g[name] != spec.Default:
			errs = append(errs, field.Forbidden(path.Key(name), fmt.Sprintf("feature gate %s is locked to %t", name, spec.Default)))
		case spec.Stage == PreAlpha:
			errs = append(errs, field.Forbidden(path.Key(name), fmt.Sprintf("feature gate %s is not available in %s", name, w.Release)))
		}
	}
	if len(errs) > n {
		return errs
	}
	for _, name := range t.dependents() {
		if !t.enabled(g, name) {
			continue
		}
		var off []string
		for _, dep := range t.deps[name] {
			if !t.enabled(g, dep) {
				off = append(off, dep)
			}
		}
		if len(off) == 0 {
			continue
		}
		at := path
		for _, cand := range append(append([]string{name}, off...), AllAlpha, AllBeta) {
			if _, set := g[cand]; set {
				at = path.Key(cand)
				break
			}
		}
		errs = append(errs, field.Invalid(at, g[name], fmt.Sprintf("feature gate %s is enabled but depends on %s, which the configuration disables", name, strings.Join(off, ", "))))
	}
	return errs
}

// nameFold returns the gate whose name equals name but for case, or "".
func (t *table) nameFold(name string) string {
	for known := range t.specs {
		if strings.EqualFold(known, name) {
			return known
		}
	}
	return ""
}
