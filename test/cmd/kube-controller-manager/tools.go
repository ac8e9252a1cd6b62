//go:build tools

// Package kubecontrollermanager keeps the upstream kube-controller-manager's
// main package, k8s.io/kubernetes/cmd/kube-controller-manager, in this
// module's graph (go mod tidy keeps what a tools file imports), so that
// test/hack/ensure-bins.sh builds the UNMODIFIED controller manager into
// bin/kube-controller-manager from the modules go.sum pins, the same
// k8s.io/kubernetes as bin/kubelet. There is no code of ours here:
// test/cluster runs that binary as it is (Options.ControlPlane).
package kubecontrollermanager

import _ "k8s.io/kubernetes/cmd/kube-controller-manager"
