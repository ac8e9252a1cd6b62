package kubelet

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func typeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: Kind}
}

// fullySetConfig returns a configuration in which every field, at every
// level, holds a value different from both the zero value and the kubelet's
// default. It is not meant to be valid; TestFullySetConfigSetsEveryField
// keeps it complete when the upstream type grows.
func fullySetConfig() *kubeletv1beta1.KubeletConfiguration {
	d := func(s string) metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			panic(err)
		}
		return metav1.Duration{Duration: v}
	}
	dp := func(s string) *metav1.Duration { v := d(s); return &v }
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:            typeMeta(),
		EnableServer:        ptr.To(false),
		StaticPodPath:       "/etc/kubernetes/manifests",
		PodLogsDir:          "/srv/pod-logs",
		SyncFrequency:       d("2m"),
		FileCheckFrequency:  d("21s"),
		HTTPCheckFrequency:  d("22s"),
		StaticPodURL:        "https://example.test/pods",
		StaticPodURLHeader:  map[string][]string{"X-Token": {"a", "b"}},
		Address:             "10.0.0.5",
		Port:                10260,
		ReadOnlyPort:        10255,
		TLSCertFile:         "/var/lib/kubelet/pki/kubelet.crt",
		TLSPrivateKeyFile:   "/var/lib/kubelet/pki/kubelet.key",
		TLSCipherSuites:     []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		TLSCurvePreferences: []int32{23},
		TLSMinVersion:       "VersionTLS13",
		RotateCertificates:  true,
		ServerTLSBootstrap:  true,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: "/etc/kubernetes/pki/ca.crt"},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false), CacheTTL: d("3m")},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{
			Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow,
			Webhook: kubeletv1beta1.KubeletWebhookAuthorization{
				CacheAuthorizedTTL:   d("6m"),
				CacheUnauthorizedTTL: d("31s"),
			},
		},
		RegistryPullQPS:                        ptr.To[int32](0),
		RegistryBurst:                          11,
		ImagePullCredentialsVerificationPolicy: kubeletv1beta1.NeverVerifyAllowlistedImages,
		PreloadedImagesVerificationAllowlist:   []string{"registry.example.test/pause"},
		EventRecordQPS:                         ptr.To[int32](0),
		EventBurst:                             101,
		EnableDebuggingHandlers:                ptr.To(false),
		EnableContentionProfiling:              true,
		HealthzPort:                            ptr.To[int32](0),
		HealthzBindAddress:                     "0.0.0.0",
		OOMScoreAdj:                            ptr.To[int32](0),
		ClusterDomain:                          "cluster.local",
		ClusterDNS:                             []string{"10.96.0.10"},
		StreamingConnectionIdleTimeout:         d("5h"),
		NodeStatusUpdateFrequency:              d("11s"),
		NodeStatusReportFrequency:              d("6m"),
		NodeLeaseDurationSeconds:               41,
		ImageMinimumGCAge:                      d("3m"),
		ImageMaximumGCAge:                      d("72h"),
		ImageGCHighThresholdPercent:            ptr.To[int32](0),
		ImageGCLowThresholdPercent:             ptr.To[int32](0),
		VolumeStatsAggPeriod:                   d("2m"),
		KubeletCgroups:                         "/kubelet.slice",
		SystemCgroups:                          "/system.slice",
		CgroupRoot:                             "/",
		CgroupsPerQOS:                          ptr.To(false),
		CgroupDriver:                           "systemd",
		CPUManagerPolicy:                       "static",
		SingleProcessOOMKill:                   ptr.To(true),
		CPUManagerPolicyOptions:                map[string]string{"full-pcpus-only": "true"},
		CPUManagerReconcilePeriod:              d("12s"),
		MemoryManagerPolicy:                    kubeletv1beta1.StaticMemoryManagerPolicy,
		TopologyManagerPolicy:                  kubeletv1beta1.SingleNumaNodeTopologyManagerPolicy,
		TopologyManagerScope:                   kubeletv1beta1.PodTopologyManagerScope,
		TopologyManagerPolicyOptions:           map[string]string{"prefer-closest-numa-nodes": "true"},
		QOSReserved:                            map[string]string{"memory": "50%"},
		RuntimeRequestTimeout:                  d("3m"),
		HairpinMode:                            kubeletv1beta1.HairpinVeth,
		MaxPods:                                250,
		PodCIDR:                                "10.244.0.0/24",
		PodPidsLimit:                           ptr.To[int64](4096),
		ResolverConfig:                         ptr.To(""),
		RunOnce:                                true,
		CPUCFSQuota:                            ptr.To(false),
		CPUCFSQuotaPeriod:                      dp("50ms"),
		NodeStatusMaxImages:                    ptr.To[int32](0),
		MaxOpenFiles:                           2000000,
		ContentType:                            "application/json",
		KubeAPIQPS:                             ptr.To[int32](0),
		KubeAPIBurst:                           200,
		SerializeImagePulls:                    ptr.To(true),
		MaxParallelImagePulls:                  ptr.To[int32](5),
		EvictionHard:                           map[string]string{"memory.available": "500Mi"},
		EvictionSoft:                           map[string]string{"memory.available": "1Gi"},
		EvictionSoftGracePeriod:                map[string]string{"memory.available": "1m30s"},
		EvictionPressureTransitionPeriod:       d("30s"),
		EvictionMaxPodGracePeriod:              60,
		EvictionMinimumReclaim:                 map[string]string{"memory.available": "200Mi"},
		MergeDefaultEvictionSettings:           ptr.To(true),
		PodsPerCore:                            10,
		EnableControllerAttachDetach:           ptr.To(false),
		ProtectKernelDefaults:                  true,
		MakeIPTablesUtilChains:                 ptr.To(false),
		IPTablesMasqueradeBit:                  ptr.To[int32](0),
		IPTablesDropBit:                        ptr.To[int32](0),
		FeatureGates: map[string]bool{
			gateKubeletCrashLoopBackOffMax:      false,
			gateKubeletEnsureSecretPulledImages: false,
		},
		FailSwapOn:                                ptr.To(false),
		MemorySwap:                                kubeletv1beta1.MemorySwapConfiguration{SwapBehavior: "LimitedSwap"},
		ContainerLogMaxSize:                       "50Mi",
		ContainerLogMaxFiles:                      ptr.To[int32](0),
		ContainerLogMaxWorkers:                    ptr.To[int32](0),
		ContainerLogMonitorInterval:               dp("15s"),
		ConfigMapAndSecretChangeDetectionStrategy: kubeletv1beta1.GetChangeDetectionStrategy,
		SystemReserved:                            map[string]string{"cpu": "500m"},
		KubeReserved:                              map[string]string{"memory": "1Gi"},
		ReservedSystemCPUs:                        "0-1",
		ShowHiddenMetricsForVersion:               "1.36",
		SystemReservedCgroup:                      "/system.slice",
		KubeReservedCgroup:                        "/kube.slice",
		EnforceNodeAllocatable:                    []string{},
		AllowedUnsafeSysctls:                      []string{"net.core.somaxconn"},
		DefaultPodSysctls:                         map[string]string{"net.ipv4.ip_forward": "1"},
		VolumePluginDir:                           "/opt/volume-plugins",
		ProviderID:                                "aws:///us-east-1a/i-0123",
		KernelMemcgNotification:                   true,
		Logging: logsapi.LoggingConfiguration{
			Format:         "json",
			FlushFrequency: logsapi.TimeOrMetaDuration{Duration: d("7s"), SerializeAsString: true},
			Verbosity:      4,
			VModule:        logsapi.VModuleConfiguration{{FilePattern: "kubelet*", Verbosity: 5}},
			Options: logsapi.FormatOptions{
				Text: logsapi.TextOptions{OutputRoutingOptions: logsapi.OutputRoutingOptions{
					SplitStream: true, InfoBufferSize: resource.QuantityValue{Quantity: resource.MustParse("1Mi")},
				}},
				JSON: logsapi.JSONOptions{OutputRoutingOptions: logsapi.OutputRoutingOptions{
					SplitStream: true, InfoBufferSize: resource.QuantityValue{Quantity: resource.MustParse("2Mi")},
				}},
			},
		},
		EnableSystemLogHandler:          ptr.To(false),
		EnableSystemLogQuery:            ptr.To(true),
		ShutdownGracePeriod:             d("30s"),
		ShutdownGracePeriodCriticalPods: d("10s"),
		ShutdownGracePeriodByPodPriority: []kubeletv1beta1.ShutdownGracePeriodByPodPriority{
			{Priority: 100000, ShutdownGracePeriodSeconds: 10},
		},
		CrashLoopBackOff: kubeletv1beta1.CrashLoopBackOffConfig{MaxContainerRestartPeriod: dp("1m")},
		ReservedMemory: []kubeletv1beta1.MemoryReservation{
			{NumaNode: 0, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		},
		EnableProfilingHandler:  ptr.To(false),
		EnableDebugFlagsHandler: ptr.To(false),
		SeccompDefault:          ptr.To(true),
		MemoryThrottlingFactor:  ptr.To(0.7),
		MemoryReservationPolicy: kubeletv1beta1.TieredReservationMemoryReservationPolicy,
		RegisterWithTaints: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		},
		RegisterNode: ptr.To(false),
		Tracing: &tracingapi.TracingConfiguration{
			Endpoint:               ptr.To("localhost:4317"),
			SamplingRatePerMillion: ptr.To[int32](100),
		},
		LocalStorageCapacityIsolation: ptr.To(false),
		ContainerRuntimeEndpoint:      "unix:///run/crio/crio.sock",
		ImageServiceEndpoint:          "unix:///run/crio/crio-images.sock",
		FailCgroupV1:                  ptr.To(false),
		UserNamespaces:                &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](131072)},
	}
}

