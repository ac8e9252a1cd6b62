//go:build tools

// Package kubescheduler keeps the upstream kube-scheduler's main package,
// k8s.io/kubernetes/cmd/kube-scheduler, in this module's graph (go mod tidy
// keeps what a tools file imports), so that test/hack/ensure-bins.sh builds
// the UNMODIFIED scheduler into bin/kube-scheduler from the modules go.sum
// pins, the same k8s.io/kubernetes as bin/kubelet. There is no code of ours
// here: test/cluster runs that binary as it is (Options.ControlPlane).
package kubescheduler

import _ "k8s.io/kubernetes/cmd/kube-scheduler"
