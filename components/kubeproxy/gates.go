package kubeproxy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

//go:generate sh -c "cd ../../test && go run ./conformance/kubeletgates/generate -component kube-proxy -o ../components/kubeproxy/zz_generated_gates.go"

// gateSpec is what kube-proxy 1.37 does with a feature gate the
// configuration does not mention (knownGates, zz_generated_gates.go).
type gateSpec struct {
	enabled bool
	// locked gates cannot be set to anything but their default.
	locked bool
	stage  gateStage
}

// gateStage is a gate's maturity at Kubernetes 1.37.
type gateStage uint8

const (
	stageGA gateStage = iota
	stageAlpha
	stageBeta
	stageDeprecated
	// stagePreAlpha gates are registered but not available in 1.37:
	// kube-proxy refuses a configuration that sets one.
	stagePreAlpha
)

// The special gates that set every alpha (beta) gate the map leaves unset.
const (
	gateAllAlpha = "AllAlpha"
	gateAllBeta  = "AllBeta"
)

// gateOn reports whether the named gate is on with the configuration's
// featureGates m, as component-base resolves it: a locked or not yet
// available gate is at its default, else the map's own setting, else
// AllAlpha or AllBeta for a gate of that stage, else the default.
func gateOn(m map[string]bool, name string) bool {
	spec := knownGates[name]
	if spec.locked || spec.stage == stagePreAlpha {
		return spec.enabled
	}
	if v, ok := m[name]; ok {
		return v
	}
	switch spec.stage {
	case stageAlpha:
		if v, ok := m[gateAllAlpha]; ok {
			return v
		}
	case stageBeta:
		if v, ok := m[gateAllBeta]; ok {
			return v
		}
	}
	return spec.enabled
}

// validateFeatureGates checks featureGates as kube-proxy does when it sets
// its gates from the configuration (SetFromMap, in Options.Complete and in
// its Validate): every name must be a gate kube-proxy 1.37 registers, a
// locked gate may only be set to its value, a gate not yet available may
// not be set; and when all of that holds, every enabled gate must have the
// gates it depends on enabled too.
func validateFeatureGates(errs field.ErrorList, m map[string]bool) field.ErrorList {
	if len(m) == 0 {
		return errs // the defaults satisfy every dependency
	}
	path := field.NewPath("featureGates")
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names) // map order is random; errors must not be
	n := len(errs)
	for _, name := range names {
		spec, known := knownGates[name]
		switch {
		case !known:
			msg := "not a feature gate of kube-proxy " + release
			if alt := gateNameFold(name); alt != "" {
				msg += fmt.Sprintf(" (gate names are case-sensitive: did you mean %s?)", alt)
			}
			errs = append(errs, field.Invalid(path.Key(name), name, msg))
		case spec.locked && m[name] != spec.enabled:
			errs = append(errs, field.Forbidden(path.Key(name), fmt.Sprintf("feature gate %s is locked to %t", name, spec.enabled)))
		case spec.stage == stagePreAlpha:
			errs = append(errs, field.Forbidden(path.Key(name), fmt.Sprintf("feature gate %s is not available in kube-proxy %s", name, release)))
		}
	}
	if len(errs) > n {
		return errs
	}
	dependents := make([]string, 0, len(gateDependencies))
	for name := range gateDependencies {
		dependents = append(dependents, name)
	}
	slices.Sort(dependents)
	for _, name := range dependents {
		if !gateOn(m, name) {
			continue
		}
		var off []string
		for _, dep := range gateDependencies[name] {
			if !gateOn(m, dep) {
				off = append(off, dep)
			}
		}
		if len(off) == 0 {
			continue
		}
		// Name the gate the configuration set that causes the conflict.
		at := path
		for _, cand := range append(append([]string{name}, off...), gateAllAlpha, gateAllBeta) {
			if _, set := m[cand]; set {
				at = path.Key(cand)
				break
			}
		}
		errs = append(errs, field.Invalid(at, m[name], fmt.Sprintf("feature gate %s is enabled but depends on %s, which the configuration disables", name, strings.Join(off, ", "))))
	}
	return errs
}

// gateNameFold returns the known gate whose name equals name but for case,
// or "".
func gateNameFold(name string) string {
	for known := range knownGates {
		if strings.EqualFold(known, name) {
			return known
		}
	}
	return ""
}
