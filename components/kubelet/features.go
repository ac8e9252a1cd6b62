package kubelet

import "github.com/dynconfig/dynconfig/components/internal/featuregates"

// Feature gate names that change how a KubeletConfiguration is defaulted or
// validated (the logging gates, which kube-proxy reads too, are
// featuregates.LoggingAlphaOptions and LoggingBetaOptions). Every other gate
// the kubelet knows is in the gate table of package featuregates, which
// validation checks featureGates against.
const (
	gateCustomCPUCFSQuotaPeriod                = "CustomCPUCFSQuotaPeriod"
	gateDefaultPodSysctls                      = "DefaultPodSysctls"
	gateGracefulNodeShutdown                   = "GracefulNodeShutdown"
	gateGracefulNodeShutdownBasedOnPodPriority = "GracefulNodeShutdownBasedOnPodPriority"
	gateImageMaximumGCAge                      = "ImageMaximumGCAge"
	gateKubeletCrashLoopBackOffMax             = "KubeletCrashLoopBackOffMax"
	gateKubeletEnsureSecretPulledImages        = "KubeletEnsureSecretPulledImages"
	gateMemoryQoS                              = "MemoryQoS"
	gateNodeLogQuery                           = "NodeLogQuery"
	gateNodeSwap                               = "NodeSwap"
	gateRotateKubeletServerCertificate         = "RotateKubeletServerCertificate"
)

// gateWording is how the kubelet of 1.37 words its featureGates errors.
var gateWording = featuregates.Wording{
	Component: "the kubelet of Kubernetes 1.37",
	Release:   "Kubernetes 1.37",
}
