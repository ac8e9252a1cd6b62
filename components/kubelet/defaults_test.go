package kubelet

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestDefaultEmptyGolden compares the defaulted empty configuration with
// testdata/defaulted-empty.yaml. Run with -update to rewrite the file after a
// deliberate change, and review the diff against upstream (see
// TestDefaultsMatchUpstream for where each value comes from).
func TestDefaultEmptyGolden(t *testing.T) {
	obj := &kubeletv1beta1.KubeletConfiguration{TypeMeta: typeMeta()}
	Default(obj)
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	golden := filepath.Join("testdata", "defaulted-empty.yaml")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("defaulted empty config differs from %s (-want +got):\n%s", golden, diff)
	}

	// The golden file must also read back into the same object, so it is a
	// usable config file and not only a snapshot.
	var back kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(want, &back); err != nil {
		t.Fatalf("golden file does not decode strictly: %v", err)
	}
	if diff := cmp.Diff(obj, &back, quantityCmp); diff != "" {
		t.Errorf("golden file decodes to a different object (-defaulted +decoded):\n%s", diff)
	}
}

// TestDefaultsMatchUpstream states the upstream facts the defaults come from,
// field by field, so a wrong value in the golden file cannot go unnoticed.
// Sources, as read for this package: pkg/kubelet/apis/config/v1beta1/defaults.go
// (SetDefaults_KubeletConfiguration) and pkg/kubelet/eviction/defaults_linux.go
// in kubernetes/kubernetes, the "Default:" lines of
// k8s.io/kubelet@v0.37.2/config/v1beta1/types.go for the values that changed
// in 1.35-1.37 (failCgroupV1 true, memoryThrottlingFactor unset,
// memoryReservationPolicy None), pkg/cluster/ports (10250, 10248),
// pkg/kubelet/qos (-999) and pkg/kubelet/types (/etc/resolv.conf).
func TestDefaultsMatchUpstream(t *testing.T) {
	obj := &kubeletv1beta1.KubeletConfiguration{}
	Default(obj)
	dur := func(s string) metav1.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.Duration{Duration: d}
	}
	tests := []struct {
		field     string
		got, want any
	}{
		{"enableServer", obj.EnableServer, ptr.To(true)},
		{"syncFrequency", obj.SyncFrequency, dur("1m")},
		{"fileCheckFrequency", obj.FileCheckFrequency, dur("20s")},
		{"httpCheckFrequency", obj.HTTPCheckFrequency, dur("20s")},
		{"address", obj.Address, "0.0.0.0"},
		{"port", obj.Port, int32(10250)},
		{"readOnlyPort", obj.ReadOnlyPort, int32(0)},
		{"authentication.anonymous.enabled", obj.Authentication.Anonymous.Enabled, ptr.To(false)},
		{"authentication.webhook.enabled", obj.Authentication.Webhook.Enabled, ptr.To(true)},
		{"authentication.webhook.cacheTTL", obj.Authentication.Webhook.CacheTTL, dur("2m")},
		{"authorization.mode", obj.Authorization.Mode, kubeletv1beta1.KubeletAuthorizationModeWebhook},
		{"authorization.webhook.cacheAuthorizedTTL", obj.Authorization.Webhook.CacheAuthorizedTTL, dur("5m")},
		{"authorization.webhook.cacheUnauthorizedTTL", obj.Authorization.Webhook.CacheUnauthorizedTTL, dur("30s")},
		{"registryPullQPS", obj.RegistryPullQPS, ptr.To[int32](5)},
		{"registryBurst", obj.RegistryBurst, int32(10)},
		{"eventRecordQPS", obj.EventRecordQPS, ptr.To[int32](50)},
		{"eventBurst", obj.EventBurst, int32(100)},
		{"enableDebuggingHandlers", obj.EnableDebuggingHandlers, ptr.To(true)},
		{"healthzPort", obj.HealthzPort, ptr.To[int32](10248)},
		{"healthzBindAddress", obj.HealthzBindAddress, "127.0.0.1"},
		{"oomScoreAdj", obj.OOMScoreAdj, ptr.To[int32](-999)},
		{"streamingConnectionIdleTimeout", obj.StreamingConnectionIdleTimeout, dur("4h")},
		{"nodeStatusUpdateFrequency", obj.NodeStatusUpdateFrequency, dur("10s")},
		{"nodeStatusReportFrequency", obj.NodeStatusReportFrequency, dur("5m")},
		{"nodeLeaseDurationSeconds", obj.NodeLeaseDurationSeconds, int32(40)},
		{"imageMinimumGCAge", obj.ImageMinimumGCAge, dur("2m")},
		{"imageMaximumGCAge", obj.ImageMaximumGCAge, metav1.Duration{}},
		{"imageGCHighThresholdPercent", obj.ImageGCHighThresholdPercent, ptr.To[int32](85)},
		{"imageGCLowThresholdPercent", obj.ImageGCLowThresholdPercent, ptr.To[int32](80)},
		{"volumeStatsAggPeriod", obj.VolumeStatsAggPeriod, dur("1m")},
		{"cgroupsPerQOS", obj.CgroupsPerQOS, ptr.To(true)},
		{"cgroupDriver", obj.CgroupDriver, "cgroupfs"},
		{"cpuManagerPolicy", obj.CPUManagerPolicy, "none"},
		{"cpuManagerReconcilePeriod", obj.CPUManagerReconcilePeriod, dur("10s")},
		{"memoryManagerPolicy", obj.MemoryManagerPolicy, "None"},
		{"topologyManagerPolicy", obj.TopologyManagerPolicy, "none"},
		{"topologyManagerScope", obj.TopologyManagerScope, "container"},
		{"runtimeRequestTimeout", obj.RuntimeRequestTimeout, dur("2m")},
		{"hairpinMode", obj.HairpinMode, "promiscuous-bridge"},
		{"maxPods", obj.MaxPods, int32(110)},
		{"podPidsLimit", obj.PodPidsLimit, ptr.To[int64](-1)},
		{"resolvConf", obj.ResolverConfig, ptr.To("/etc/resolv.conf")},
		{"cpuCFSQuota", obj.CPUCFSQuota, ptr.To(true)},
		{"cpuCFSQuotaPeriod", obj.CPUCFSQuotaPeriod, ptr.To(dur("100ms"))},
		{"nodeStatusMaxImages", obj.NodeStatusMaxImages, ptr.To[int32](50)},
		{"maxOpenFiles", obj.MaxOpenFiles, int64(1000000)},
		{"contentType", obj.ContentType, "application/vnd.kubernetes.protobuf"},
		{"kubeAPIQPS", obj.KubeAPIQPS, ptr.To[int32](50)},
		{"kubeAPIBurst", obj.KubeAPIBurst, int32(100)},
		{"serializeImagePulls", obj.SerializeImagePulls, ptr.To(true)},
		{"maxParallelImagePulls", obj.MaxParallelImagePulls, (*int32)(nil)},
		{"evictionHard", obj.EvictionHard, map[string]string{
			"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%",
		}},
		{"evictionPressureTransitionPeriod", obj.EvictionPressureTransitionPeriod, dur("5m")},
		{"mergeDefaultEvictionSettings", obj.MergeDefaultEvictionSettings, ptr.To(false)},
		{"enableControllerAttachDetach", obj.EnableControllerAttachDetach, ptr.To(true)},
		{"makeIPTablesUtilChains", obj.MakeIPTablesUtilChains, ptr.To(true)},
		{"iptablesMasqueradeBit", obj.IPTablesMasqueradeBit, ptr.To[int32](14)},
		{"iptablesDropBit", obj.IPTablesDropBit, ptr.To[int32](15)},
		{"failSwapOn", obj.FailSwapOn, ptr.To(true)},
		{"containerLogMaxSize", obj.ContainerLogMaxSize, "10Mi"},
		{"containerLogMaxFiles", obj.ContainerLogMaxFiles, ptr.To[int32](5)},
		{"containerLogMaxWorkers", obj.ContainerLogMaxWorkers, ptr.To[int32](1)},
		{"containerLogMonitorInterval", obj.ContainerLogMonitorInterval, ptr.To(dur("10s"))},
		{"configMapAndSecretChangeDetectionStrategy", obj.ConfigMapAndSecretChangeDetectionStrategy, kubeletv1beta1.WatchChangeDetectionStrategy},
		{"enforceNodeAllocatable", obj.EnforceNodeAllocatable, []string{"pods"}},
		{"volumePluginDir", obj.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"},
		{"logging.format", obj.Logging.Format, "text"},
		{"logging.flushFrequency", obj.Logging.FlushFrequency.Duration, dur("5s")},
		{"enableSystemLogHandler", obj.EnableSystemLogHandler, ptr.To(true)},
		{"enableSystemLogQuery", obj.EnableSystemLogQuery, (*bool)(nil)},
		{"enableProfilingHandler", obj.EnableProfilingHandler, ptr.To(true)},
		{"enableDebugFlagsHandler", obj.EnableDebugFlagsHandler, ptr.To(true)},
		{"seccompDefault", obj.SeccompDefault, ptr.To(false)},
		{"failCgroupV1", obj.FailCgroupV1, ptr.To(true)},
		{"memoryThrottlingFactor", obj.MemoryThrottlingFactor, (*float64)(nil)},
		{"memoryReservationPolicy", obj.MemoryReservationPolicy, kubeletv1beta1.NoneMemoryReservationPolicy},
		{"registerNode", obj.RegisterNode, ptr.To(true)},
		{"localStorageCapacityIsolation", obj.LocalStorageCapacityIsolation, ptr.To(true)},
		{"containerRuntimeEndpoint", obj.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
		{"podLogsDir", obj.PodLogsDir, "/var/log/pods"},
		{"crashLoopBackOff.maxContainerRestartPeriod", obj.CrashLoopBackOff.MaxContainerRestartPeriod, ptr.To(dur("300s"))},
		{"imagePullCredentialsVerificationPolicy", obj.ImagePullCredentialsVerificationPolicy, kubeletv1beta1.NeverVerifyPreloadedImages},
		{"userNamespaces", obj.UserNamespaces, (*kubeletv1beta1.UserNamespaces)(nil)},
		{"tracing", obj.Tracing, (*tracingapi.TracingConfiguration)(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s (-upstream +ours):\n%s", tc.field, diff)
			}
		})
	}
}