// TestFullySetConfigSetsEveryField fails when KubeletConfiguration (or one of
// its nested structs) gains a field that fullySetConfig leaves unset, so the
// no-overwrite test keeps covering the whole type. A non-nil pointer counts as
// set whatever it points to (false and 0 are legitimate explicit values).
func TestFullySetConfigSetsEveryField(t *testing.T) {
	var walk func(path string, v reflect.Value, viaPointer bool)
	walk = func(path string, v reflect.Value, viaPointer bool) {
		switch v.Kind() {
		case reflect.Struct:
			if q, ok := v.Interface().(resource.Quantity); ok {
				if q.IsZero() {
					t.Errorf("%s is zero", path)
				}
				return
			}
			for i := 0; i < v.NumField(); i++ {
				if f := v.Type().Field(i); f.IsExported() {
					walk(path+"."+f.Name, v.Field(i), false)
				}
			}
		case reflect.Pointer:
			if v.IsNil() {
				t.Errorf("%s is nil", path)
				return
			}
			walk(path, v.Elem(), true)
		case reflect.Map, reflect.Slice:
			if v.IsNil() {
				t.Errorf("%s is nil", path)
			}
		default:
			if v.IsZero() && !viaPointer {
				t.Errorf("%s is the zero value", path)
			}
		}
	}
	walk("KubeletConfiguration", reflect.ValueOf(fullySetConfig()).Elem(), false)
}

