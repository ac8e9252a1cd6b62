package kubelet

import (
	"math"
	"testing"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

type mutation = func(kc *kubeletv1beta1.KubeletConfiguration)

func TestValidateShutdown(t *testing.T) {
	periods := func(period, critical time.Duration) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ShutdownGracePeriod, kc.ShutdownGracePeriodCriticalPods = dur(period), dur(critical)
		}
	}
	// gatesOff turns the named gates off, and the gates that depend on them
	// (the kubelet refuses a dependency turned off under an enabled gate).
	gatesOff := func(m mutation, names ...string) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			m(kc)
			kc.FeatureGates = map[string]bool{}
			for _, n := range names {
				kc.FeatureGates[n] = false
				for _, dependent := range featuregates.Dependents(n) {
					kc.FeatureGates[dependent] = false
				}
			}
		}
	}
	byPriority := func(period time.Duration, entries ...kubeletv1beta1.ShutdownGracePeriodByPodPriority) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ShutdownGracePeriod = dur(period)
			kc.ShutdownGracePeriodByPodPriority = entries
		}
	}
	entry := func(priority int32, seconds int64) kubeletv1beta1.ShutdownGracePeriodByPodPriority {
		return kubeletv1beta1.ShutdownGracePeriodByPodPriority{Priority: priority, ShutdownGracePeriodSeconds: seconds}
	}
	runValidationCases(t, []validationCase{
		{"periods 30s and 10s", periods(30*time.Second, 10*time.Second), nil},
		{"periods at 1s", periods(time.Second, time.Second), nil},
		{"critical longer than total", periods(10*time.Second, 20*time.Second),
			[]fieldErr{invalid("shutdownGracePeriodCriticalPods")}},
		{"sub-second periods", periods(500*time.Millisecond, 200*time.Millisecond),
			[]fieldErr{invalid("shutdownGracePeriod"), invalid("shutdownGracePeriodCriticalPods")}},
		// As upstream, a negative total is also shorter than the critical period.
		{"negative period", periods(-time.Second, 0),
			[]fieldErr{invalid("shutdownGracePeriodCriticalPods"), invalid("shutdownGracePeriod")}},
		{"periods without gate", gatesOff(periods(30*time.Second, 10*time.Second), gateGracefulNodeShutdown),
			[]fieldErr{forbidden("shutdownGracePeriod"), forbidden("shutdownGracePeriodCriticalPods")}},
		{"zero periods without gate", gatesOff(periods(0, 0), gateGracefulNodeShutdown), nil},
		{"by priority", byPriority(0, entry(100000, 10), entry(0, 30)), nil},
		{"by priority together with period", byPriority(30*time.Second, entry(0, 30)),
			[]fieldErr{forbidden("shutdownGracePeriodByPodPriority")}},
		{"by priority without gate", gatesOff(byPriority(0, entry(0, 30)), gateGracefulNodeShutdownBasedOnPodPriority),
			[]fieldErr{forbidden("shutdownGracePeriodByPodPriority")}},
		{"by priority negative seconds and duplicate priority", byPriority(0, entry(10, 5), entry(10, -1)),
			[]fieldErr{
				invalid("shutdownGracePeriodByPodPriority[1].shutdownGracePeriodSeconds"),
				duplicate("shutdownGracePeriodByPodPriority[1].priority"),
			}},
	})
}

