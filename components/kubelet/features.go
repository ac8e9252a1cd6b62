package kubelet

//go:generate sh -c "cd ../../test && go run ./conformance/kubeletgates/generate -o ../components/kubelet/zz_generated_gates.go"

// Feature gate names that change how a KubeletConfiguration is defaulted or
// validated. Every other gate the kubelet knows is in knownGates
// (zz_generated_gates.go), which validation checks featureGates against.
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

// gateDefault returns what the kubelet of Kubernetes 1.37 knows about the
// named gate; known is false for a name it does not know. The table,
// knownGates, is generated from the upstream code (see zz_generated_gates.go):
// the versioned specs of pkg/features/kube_features.go, client-go's and
// zpages' gates, and the logging and metrics gates of component-base that
// the kubelet registers.
func gateDefault(name string) (spec gateSpec, known bool) {
	spec, known = knownGates[name]
	return spec, known
}

// gates is the feature gate set a configuration runs with: the 1.37 defaults
// overlaid with the configuration's own featureGates map.
type gates map[string]bool

// enabled reports whether the named gate is on: the configuration's own
// setting, else AllAlpha or AllBeta for an alpha or beta gate when the
// configuration sets those, else the 1.37 default. A locked gate is always at
// its default, and a gate not available in 1.37 always off (an attempt to
// change either is reported once, on featureGates, not again on every field
// the gate governs).
func (g gates) enabled(name string) bool {
	spec, _ := gateDefault(name)
	if spec.locked || spec.stage == stagePreAlpha {
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