// quantityCmp compares resource quantities by value; their cached string form
// is not part of their meaning.
var quantityCmp = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// realisticConfig returns the kind of configuration a provisioning tool
// writes for a production node (kubeadm and EKS style): explicit auth,
// reservations, eviction thresholds, graceful shutdown, TLS settings and a
// few feature gates. It is valid once defaulted.
func realisticConfig() *kubeletv1beta1.KubeletConfiguration {
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta: typeMeta(),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: "/etc/kubernetes/pki/ca.crt"},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:            kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		CgroupDriver:             "systemd",
		ClusterDNS:               []string{"10.96.0.10", "fd00::a"},
		ClusterDomain:            "cluster.local",
		ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
		RotateCertificates:       true,
		ServerTLSBootstrap:       true,
		TLSMinVersion:            "VersionTLS12",
		TLSCipherSuites: []string{
			"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
			"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
		},
		StaticPodPath:          "/etc/kubernetes/manifests",
		MaxPods:                58,
		KubeAPIQPS:             ptr.To[int32](10),
		KubeAPIBurst:           20,
		SerializeImagePulls:    ptr.To(false),
		MaxParallelImagePulls:  ptr.To[int32](4),
		RegistryPullQPS:        ptr.To[int32](10),
		RegistryBurst:          20,
		ProtectKernelDefaults:  true,
		ReadOnlyPort:           0,
		SystemReserved:         map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"},
		KubeReserved:           map[string]string{"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi", "pid": "1000"},
		KubeReservedCgroup:     "/runtime",
		SystemReservedCgroup:   "/system",
		EnforceNodeAllocatable: []string{"pods"},
		EvictionHard: map[string]string{
			"memory.available": "500Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%", "pid.available": "10%",
		},
		EvictionSoft:                    map[string]string{"memory.available": "1Gi", "nodefs.available": "15%"},
		EvictionSoftGracePeriod:         map[string]string{"memory.available": "1m30s", "nodefs.available": "2m"},
		EvictionMinimumReclaim:          map[string]string{"memory.available": "200Mi", "nodefs.available": "1Gi"},
		EvictionMaxPodGracePeriod:       60,
		ShutdownGracePeriod:             metav1.Duration{Duration: 45 * time.Second},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: 15 * time.Second},
		ContainerLogMaxSize:             "50Mi",
		ContainerLogMaxFiles:            ptr.To[int32](5),
		RegisterWithTaints: []corev1.Taint{
			{Key: "node.example.com/pool", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		},
		FeatureGates: map[string]bool{"RotateKubeletServerCertificate": true, "MemoryQoS": false},
		Tracing: &tracingapi.TracingConfiguration{
			Endpoint:               ptr.To("localhost:4317"),
			SamplingRatePerMillion: ptr.To[int32](100),
		},
	}
}
