package kubelet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// Validate checks obj the way the kubelet of Kubernetes 1.37 checks its
// configuration at startup on Linux, and returns every problem found (it
// never stops at the first). Each error carries the JSON path of the field at
// fault, for example "kubeAPIQPS" or "evictionHard[memory.available]", and
// one of the field error types: Invalid (bad value), Required (missing),
// NotSupported (not one of the allowed values), Forbidden (not allowed in this
// combination, often because of a feature gate) or Duplicate.
//
// Validate reads obj as the kubelet reads its internal configuration after
// conversion: a nil pointer counts as the zero value, except for fields that
// stay optional in the kubelet (maxParallelImagePulls, memoryThrottlingFactor,
// crashLoopBackOff.maxContainerRestartPeriod, tracing, userNamespaces). Call
// Default first, as the kubelet does; a defaulted empty configuration is
// valid, an undefaulted one usually is not.
//
// Feature gates are the 1.37 defaults overlaid with obj.FeatureGates. The
// package documentation lists the upstream checks left out and the few
// checks added.
//
// Validate does not modify obj. A nil obj gives a single Required error on
// the path "KubeletConfiguration".
func Validate(obj *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	if obj == nil {
		return field.ErrorList{field.Required(field.NewPath(Kind), "a KubeletConfiguration is required")}
	}
	v := &validator{kc: obj, gates: featuregates.Gates(obj.FeatureGates)}
	// featureGates as the kubelet checks them when it sets its gates.
	v.errs = v.gates.Validate(v.errs, gateWording)
	v.validateGeneral()
	v.validateImageGC()
	v.validateEnums()
	v.validateEviction()
	v.validateShutdown()
	v.validateRuntime()
	v.validateLogsAndHandlers()
	v.validateNodeAllocatable()
	v.validateReservations()
	v.validateTaints()
	v.validateDefaultPodSysctls()
	v.validateServer()
	v.validateLogging()
	v.validateTracing()
	return v.errs
}

// validator collects the errors of one Validate call.
type validator struct {
	kc    *kubeletv1beta1.KubeletConfiguration
	gates featuregates.Gates
	errs  field.ErrorList
}

func (v *validator) add(err *field.Error) { v.errs = append(v.errs, err) }

// Readers for optional fields, giving the value the kubelet's internal
// configuration would hold after conversion.
func i32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func boolean(p *bool) bool { return p != nil && *p }

func duration(p *metav1.Duration) time.Duration {
	if p == nil {
		return 0
	}
	return p.Duration
}

func validPort(p int32) bool { return p >= 1 && p <= 65535 }

// validateGeneral covers the numeric ranges and simple relations of
// upstream's ValidateKubeletConfiguration.
func (v *validator) validateGeneral() {
	kc := v.kc
	if kc.NodeLeaseDurationSeconds <= 0 {
		v.add(field.Invalid(field.NewPath("nodeLeaseDurationSeconds"), kc.NodeLeaseDurationSeconds, "must be greater than 0"))
	}
	if kc.SystemCgroups != "" && kc.CgroupRoot == "" {
		v.add(field.Required(field.NewPath("cgroupRoot"), "required when systemCgroups is set"))
	}
	nonNegative := func(name string, value int64) {
		if value < 0 {
			v.add(field.Invalid(field.NewPath(name), value, "must not be negative"))
		}
	}
	nonNegative("eventBurst", int64(kc.EventBurst))
	nonNegative("eventRecordQPS", int64(i32(kc.EventRecordQPS)))
	nonNegative("kubeAPIBurst", int64(kc.KubeAPIBurst))
	nonNegative("kubeAPIQPS", int64(i32(kc.KubeAPIQPS)))
	nonNegative("registryBurst", int64(kc.RegistryBurst))
	nonNegative("registryPullQPS", int64(i32(kc.RegistryPullQPS)))
	nonNegative("maxOpenFiles", kc.MaxOpenFiles)
	nonNegative("maxPods", int64(kc.MaxPods))
	nonNegative("podsPerCore", int64(kc.PodsPerCore))

	if n := i32(kc.NodeStatusMaxImages); n < -1 {
		v.add(field.Invalid(field.NewPath("nodeStatusMaxImages"), n, "must be -1 or greater"))
	}
	if n := i32(kc.OOMScoreAdj); n < -1000 || n > 1000 {
		v.add(field.Invalid(field.NewPath("oomScoreAdj"), n, "must be between -1000 and 1000, inclusive"))
	}
	if n := i32(kc.IPTablesDropBit); n < 0 || n > 31 {
		v.add(field.Invalid(field.NewPath("iptablesDropBit"), n, "must be between 0 and 31, inclusive"))
	}
	if n := i32(kc.IPTablesMasqueradeBit); n < 0 || n > 31 {
		v.add(field.Invalid(field.NewPath("iptablesMasqueradeBit"), n, "must be between 0 and 31, inclusive"))
	}

	const defaultCFSQuotaPeriod = 100 * time.Millisecond
	period := duration(kc.CPUCFSQuotaPeriod)
	if v.gates.Enabled(gateCustomCPUCFSQuotaPeriod) {
		if period < time.Millisecond || period > time.Second {
			v.add(field.Invalid(field.NewPath("cpuCFSQuotaPeriod"), period.String(), "must be between 1ms and 1s, inclusive"))
		}
	} else if period != defaultCFSQuotaPeriod {
		v.add(field.Forbidden(field.NewPath("cpuCFSQuotaPeriod"),
			fmt.Sprintf("may only differ from %v when feature gate %s is enabled", defaultCFSQuotaPeriod, gateCustomCPUCFSQuotaPeriod)))
	}

	if p := kc.MaxParallelImagePulls; p != nil {
		if *p < 1 {
			v.add(field.Invalid(field.NewPath("maxParallelImagePulls"), *p, "must be a positive number"))
		} else if *p > 1 && boolean(kc.SerializeImagePulls) {
			v.add(field.Invalid(field.NewPath("maxParallelImagePulls"), *p, "must not be greater than 1 when serializeImagePulls is true"))
		}
	}
	if kc.RunOnce {
		v.add(field.Forbidden(field.NewPath("runOnce"), "run-once mode has been removed and must not be set"))
	}
}

