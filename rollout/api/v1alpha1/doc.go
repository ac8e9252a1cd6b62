// Package v1alpha1 is the ConfigRollout API (group dynconfig.io, version
// v1alpha1): a namespaced object that rolls a ConfigMap out to one
// component on a set of nodes in steps, and the status the rollout
// controller (cmd/dynconfig-rollout) writes back.
//
// The types carry kubebuilder markers; controller-gen generates the
// deepcopy functions (zz_generated.deepcopy.go) and the CRD
// (deploy/rollout/dynconfig.io_configrollouts.yaml) from them: run
// `go generate ./rollout/api/v1alpha1` after changing a type. The package
// has no global registration: AddToScheme adds the types to a scheme the
// caller owns.
//
// +kubebuilder:object:generate=true
// +groupName=dynconfig.io
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=. crd:crdVersions=v1 output:crd:artifacts:config=../../../deploy/rollout
