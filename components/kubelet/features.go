package kubelet

// Feature gate names that change how a KubeletConfiguration is defaulted or
// validated.
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
	gateLoggingAlphaOptions                    = "LoggingAlphaOptions"
	gateLoggingBetaOptions                     = "LoggingBetaOptions"
)

// gateSpec is what the kubelet of Kubernetes 1.37 does with a feature gate
// that the configuration does not mention.
type gateSpec struct {
	enabled bool
	// locked gates cannot be set to anything but their default: the kubelet
	// refuses to start when a configuration tries.
	locked bool
	// stage is the gate's maturity: AllAlpha and AllBeta set every alpha
	// (beta) gate the configuration does not set itself.
	stage gateStage
}

// gateStage is a feature gate's maturity at Kubernetes 1.37.
type gateStage uint8

const (
	stageGA gateStage = iota
	stageAlpha
	stageBeta
	stageDeprecated
	// stagePreAlpha gates are known but not available in 1.37: the kubelet
	// refuses a configuration that sets one.
	stagePreAlpha
)

// The special gates that set every alpha or beta gate at once.
const (
	gateAllAlpha = "AllAlpha"
	gateAllBeta  = "AllBeta"
)

// gateDefault returns the 1.37 default of the named gate. Only the gates this
// package consults are listed; for any other name known is false.
//
// The values come from the versioned specs in the upstream
// pkg/features/kube_features.go (defaultVersionedKubernetesFeatureGates) and,
// for the logging gates, k8s.io/component-base/logs/api/v1/kube_features.go.
func gateDefault(name string) (spec gateSpec, known bool) {
	switch name {
	case gateCustomCPUCFSQuotaPeriod: // GA in 1.37, not locked
		return gateSpec{enabled: true, stage: stageGA}, true
	case gateDefaultPodSysctls: // alpha
		return gateSpec{enabled: false, stage: stageAlpha}, true
	case gateGracefulNodeShutdown: // beta, on since 1.21
		return gateSpec{enabled: true, stage: stageBeta}, true
	case gateGracefulNodeShutdownBasedOnPodPriority: // beta, on since 1.24
		return gateSpec{enabled: true, stage: stageBeta}, true
	case gateImageMaximumGCAge: // GA in 1.35, locked on
		return gateSpec{enabled: true, locked: true, stage: stageGA}, true
	case gateKubeletCrashLoopBackOffMax: // beta, on since 1.35
		return gateSpec{enabled: true, stage: stageBeta}, true
	case gateKubeletEnsureSecretPulledImages: // beta, on since 1.35
		return gateSpec{enabled: true, stage: stageBeta}, true
	case gateMemoryQoS: // beta, on in 1.37
		return gateSpec{enabled: true, stage: stageBeta}, true
	case gateNodeLogQuery: // GA, locked on
		return gateSpec{enabled: true, locked: true, stage: stageGA}, true
	case gateNodeSwap: // GA in 1.34, locked on
		return gateSpec{enabled: true, locked: true, stage: stageGA}, true
	case gateRotateKubeletServerCertificate: // beta, on since 1.12
		return gateSpec{enabled: true, stage: stageBeta}, true
	case gateLoggingAlphaOptions: // alpha
		return gateSpec{enabled: false, stage: stageAlpha}, true
	case gateLoggingBetaOptions: // beta, on
		return gateSpec{enabled: true, stage: stageBeta}, true
	}
	return gateSpec{}, false
}

// gates is the feature gate set a configuration runs with: the 1.37 defaults
// overlaid with the configuration's own featureGates map.
type gates map[string]bool

// enabled reports whether the named gate is on: the configuration's own
// setting, else AllAlpha or AllBeta for an alpha or beta gate when the
// configuration sets those, else the 1.37 default. A locked gate is always at
// its default (an attempt to change it is reported once, on featureGates, not
// again on every field the gate governs).
func (g gates) enabled(name string) bool {
	spec, _ := gateDefault(name)
	if spec.locked {
		return spec.enabled
	}
	if v, ok := g[name]; ok {
		return v
	}
	switch spec.stage {
	case stageAlpha:
		if v, ok := g[gateAllAlpha]; ok {
			return v
		}
	case stageBeta:
		if v, ok := g[gateAllBeta]; ok {
			return v
		}
	}
	return spec.enabled
}
