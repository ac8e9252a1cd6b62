//go:build tools

// Package kubelet keeps the upstream kubelet's main package,
// k8s.io/kubernetes/cmd/kubelet, in this module's graph (go mod tidy keeps
// what a tools file imports), so that test/hack/ensure-bins.sh builds the
// UNMODIFIED kubelet into bin/kubelet from the modules go.sum pins. There
// is no code of ours here: test/realnode runs that binary as it is.
package kubelet

import _ "k8s.io/kubernetes/cmd/kubelet"
