package source

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// Assignment is an assignment resolved against its source.
type Assignment struct {
	// Source is the assignment completed with the ConfigMap's
	// resourceVersion and the payload key; nil for the empty assignment.
	Source *corev1.NodeConfigSource
	// ConfigMap is the object Source names, to be checkpointed whole (its
	// kind and apiVersion set); nil for the empty assignment.
	ConfigMap *corev1.ConfigMap
}

// Remote is where a node's assignment comes from. Package sourcetest holds
// the conformance test of this contract (RunRemoteConformance), which every
// implementation here passes, and an in-memory Remote for tests (Fake).
type Remote interface {
	// Assigned reads and resolves the current assignment. An error means
	// the desired config is unclear (an invalid assignment is an
	// *InvalidError; anything else is a failure to read it). The result
	// is the caller's to keep and change.
	Assigned(ctx context.Context) (Assignment, error)
	// Run blocks until ctx ends, calling changed whenever the assignment or
	// the ConfigMap it names may have changed (spurious calls are allowed;
	// calls never overlap), including once after it starts watching, for
	// changes made since an earlier Assigned. It returns nil when ctx ends.
	Run(ctx context.Context, changed func()) error
}