// TestDefaultNeverOverwrites runs Default over a configuration in which every
// field is set (TestFullySetConfigSetsEveryField keeps it so) and requires
// the result to be unchanged.
func TestDefaultNeverOverwrites(t *testing.T) {
	obj := fullySetConfig()
	// mergeDefaultEvictionSettings adds the missing default signals, by
	// design; give the fixture all of them so that nothing may change.
	for k, v := range DefaultEvictionHard() {
		if _, ok := obj.EvictionHard[k]; !ok {
			obj.EvictionHard[k] = v + "-set"
		}
	}
	want := obj.DeepCopy()
	Default(obj)
	if diff := cmp.Diff(want, obj, quantityCmp); diff != "" {
		t.Errorf("Default changed set fields (-before +after):\n%s", diff)
	}
}

func TestDefaultIsIdempotent(t *testing.T) {
	for name, obj := range map[string]*kubeletv1beta1.KubeletConfiguration{
		"empty":      {},
		"fully set":  fullySetConfig(),
		"realistic":  realisticConfig(),
		"merge":      {EvictionHard: map[string]string{"memory.available": "1Gi"}, MergeDefaultEvictionSettings: ptr.To(true)},
		"gates off":  {FeatureGates: map[string]bool{gateKubeletCrashLoopBackOffMax: false}},
		"update set": {NodeStatusUpdateFrequency: metav1.Duration{Duration: time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			Default(obj)
			once := obj.DeepCopy()
			Default(obj)
			if diff := cmp.Diff(once, obj, quantityCmp); diff != "" {
				t.Errorf("second Default changed the object (-first +second):\n%s", diff)
			}
		})
	}
}

