package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of ConfigRollout.
const Group = "dynconfig.io"

// Version is this package's API version.
const Version = "v1alpha1"

// Kind is ConfigRollout's kind.
const Kind = "ConfigRollout"

// Resource is ConfigRollout's plural resource name.
const Resource = "configrollouts"

// GroupVersion returns dynconfig.io/v1alpha1.
func GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: Group, Version: Version}
}

// GroupVersionResource returns configrollouts.v1alpha1.dynconfig.io, for a
// dynamic client.
func GroupVersionResource() schema.GroupVersionResource {
	return GroupVersion().WithResource(Resource)
}

// GroupVersionKind returns dynconfig.io/v1alpha1, Kind=ConfigRollout.
func GroupVersionKind() schema.GroupVersionKind {
	return GroupVersion().WithKind(Kind)
}

// AddToScheme adds ConfigRollout and ConfigRolloutList to s.
func AddToScheme(s *runtime.Scheme) error {
	gv := GroupVersion()
	s.AddKnownTypes(gv, &ConfigRollout{}, &ConfigRolloutList{})
	metav1.AddToGroupVersion(s, gv)
	return nil
}
