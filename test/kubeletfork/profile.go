// Package kubeletfork is what a kubelet fork needs to take its
// KubeletConfiguration from a dynconfig Controller with the kubelet's own
// code: a Profile whose defaulting and validation are the kubelet's
// (k8s.io/kubernetes), and the conversion of the chosen v1beta1 config to
// the kubelet's internal type through the kubelet's scheme.
//
// The library's components/kubelet.Profile re-implements the same rules
// without importing k8s.io/kubernetes (test/conformance proves them equal);
// a fork that already links the kubelet can use the kubelet's code itself,
// as cmd/hollow-kubelet does.
package kubeletfork

import (
	"errors"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/eviction"

	"github.com/dynconfig/dynconfig/merge"
)

// PayloadKey is the ConfigMap data key of the config, as for
// components/kubelet.
const PayloadKey = "kubelet"

// scheme is the kubelet's own scheme: kubelet.config.k8s.io v1beta1 and the
// internal version, with the v1beta1 defaulting funcs and the conversions.
var scheme = func() *runtime.Scheme {
	s, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		panic(fmt.Sprintf("kubeletfork: building the kubelet's scheme: %v", err))
	}
	return s
}()

// Profile is a dynconfig Profile for v1beta1 KubeletConfiguration that
// defaults and validates with the kubelet's own code. The zero value uses
// the kubelet's process-wide feature gate (utilfeature.DefaultFeatureGate),
// as the kubelet does.
type Profile struct {
	// FeatureGate is the gate the configs are validated against, before
	// their own featureGates are applied to a copy of it. Nil means
	// utilfeature.DefaultFeatureGate.
	FeatureGate featuregate.FeatureGate
}

// GroupVersionKind returns kubelet.config.k8s.io/v1beta1,
// Kind=KubeletConfiguration.
func (Profile) GroupVersionKind() schema.GroupVersionKind {
	return kubeletv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")
}

// PayloadKey returns "kubelet".
func (Profile) PayloadKey() string { return PayloadKey }

// Default applies the kubelet's defaulting, as the kubelet does when it
// loads its config file: the scheme's v1beta1 defaulting, then the
// platform's eviction defaults (eviction.DefaultEvictionHard) when
// evictionHard is unset, or under it when mergeDefaultEvictionSettings is
// true.
func (Profile) Default(obj *kubeletv1beta1.KubeletConfiguration) {
	scheme.Default(obj)
	switch {
	case obj.EvictionHard == nil:
		obj.EvictionHard = make(map[string]string, len(eviction.DefaultEvictionHard))
		for k, v := range eviction.DefaultEvictionHard {
			obj.EvictionHard[k] = v
		}
	case obj.MergeDefaultEvictionSettings != nil && *obj.MergeDefaultEvictionSettings:
		for k, v := range eviction.DefaultEvictionHard {
			if _, ok := obj.EvictionHard[k]; !ok {
				obj.EvictionHard[k] = v
			}
		}
	}
}

// DefaultDropInMerge applies the kubelet's defaulting to a config merged
// from a defaulted base and --config-dir drop-ins: the v1beta1 defaulting
// alone, as the kubelet does after merging its drop-ins (its eviction
// defaults reach the config file only, so a drop-in that sets one
// evictionHard signal keeps the base's default signals). The merge package
// calls it instead of Default when a merge has drop-ins.
func (Profile) DefaultDropInMerge(obj *kubeletv1beta1.KubeletConfiguration) {
	scheme.Default(obj)
}

// Profile defaults drop-in merges as the kubelet does.
var _ merge.DropInDefaulter[kubeletv1beta1.KubeletConfiguration] = Profile{}

// Validate converts obj to the kubelet's internal type and runs the
// kubelet's validation.ValidateKubeletConfiguration on it with the
// profile's feature gate. The kubelet's errors are plain messages, most of
// them "invalid configuration: <field> (--<flag>) ...": each becomes a
// field.Error of type Invalid whose detail is the kubelet's message, on
// that field when the message starts so, else on "kubelet" (the
// validation as a whole, such as an unknown feature gate).
func (p Profile) Validate(obj *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	internal, err := ToInternal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	gate := p.FeatureGate
	if gate == nil {
		gate = utilfeature.DefaultFeatureGate
	}
	err = validation.ValidateKubeletConfiguration(internal, gate)
	if err == nil {
		return nil
	}
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = agg.Errors()
	}
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		path := "kubelet"
		if m := kubeletFieldMessage.FindStringSubmatch(e.Error()); m != nil {
			path = m[1]
		}
		out = append(out, &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: e.Error()})
	}
	return out
}

// kubeletFieldMessage matches the kubelet's validation messages that name
// a field and its flag: "invalid configuration: imageGCLowThresholdPercent
// (--image-gc-low-threshold) 70 must be ...".
var kubeletFieldMessage = regexp.MustCompile(`^invalid configuration: ([a-zA-Z][a-zA-Z0-9.\[\]]*) \(--`)

// ToInternal converts a v1beta1 KubeletConfiguration to the kubelet's
// internal type through the kubelet's scheme, as the kubelet does after
// decoding its config file. obj is not modified.
func ToInternal(obj *kubeletv1beta1.KubeletConfiguration) (*kubeletconfig.KubeletConfiguration, error) {
	out := &kubeletconfig.KubeletConfiguration{}
	if err := scheme.Convert(obj.DeepCopy(), out, nil); err != nil {
		return nil, fmt.Errorf("kubeletfork: converting KubeletConfiguration v1beta1 to the kubelet's internal type: %w", err)
	}
	return out, nil
}