// TestDefaultRules covers the defaults that depend on other fields.
func TestDefaultRules(t *testing.T) {
	tests := []struct {
		name  string
		in    kubeletv1beta1.KubeletConfiguration
		check func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration)
	}{
		{
			name: "negative podPidsLimit becomes -1",
			in:   kubeletv1beta1.KubeletConfiguration{PodPidsLimit: ptr.To[int64](-7)},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if diff := cmp.Diff(ptr.To[int64](-1), got.PodPidsLimit); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "zero podPidsLimit is kept",
			in:   kubeletv1beta1.KubeletConfiguration{PodPidsLimit: ptr.To[int64](0)},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if diff := cmp.Diff(ptr.To[int64](0), got.PodPidsLimit); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "report frequency follows an explicit update frequency",
			in:   kubeletv1beta1.KubeletConfiguration{NodeStatusUpdateFrequency: metav1.Duration{Duration: 4 * time.Second}},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				want := metav1.Duration{Duration: 4 * time.Second}
				if diff := cmp.Diff(want, got.NodeStatusReportFrequency); diff != "" {
					t.Error(diff)
				}
				if diff := cmp.Diff(want, got.NodeStatusUpdateFrequency); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "parallel pulls turn off serialized pulls",
			in:   kubeletv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptr.To[int32](3)},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if diff := cmp.Diff(ptr.To(false), got.SerializeImagePulls); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "one parallel pull keeps serialized pulls",
			in:   kubeletv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptr.To[int32](1)},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if diff := cmp.Diff(ptr.To(true), got.SerializeImagePulls); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "set evictionHard replaces the defaults without merge",
			in:   kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Gi"}},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if diff := cmp.Diff(map[string]string{"memory.available": "1Gi"}, got.EvictionHard); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "empty non-nil evictionHard stays empty",
			in:   kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{}},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if diff := cmp.Diff(map[string]string{}, got.EvictionHard); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "mergeDefaultEvictionSettings adds only missing signals",
			in: kubeletv1beta1.KubeletConfiguration{
				EvictionHard:                 map[string]string{"memory.available": "1Gi", "pid.available": "5%"},
				MergeDefaultEvictionSettings: ptr.To(true),
			},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				want := map[string]string{
					"memory.available": "1Gi", "pid.available": "5%",
					"nodefs.available": "10%", "nodefs.inodesFree": "5%",
					"imagefs.available": "15%", "imagefs.inodesFree": "5%",
				}
				if diff := cmp.Diff(want, got.EvictionHard); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "AllBeta=false turns off the beta gates the config does not set",
			in:   kubeletv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{featuregates.AllBeta: false, gateKubeletEnsureSecretPulledImages: true}},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if got.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
					t.Errorf("maxContainerRestartPeriod = %v, want nil (KubeletCrashLoopBackOffMax is beta)", got.CrashLoopBackOff.MaxContainerRestartPeriod)
				}
				if got.ImagePullCredentialsVerificationPolicy != kubeletv1beta1.NeverVerifyPreloadedImages {
					t.Errorf("imagePullCredentialsVerificationPolicy = %q, want the default (its gate is set explicitly)", got.ImagePullCredentialsVerificationPolicy)
				}
			},
		},
		{
			name: "reservedMemory limits are rounded up to milli-units",
			in: kubeletv1beta1.KubeletConfiguration{ReservedMemory: []kubeletv1beta1.MemoryReservation{
				{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("1.5u"), "hugepages-2Mi": resource.MustParse("2Mi")}},
			}},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				want := corev1.ResourceList{"memory": resource.MustParse("1m"), "hugepages-2Mi": resource.MustParse("2Mi")}
				if diff := cmp.Diff(want, got.ReservedMemory[0].Limits, quantityCmp); diff != "" {
					t.Error(diff)
				}
			},
		},
		{
			name: "gated defaults are skipped when their gates are off",
			in: kubeletv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{
				gateKubeletCrashLoopBackOffMax: false, gateKubeletEnsureSecretPulledImages: false,
			}},
			check: func(t *testing.T, got *kubeletv1beta1.KubeletConfiguration) {
				if got.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
					t.Errorf("maxContainerRestartPeriod = %v, want nil", got.CrashLoopBackOff.MaxContainerRestartPeriod)
				}
				if got.ImagePullCredentialsVerificationPolicy != "" {
					t.Errorf("imagePullCredentialsVerificationPolicy = %q, want empty", got.ImagePullCredentialsVerificationPolicy)
				}
				if errs := Validate(got); len(errs) != 0 {
					t.Errorf("defaulted config with gates off does not validate: %v", errs)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.in.DeepCopy()
			Default(obj)
			tc.check(t, obj)
		})
	}
}

// TestDefaultDoesNotModifySharedEvictionMap checks that merging the default
// signals copies the map instead of writing into one the caller may share.
func TestDefaultDoesNotModifySharedEvictionMap(t *testing.T) {
	shared := map[string]string{"memory.available": "1Gi"}
	obj := &kubeletv1beta1.KubeletConfiguration{EvictionHard: shared, MergeDefaultEvictionSettings: ptr.To(true)}
	Default(obj)
	if diff := cmp.Diff(map[string]string{"memory.available": "1Gi"}, shared); diff != "" {
		t.Errorf("shared map modified (-want +got):\n%s", diff)
	}
	if len(obj.EvictionHard) != 5 {
		t.Errorf("merged evictionHard has %d signals, want 5: %v", len(obj.EvictionHard), obj.EvictionHard)
	}
}

func TestDefaultNil(t *testing.T) {
	Default(nil) // must not panic
}