// validateImageGC checks the image garbage collection thresholds and ages.
func (v *validator) validateImageGC() {
	kc := v.kc
	high, low := i32(kc.ImageGCHighThresholdPercent), i32(kc.ImageGCLowThresholdPercent)
	if high < 0 || high > 100 {
		v.add(field.Invalid(field.NewPath("imageGCHighThresholdPercent"), high, "must be between 0 and 100, inclusive"))
	}
	if low < 0 || low > 100 {
		v.add(field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low, "must be between 0 and 100, inclusive"))
	}
	if low >= high {
		v.add(field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low,
			fmt.Sprintf("must be less than imageGCHighThresholdPercent (%d)", high)))
	}
	minAge, maxAge := kc.ImageMinimumGCAge.Duration, kc.ImageMaximumGCAge.Duration
	// ImageMaximumGCAge is GA and locked on in 1.37: no gate check.
	if minAge < 0 {
		v.add(field.Invalid(field.NewPath("imageMinimumGCAge"), minAge.String(), "must not be negative"))
	}
	if maxAge < 0 {
		v.add(field.Invalid(field.NewPath("imageMaximumGCAge"), maxAge.String(), "must not be negative"))
	}
	if maxAge > 0 && maxAge <= minAge {
		v.add(field.Invalid(field.NewPath("imageMaximumGCAge"), maxAge.String(),
			fmt.Sprintf("must be greater than imageMinimumGCAge (%v)", minAge)))
	}
}

// validateEnums checks the fields that take one of a fixed set of values.
// Upstream checks cgroupDriver, cpuManagerPolicy, memoryManagerPolicy and
// configMapAndSecretChangeDetectionStrategy when the managers start rather
// than in ValidateKubeletConfiguration; the kubelet refuses to start either
// way.
func (v *validator) validateEnums() {
	kc := v.kc
	oneOf(v, "topologyManagerPolicy", kc.TopologyManagerPolicy,
		kubeletv1beta1.NoneTopologyManagerPolicy, kubeletv1beta1.BestEffortTopologyManagerPolicy,
		kubeletv1beta1.RestrictedTopologyManagerPolicy, kubeletv1beta1.SingleNumaNodeTopologyManagerPolicy)
	oneOf(v, "topologyManagerScope", kc.TopologyManagerScope,
		kubeletv1beta1.ContainerTopologyManagerScope, kubeletv1beta1.PodTopologyManagerScope)
	oneOf(v, "hairpinMode", kc.HairpinMode,
		kubeletv1beta1.HairpinNone, kubeletv1beta1.HairpinVeth, kubeletv1beta1.PromiscuousBridge)
	oneOf(v, "cgroupDriver", kc.CgroupDriver, "cgroupfs", "systemd")
	oneOf(v, "cpuManagerPolicy", kc.CPUManagerPolicy, "none", "static")
	oneOf(v, "memoryManagerPolicy", kc.MemoryManagerPolicy,
		kubeletv1beta1.NoneMemoryManagerPolicy, kubeletv1beta1.StaticMemoryManagerPolicy)
	oneOf(v, "configMapAndSecretChangeDetectionStrategy", kc.ConfigMapAndSecretChangeDetectionStrategy,
		kubeletv1beta1.GetChangeDetectionStrategy, kubeletv1beta1.TTLCacheChangeDetectionStrategy,
		kubeletv1beta1.WatchChangeDetectionStrategy)
}

// oneOf reports a NotSupported error at path (dot-separated JSON field names)
// unless value is one of allowed. The path is only built on error, which keeps
// the common case free of allocations.
func oneOf[T ~string](v *validator, path string, value T, allowed ...T) {
	if slices.Contains(allowed, value) {
		return
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	v.add(field.NotSupported(dotPath(path), string(value), names))
}

// sortedKeys returns the keys of m in order, so that errors come out in the
// same order on every run.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// dotPath turns "a.b.c" into the field path a.b.c.
func dotPath(s string) *field.Path {
	parts := strings.Split(s, ".")
	return field.NewPath(parts[0], parts[1:]...)
}
