package kubelet

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/merge"
)

// PayloadKey is the ConfigMap data key that holds a KubeletConfiguration, as
// in the Dynamic Kubelet Configuration proposal.
const PayloadKey = "kubelet"

// Kind is the kind of the configuration type this profile handles.
const Kind = "KubeletConfiguration"

// Profile implements merge.DropInDefaulter: drop-ins merge as the kubelet's
// --config-dir does.
var _ merge.DropInDefaulter[kubeletv1beta1.KubeletConfiguration] = Profile{}

// Profile describes kubelet.config.k8s.io/v1beta1 KubeletConfiguration to the
// dynconfig facade. The zero value is ready to use; all methods are safe for
// concurrent use because Profile has no state.
type Profile struct{}

// GroupVersionKind returns kubelet.config.k8s.io/v1beta1, Kind=KubeletConfiguration.
func (Profile) GroupVersionKind() schema.GroupVersionKind {
	return kubeletv1beta1.SchemeGroupVersion.WithKind(Kind)
}

// PayloadKey returns the ConfigMap data key of the config, "kubelet".
func (Profile) PayloadKey() string { return PayloadKey }

// Default fills the unset fields of obj with the kubelet's defaults; see the
// package function Default.
func (Profile) Default(obj *kubeletv1beta1.KubeletConfiguration) { Default(obj) }

// DefaultDropInMerge fills the unset fields of a configuration merged from a
// defaulted base and drop-ins, as the kubelet does after merging its
// --config-dir; see the package function DefaultDropInMerge. The merge
// package calls it instead of Default when a merge has drop-ins
// (merge.DropInDefaulter).
func (Profile) DefaultDropInMerge(obj *kubeletv1beta1.KubeletConfiguration) { DefaultDropInMerge(obj) }

// Validate checks obj the way the kubelet would; see the package function
// Validate.
func (Profile) Validate(obj *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	return Validate(obj)
}

// Trial returns the trial settings of a config from the annotations of its
// ConfigMap, falling back to components.DefaultTrial for the ones not set.
func (Profile) Trial(annotations map[string]string) (components.Trial, error) {
	return components.TrialFromAnnotations(annotations, components.DefaultTrial())
}
