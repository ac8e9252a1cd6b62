// Package kubeproxygates holds the evidence that kube-proxy 1.37 registers
// exactly the feature gates of the one table the kubelet and kube-proxy
// profiles share (components/internal/featuregates/zz_generated_gates.go,
// rendered by package kubeletgates from the kubelet's registrations).
//
// kube-proxy's gate set is utilfeature.DefaultMutableFeatureGate after the
// packages linked into the kube-proxy binary (cmd/kube-proxy, whose main
// package imports k8s.io/kubernetes/cmd/kube-proxy/app) have registered
// their gates in init. Registrations lists those packages; each is one the
// kubelet binary's registrations reproduce too (kubeletgates.Registrations),
// but for two that register the component-base logging and metrics gates,
// which kube-proxy's app package registers itself (KubeletOnly). So the
// gates of the table are exactly kube-proxy's. TestKubeProxyGateRegistrations
// (test/conformance) fails when the kube-proxy binary's imports register
// gates anywhere else, or when a package only the kubelet links registers
// gates kube-proxy lacks: the day either happens, the two profiles need
// separate tables.
package kubeproxygates

// Registrations maps each package of the kube-proxy binary whose init
// registers feature gates to how the table's generator reproduces it.
var Registrations = map[string]string{
	"k8s.io/kubernetes/pkg/features":                  "imported by kubeletgates",
	"k8s.io/apiserver/pkg/features":                   "imported by kubeletgates",
	"k8s.io/apiextensions-apiserver/pkg/features":     "imported by kubeletgates",
	"k8s.io/controller-manager/pkg/features/register": "imported by kubeletgates",
	"k8s.io/apiserver/pkg/server":                     "kubeletgates.Register: component-base metrics gates",
	"k8s.io/kubernetes/cmd/kube-proxy/app":            "kubeletgates.Register: component-base logging and metrics gates",
}

// KubeletOnly maps the packages of kubeletgates.Registrations that the
// kube-proxy binary does not link to the registration of kube-proxy's that
// adds the same gates: without one, the shared table would hold gates
// kube-proxy does not know.
var KubeletOnly = map[string]string{
	"k8s.io/kubernetes/pkg/kubelet/server": "k8s.io/kubernetes/cmd/kube-proxy/app", // component-base metrics gates
	"k8s.io/kubernetes/cmd/kubelet/app":    "k8s.io/kubernetes/cmd/kube-proxy/app", // component-base logging gates
}