func TestValidateRuntime(t *testing.T) {
	runValidationCases(t, []validationCase{
		{"containerRuntimeEndpoint set", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ContainerRuntimeEndpoint = "unix:///run/crio/crio.sock"
		}, nil},
		{"containerRuntimeEndpoint empty", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ContainerRuntimeEndpoint = "" },
			[]fieldErr{required("containerRuntimeEndpoint")}},
		{"swap LimitedSwap", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemorySwap.SwapBehavior = "LimitedSwap" }, nil},
		{"swap NoSwap", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemorySwap.SwapBehavior = "NoSwap" }, nil},
		{"swap UnlimitedSwap", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemorySwap.SwapBehavior = "UnlimitedSwap" },
			[]fieldErr{notSupported("memorySwap.swapBehavior")}},
		{"restart period 1s", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.CrashLoopBackOff.MaxContainerRestartPeriod = ptr.To(dur(time.Second))
		}, nil},
		{"restart period 300s", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.CrashLoopBackOff.MaxContainerRestartPeriod = ptr.To(dur(300 * time.Second))
		}, nil},
		{"restart period 301s", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.CrashLoopBackOff.MaxContainerRestartPeriod = ptr.To(dur(301 * time.Second))
		}, []fieldErr{invalid("crashLoopBackOff.maxContainerRestartPeriod")}},
		{"restart period 999ms", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.CrashLoopBackOff.MaxContainerRestartPeriod = ptr.To(dur(999 * time.Millisecond))
		}, []fieldErr{invalid("crashLoopBackOff.maxContainerRestartPeriod")}},
		{"restart period missing with gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.CrashLoopBackOff.MaxContainerRestartPeriod = nil
		}, []fieldErr{required("crashLoopBackOff.maxContainerRestartPeriod")}},
		{"restart period set without gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateKubeletCrashLoopBackOffMax: false}
		}, []fieldErr{forbidden("crashLoopBackOff.maxContainerRestartPeriod")}},
		{"throttling factor 1", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemoryThrottlingFactor = ptr.To(1.0) }, nil},
		{"throttling factor 0", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemoryThrottlingFactor = ptr.To(0.0) },
			[]fieldErr{invalid("memoryThrottlingFactor")}},
		{"throttling factor above 1", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemoryThrottlingFactor = ptr.To(1.01) },
			[]fieldErr{invalid("memoryThrottlingFactor")}},
		{"throttling factor NaN", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.MemoryThrottlingFactor = ptr.To(math.NaN()) },
			[]fieldErr{invalid("memoryThrottlingFactor")}},
		{"TieredReservation with MemoryQoS", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateMemoryQoS: true}
			kc.MemoryReservationPolicy = kubeletv1beta1.TieredReservationMemoryReservationPolicy
		}, nil},
		{"TieredReservation with MemoryQoS off", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateMemoryQoS: false}
			kc.MemoryReservationPolicy = kubeletv1beta1.TieredReservationMemoryReservationPolicy
		}, []fieldErr{forbidden("memoryReservationPolicy")}},
		{"memoryThrottlingFactor with MemoryQoS off", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateMemoryQoS: false}
			kc.MemoryThrottlingFactor = ptr.To(0.8)
		}, []fieldErr{forbidden("memoryThrottlingFactor")}},
		{"memoryThrottlingFactor 0.9 with MemoryQoS off", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateMemoryQoS: false}
			kc.MemoryThrottlingFactor = ptr.To(0.9)
		}, nil},
		{"unknown memoryReservationPolicy", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.MemoryReservationPolicy = "Tiered"
		}, []fieldErr{notSupported("memoryReservationPolicy")}},
		{"idsPerPod 65536 and 4294901760", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](4294901760)}
		}, nil},
		{"idsPerPod not a multiple", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](65537)}
		}, []fieldErr{invalid("userNamespaces.idsPerPod")}},
		{"idsPerPod 2^32", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](1 << 32)}
		}, []fieldErr{invalid("userNamespaces.idsPerPod")}},
		{"idsPerPod zero", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](0)}
		}, []fieldErr{invalid("userNamespaces.idsPerPod")}},
	})
}

