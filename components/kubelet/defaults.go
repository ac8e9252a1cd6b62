package kubelet

import (
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// Default values the kubelet of Kubernetes 1.37 uses on Linux for some of the
// fields a configuration leaves unset. They are exported so that tools
// rendering a configuration (for example for kubeadm or Bottlerocket) can
// state them; Default applies them together with the rest.
const (
	// DefaultPort is the kubelet's HTTPS port (port).
	DefaultPort = 10250
	// DefaultHealthzPort is the localhost healthz port (healthzPort).
	DefaultHealthzPort = 10248
	// DefaultHealthzBindAddress is the healthz listen address (healthzBindAddress).
	DefaultHealthzBindAddress = "127.0.0.1"
	// DefaultAddress is the kubelet's listen address (address).
	DefaultAddress = "0.0.0.0"
	// DefaultOOMScoreAdj is the kubelet process's OOM score adjustment (oomScoreAdj).
	DefaultOOMScoreAdj = -999
	// DefaultResolvConf is the resolver configuration file (resolvConf).
	DefaultResolvConf = "/etc/resolv.conf"
	// DefaultVolumePluginDir is the flex volume plugin directory (volumePluginDir).
	DefaultVolumePluginDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
	// DefaultPodLogsDir is the root of the pod log directories (podLogsDir).
	DefaultPodLogsDir = "/var/log/pods"
	// DefaultContainerRuntimeEndpoint is the CRI endpoint (containerRuntimeEndpoint).
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	// DefaultContentType is the content type of API requests (contentType).
	DefaultContentType = "application/vnd.kubernetes.protobuf"
	// DefaultIPTablesMasqueradeBit is the default of the deprecated iptablesMasqueradeBit.
	DefaultIPTablesMasqueradeBit = 14
	// DefaultIPTablesDropBit is the default of the deprecated iptablesDropBit.
	DefaultIPTablesDropBit = 15
	// DefaultMaxPods is the pod capacity of the node (maxPods).
	DefaultMaxPods = 110
	// DefaultMaxContainerRestartPeriod is the cap on container restart
	// back-off (crashLoopBackOff.maxContainerRestartPeriod), set when the
	// KubeletCrashLoopBackOffMax gate is on.
	DefaultMaxContainerRestartPeriod = 300 * time.Second
)

// DefaultEvictionHard returns the kubelet's hard eviction thresholds on Linux,
// used when a configuration sets no evictionHard at all, or merged under the
// configured ones when mergeDefaultEvictionSettings is true. Each call returns
// a new map.
//
// Upstream keeps these in pkg/kubelet/eviction/defaults_linux.go and applies
// them when it loads the config file, not in the v1beta1 defaulting function;
// the doc comment on the evictionHard field lists only the first four.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// Default fills every unset field of obj with the value the kubelet of
// Kubernetes 1.37 would use on Linux, and leaves every set field alone, with
// the upstream exceptions kept on purpose:
//
//   - podPidsLimit: a negative value becomes -1, as upstream does;
//   - nodeStatusReportFrequency: when unset it takes nodeStatusUpdateFrequency
//     if that is set, else 5m;
//   - serializeImagePulls: when unset it is false if maxParallelImagePulls is
//     2 or more, else true;
//   - reservedMemory: each limit is rounded up to a whole milli-unit, as
//     the kubelet's scheme does with every resource list ("1.5u" becomes
//     "1m");
//   - evictionHard: when unset it is DefaultEvictionHard; when set and
//     mergeDefaultEvictionSettings is true, the default signals it does not
//     mention are added (a signal it does mention is never changed). The map
//     is copied before it is extended, so a map shared with another object is
//     not modified.
//
// Feature-gated defaults (crashLoopBackOff.maxContainerRestartPeriod,
// imagePullCredentialsVerificationPolicy) follow the 1.37 gate defaults
// overlaid with obj.FeatureGates. Default is idempotent. A nil obj is a no-op.
// TypeMeta (apiVersion, kind) is not touched.
func Default(obj *kubeletv1beta1.KubeletConfiguration) {
	if obj == nil {
		return
	}
	defaultFields(obj)
	defaultEvictionHard(obj)
	roundUpReservedMemory(obj)
}

// DefaultDropInMerge fills the unset fields of a configuration that drop-ins
// were merged into, as the kubelet does after merging its --config-dir: the
// kubelet defaulted the base (Default) before the drop-ins merged into it,
// and now applies its v1beta1 defaults only. Unlike Default it leaves
// evictionHard alone (a drop-in that deletes it with null leaves the kubelet
// without hard eviction thresholds; one that sets mergeDefaultEvictionSettings
// merges nothing more in) and does not round reservedMemory limits. A nil obj
// is a no-op.
func DefaultDropInMerge(obj *kubeletv1beta1.KubeletConfiguration) {
	if obj == nil {
		return
	}
	defaultFields(obj)
}

// defaultFields applies the kubelet's v1beta1 defaults (upstream
// SetDefaults_KubeletConfiguration).
func defaultFields(obj *kubeletv1beta1.KubeletConfiguration) {
	g := featuregates.Gates(obj.FeatureGates)

	if obj.EnableServer == nil {
		obj.EnableServer = ptr.To(true)
	}
	defaultDuration(&obj.SyncFrequency, time.Minute)
	defaultDuration(&obj.FileCheckFrequency, 20*time.Second)
	defaultDuration(&obj.HTTPCheckFrequency, 20*time.Second)
	if obj.Address == "" {
		obj.Address = DefaultAddress
	}
	if obj.Port == 0 {
		obj.Port = DefaultPort
	}
	if obj.Authentication.Anonymous.Enabled == nil {
		obj.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	if obj.Authentication.Webhook.Enabled == nil {
		obj.Authentication.Webhook.Enabled = ptr.To(true)
	}
	defaultDuration(&obj.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if obj.Authorization.Mode == "" {
		obj.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	defaultDuration(&obj.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	defaultDuration(&obj.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
	if obj.RegistryPullQPS == nil {
		obj.RegistryPullQPS = ptr.To[int32](5)
	}
	if obj.RegistryBurst == 0 {
		obj.RegistryBurst = 10
	}
	if obj.EventRecordQPS == nil {
		obj.EventRecordQPS = ptr.To[int32](50)
	}
	if obj.EventBurst == 0 {
		obj.EventBurst = 100
	}
	if obj.EnableDebuggingHandlers == nil {
		obj.EnableDebuggingHandlers = ptr.To(true)
	}
	if obj.HealthzPort == nil {
		obj.HealthzPort = ptr.To[int32](DefaultHealthzPort)
	}
	if obj.HealthzBindAddress == "" {
		obj.HealthzBindAddress = DefaultHealthzBindAddress
	}
	if obj.OOMScoreAdj == nil {
		obj.OOMScoreAdj = ptr.To[int32](DefaultOOMScoreAdj)
	}
	defaultDuration(&obj.StreamingConnectionIdleTimeout, 4*time.Hour)
	// Report frequency is decided before update frequency is defaulted: an
	// explicitly set update frequency is also the report frequency, for
	// compatibility with kubelets that had only the one setting.
	if obj.NodeStatusReportFrequency.Duration == 0 {
		if obj.NodeStatusUpdateFrequency.Duration == 0 {
			obj.NodeStatusReportFrequency = metav1.Duration{Duration: 5 * time.Minute}
		} else {
			obj.NodeStatusReportFrequency = obj.NodeStatusUpdateFrequency
		}
	}
	defaultDuration(&obj.NodeStatusUpdateFrequency, 10*time.Second)
	if obj.NodeLeaseDurationSeconds == 0 {
		obj.NodeLeaseDurationSeconds = 40
	}
	defaultDuration(&obj.ImageMinimumGCAge, 2*time.Minute)
	if obj.ImageGCHighThresholdPercent == nil {
		obj.ImageGCHighThresholdPercent = ptr.To[int32](85)
	}
	if obj.ImageGCLowThresholdPercent == nil {
		obj.ImageGCLowThresholdPercent = ptr.To[int32](80)
	}
	defaultDuration(&obj.VolumeStatsAggPeriod, time.Minute)
	if obj.CgroupsPerQOS == nil {
		obj.CgroupsPerQOS = ptr.To(true)
	}
	if obj.CgroupDriver == "" {
		obj.CgroupDriver = "cgroupfs"
	}
	if obj.CPUManagerPolicy == "" {
		obj.CPUManagerPolicy = "none"
	}
	defaultDuration(&obj.CPUManagerReconcilePeriod, 10*time.Second)
	if obj.MemoryManagerPolicy == "" {
		obj.MemoryManagerPolicy = kubeletv1beta1.NoneMemoryManagerPolicy
	}
	if obj.TopologyManagerPolicy == "" {
		obj.TopologyManagerPolicy = kubeletv1beta1.NoneTopologyManagerPolicy
	}
	if obj.TopologyManagerScope == "" {
		obj.TopologyManagerScope = kubeletv1beta1.ContainerTopologyManagerScope
	}
	defaultDuration(&obj.RuntimeRequestTimeout, 2*time.Minute)
	if obj.HairpinMode == "" {
		obj.HairpinMode = kubeletv1beta1.PromiscuousBridge
	}
	if obj.MaxPods == 0 {
		obj.MaxPods = DefaultMaxPods
	}
	// -1 means "no pod-level limit beyond node allocatable"; upstream maps
	// every negative value to it.
	if obj.PodPidsLimit == nil || *obj.PodPidsLimit < 0 {
		obj.PodPidsLimit = ptr.To[int64](-1)
	}
	if obj.ResolverConfig == nil {
		obj.ResolverConfig = ptr.To(DefaultResolvConf)
	}
	if obj.CPUCFSQuota == nil {
		obj.CPUCFSQuota = ptr.To(true)
	}
	if obj.CPUCFSQuotaPeriod == nil {
		obj.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	if obj.NodeStatusMaxImages == nil {
		obj.NodeStatusMaxImages = ptr.To[int32](50)
	}
	if obj.MaxOpenFiles == 0 {
		obj.MaxOpenFiles = 1000000
	}
	if obj.ContentType == "" {
		obj.ContentType = DefaultContentType
	}
	if obj.KubeAPIQPS == nil {
		obj.KubeAPIQPS = ptr.To[int32](50)
	}
	if obj.KubeAPIBurst == 0 {
		obj.KubeAPIBurst = 100
	}
	if obj.SerializeImagePulls == nil {
		// Asking for parallel pulls implies not serializing them, so users
		// need not set both fields.
		parallel := obj.MaxParallelImagePulls != nil && *obj.MaxParallelImagePulls >= 2
		obj.SerializeImagePulls = ptr.To(!parallel)
	}
	defaultDuration(&obj.EvictionPressureTransitionPeriod, 5*time.Minute)
	if obj.MergeDefaultEvictionSettings == nil {
		obj.MergeDefaultEvictionSettings = ptr.To(false)
	}
	if obj.EnableControllerAttachDetach == nil {
		obj.EnableControllerAttachDetach = ptr.To(true)
	}
	if obj.MakeIPTablesUtilChains == nil {
		obj.MakeIPTablesUtilChains = ptr.To(true)
	}
	if obj.IPTablesMasqueradeBit == nil {
		obj.IPTablesMasqueradeBit = ptr.To[int32](DefaultIPTablesMasqueradeBit)
	}
	if obj.IPTablesDropBit == nil {
		obj.IPTablesDropBit = ptr.To[int32](DefaultIPTablesDropBit)
	}
	if obj.FailSwapOn == nil {
		obj.FailSwapOn = ptr.To(true)
	}
	if obj.ContainerLogMaxSize == "" {
		obj.ContainerLogMaxSize = "10Mi"
	}
	if obj.ContainerLogMaxFiles == nil {
		obj.ContainerLogMaxFiles = ptr.To[int32](5)
	}
	if obj.ContainerLogMaxWorkers == nil {
		obj.ContainerLogMaxWorkers = ptr.To[int32](1)
	}
	if obj.ContainerLogMonitorInterval == nil {
		obj.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	if obj.ConfigMapAndSecretChangeDetectionStrategy == "" {
		obj.ConfigMapAndSecretChangeDetectionStrategy = kubeletv1beta1.WatchChangeDetectionStrategy
	}
	if obj.EnforceNodeAllocatable == nil {
		obj.EnforceNodeAllocatable = []string{"pods"}
	}
	if obj.VolumePluginDir == "" {
		obj.VolumePluginDir = DefaultVolumePluginDir
	}
	// The upstream helper only fills empty fields: format "text", flush
	// frequency 5s, and a zero info buffer size for both formats.
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
	if obj.EnableSystemLogHandler == nil {
		obj.EnableSystemLogHandler = ptr.To(true)
	}
	if obj.EnableProfilingHandler == nil {
		obj.EnableProfilingHandler = ptr.To(true)
	}
	if obj.EnableDebugFlagsHandler == nil {
		obj.EnableDebugFlagsHandler = ptr.To(true)
	}
	if obj.SeccompDefault == nil {
		obj.SeccompDefault = ptr.To(false)
	}
	// true since 1.35: cgroup v1 hosts are refused unless the config says so.
	if obj.FailCgroupV1 == nil {
		obj.FailCgroupV1 = ptr.To(true)
	}
	// memoryThrottlingFactor has no default since 1.37 (nil: memory.high is
	// not set); memoryReservationPolicy defaults to None since 1.36.
	if obj.MemoryReservationPolicy == "" {
		obj.MemoryReservationPolicy = kubeletv1beta1.NoneMemoryReservationPolicy
	}
	if obj.RegisterNode == nil {
		obj.RegisterNode = ptr.To(true)
	}
	if obj.LocalStorageCapacityIsolation == nil {
		obj.LocalStorageCapacityIsolation = ptr.To(true)
	}
	if obj.ContainerRuntimeEndpoint == "" {
		obj.ContainerRuntimeEndpoint = DefaultContainerRuntimeEndpoint
	}
	if obj.PodLogsDir == "" {
		obj.PodLogsDir = DefaultPodLogsDir
	}
	if g.Enabled(gateKubeletCrashLoopBackOffMax) && obj.CrashLoopBackOff.MaxContainerRestartPeriod == nil {
		obj.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: DefaultMaxContainerRestartPeriod}
	}
	if g.Enabled(gateKubeletEnsureSecretPulledImages) && obj.ImagePullCredentialsVerificationPolicy == "" {
		obj.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.NeverVerifyPreloadedImages
	}
}

// roundUpReservedMemory rounds every reservedMemory limit up to a whole
// milli-unit, as the kubelet's scheme defaults every resource list. A limits
// map that needs a change is copied first, so a map shared with another
// object is not modified.
func roundUpReservedMemory(obj *kubeletv1beta1.KubeletConfiguration) {
	for i := range obj.ReservedMemory {
		limits := obj.ReservedMemory[i].Limits
		copied := false
		for name, q := range limits {
			rounded := q.DeepCopy()
			if rounded.RoundUp(-3) {
				continue // already whole milli-units
			}
			if !copied {
				limits = maps.Clone(limits)
				obj.ReservedMemory[i].Limits = limits
				copied = true
			}
			limits[name] = rounded
		}
	}
}

// defaultDuration sets *d to def when it is zero.
func defaultDuration(d *metav1.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// defaultEvictionHard applies the kubelet's eviction-hard defaults; see
// Default. It must run after mergeDefaultEvictionSettings is defaulted.
// Upstream applies them when it loads its config file, after the scheme's
// defaulting.
func defaultEvictionHard(obj *kubeletv1beta1.KubeletConfiguration) {
	if obj.EvictionHard == nil {
		obj.EvictionHard = DefaultEvictionHard()
		return
	}
	if !*obj.MergeDefaultEvictionSettings {
		return
	}
	var merged map[string]string
	for signal, value := range DefaultEvictionHard() {
		if _, set := obj.EvictionHard[signal]; set {
			continue
		}
		if merged == nil {
			merged = make(map[string]string, len(obj.EvictionHard)+5)
			for k, v := range obj.EvictionHard {
				merged[k] = v
			}
		}
		merged[signal] = value
	}
	if merged != nil {
		obj.EvictionHard = merged
	}
}