func TestValidateImageCredentialPolicy(t *testing.T) {
	allow := func(patterns ...string) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.NeverVerifyAllowlistedImages
			kc.PreloadedImagesVerificationAllowlist = patterns
		}
	}
	runValidationCases(t, []validationCase{
		{"each policy", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImagePullCredentialsVerificationPolicy = "AlwaysVerify"
		}, nil},
		{"unknown policy", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ImagePullCredentialsVerificationPolicy = "Sometimes" },
			[]fieldErr{notSupported("imagePullCredentialsVerificationPolicy")}},
		{"empty policy with gate on", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ImagePullCredentialsVerificationPolicy = "" },
			[]fieldErr{notSupported("imagePullCredentialsVerificationPolicy")}},
		{"policy and list without gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateKubeletEnsureSecretPulledImages: false}
			kc.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/pause"}
		}, []fieldErr{forbidden("imagePullCredentialsVerificationPolicy"), forbidden("preloadedImagesVerificationAllowlist")}},
		{"list with another policy", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.PreloadedImagesVerificationAllowlist = []string{"registry.k8s.io/pause"}
		}, []fieldErr{forbidden("preloadedImagesVerificationAllowlist")}},
		{"good patterns", allow(
			"registry.k8s.io/pause", "registry.k8s.io/*", "localhost:5000/team/app", "Registry.Example.COM/app",
			"pause", "quay.io/org/some_app-2.x", "docker.io/Library/*",
		), nil},
		{"bad patterns", allow(
			" registry.k8s.io/pause", "registry.k8s.io/pause:3.10", "registry.k8s.io/pause@sha256:abc",
			"registry.k8s.io/pa*", "/*", "registry.k8s.io/", "registry.k8s.io//pause", "registry.k8s.io/Pause", "*",
		), []fieldErr{
			invalid("preloadedImagesVerificationAllowlist[0]"), invalid("preloadedImagesVerificationAllowlist[1]"),
			invalid("preloadedImagesVerificationAllowlist[2]"), invalid("preloadedImagesVerificationAllowlist[3]"),
			invalid("preloadedImagesVerificationAllowlist[4]"), invalid("preloadedImagesVerificationAllowlist[5]"),
			invalid("preloadedImagesVerificationAllowlist[6]"), invalid("preloadedImagesVerificationAllowlist[7]"),
			invalid("preloadedImagesVerificationAllowlist[8]"),
		}},
	})
}

func TestValidateLogsAndHandlers(t *testing.T) {
	runValidationCases(t, []validationCase{
		{"log rotation minimums", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ContainerLogMaxWorkers, kc.ContainerLogMaxFiles = ptr.To[int32](1), ptr.To[int32](2)
			kc.ContainerLogMonitorInterval = ptr.To(dur(3 * time.Second))
		}, nil},
		{"log rotation below minimums", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ContainerLogMaxWorkers, kc.ContainerLogMaxFiles = ptr.To[int32](0), ptr.To[int32](1)
			kc.ContainerLogMonitorInterval = ptr.To(dur(2999 * time.Millisecond))
		}, []fieldErr{invalid("containerLogMaxWorkers"), invalid("containerLogMonitorInterval"), invalid("containerLogMaxFiles")}},
		{"log max size 0", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ContainerLogMaxSize = "0" }, nil},
		{"log max size bad", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ContainerLogMaxSize = "10 MB" },
			[]fieldErr{invalid("containerLogMaxSize")}},
		// As upstream: a negative size turns log rotation off.
		{"log max size negative", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ContainerLogMaxSize = "-1Mi" }, nil},
		{"log max size fractional", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ContainerLogMaxSize = "1.5" },
			[]fieldErr{invalid("containerLogMaxSize")}},
		{"podLogsDir other", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.PodLogsDir = "/srv/logs/pods" }, nil},
		{"podLogsDir empty", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.PodLogsDir = "" },
			[]fieldErr{required("podLogsDir")}},
		{"podLogsDir relative", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.PodLogsDir = "var/log/pods" },
			[]fieldErr{invalid("podLogsDir")}},
		{"podLogsDir unclean", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.PodLogsDir = "/var/log/pods/" },
			[]fieldErr{invalid("podLogsDir")}},
		{"podLogsDir not ASCII", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.PodLogsDir = "/var/log/pöds" },
			[]fieldErr{invalid("podLogsDir")}},
		{"system log query with gate and handler", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateNodeLogQuery: true}
			kc.EnableSystemLogQuery = ptr.To(true)
		}, nil},
		// NodeLogQuery is GA and locked on in 1.37.
		{"system log query without handler", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EnableSystemLogQuery, kc.EnableSystemLogHandler = ptr.To(true), ptr.To(false)
		}, []fieldErr{forbidden("enableSystemLogQuery")}},
		{"hidden metrics of the previous minor", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ShowHiddenMetricsForVersion = "1.36"
		}, nil},
		{"hidden metrics of an older minor", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ShowHiddenMetricsForVersion = "1.35"
		}, []fieldErr{invalid("showHiddenMetricsForVersion")}},
	})
}
