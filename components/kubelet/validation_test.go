package kubelet

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// fieldErr is the part of a *field.Error a test pins down: which field, and
// what kind of problem.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func project(errs field.ErrorList) []fieldErr {
	var out []fieldErr
	for _, e := range errs {
		out = append(out, fieldErr{Type: e.Type, Field: e.Field})
	}
	return out
}

// validationCase mutates a defaulted empty configuration (which is valid) and
// lists the errors Validate must return, exactly and in order. want == nil
// means the mutated configuration must be valid: each rule has such a
// passing case next to its failing one, usually at the boundary.
type validationCase struct {
	name   string
	mutate func(kc *kubeletv1beta1.KubeletConfiguration)
	want   []fieldErr
}

func runValidationCases(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := &kubeletv1beta1.KubeletConfiguration{}
			Default(kc)
			tc.mutate(kc)
			before := kc.DeepCopy()
			errs := Validate(kc)
			if diff := cmp.Diff(tc.want, project(errs)); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s\nall errors: %v", diff, errs)
			}
			for _, e := range errs {
				if e.Field == "" || e.Detail == "" && e.Type != field.ErrorTypeNotSupported && e.Type != field.ErrorTypeDuplicate {
					t.Errorf("error without field path or detail: %#v", e)
				}
			}
			if diff := cmp.Diff(before, kc, quantityCmp, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("Validate modified its argument (-before +after):\n%s", diff)
			}
		})
	}
}

func invalid(path string) fieldErr      { return fieldErr{field.ErrorTypeInvalid, path} }
func required(path string) fieldErr     { return fieldErr{field.ErrorTypeRequired, path} }
func forbidden(path string) fieldErr    { return fieldErr{field.ErrorTypeForbidden, path} }
func notSupported(path string) fieldErr { return fieldErr{field.ErrorTypeNotSupported, path} }
func duplicate(path string) fieldErr    { return fieldErr{field.ErrorTypeDuplicate, path} }

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func TestValidateDefaultedIsClean(t *testing.T) {
	for name, kc := range map[string]*kubeletv1beta1.KubeletConfiguration{
		"empty":     {},
		"realistic": realisticConfig(),
	} {
		t.Run(name, func(t *testing.T) {
			Default(kc)
			if errs := Validate(kc); len(errs) != 0 {
				t.Errorf("Validate(defaulted %s config) = %v, want no errors", name, errs)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	errs := Validate(nil)
	if diff := cmp.Diff([]fieldErr{required("KubeletConfiguration")}, project(errs)); diff != "" {
		t.Errorf("Validate(nil) (-want +got):\n%s", diff)
	}
}

// TestValidateUndefaultedReportsEverything shows that Validate reads an
// undefaulted configuration as the kubelet would read it without defaults,
// and that it reports all problems at once.
func TestValidateUndefaultedReportsEverything(t *testing.T) {
	errs := Validate(&kubeletv1beta1.KubeletConfiguration{})
	if len(errs) < 5 {
		t.Fatalf("Validate(empty, undefaulted) = %v, want many errors", errs)
	}
	seen := map[string]bool{}
	for _, e := range errs {
		seen[e.Field] = true
	}
	// Fields an empty, undefaulted configuration gets an error for.
	for _, f := range []string{
		"nodeLeaseDurationSeconds", "imageGCLowThresholdPercent", "cgroupDriver",
		"containerRuntimeEndpoint", "podLogsDir", "containerLogMaxFiles", "memoryReservationPolicy",
		"port", "authorization.mode", "logging.format",
	} {
		if !seen[f] {
			t.Errorf("no error for %s in %v", f, errs)
		}
	}
}

// TestConsultedGatesAreKnown: every gate this package consults is in the
// generated table (a gate upstream removes must be noticed here).
func TestConsultedGatesAreKnown(t *testing.T) {
	for _, name := range []string{
		gateCustomCPUCFSQuotaPeriod, gateDefaultPodSysctls, gateGracefulNodeShutdown,
		gateGracefulNodeShutdownBasedOnPodPriority, gateImageMaximumGCAge, gateKubeletCrashLoopBackOffMax,
		gateKubeletEnsureSecretPulledImages, gateMemoryQoS, gateNodeLogQuery, gateNodeSwap,
		gateRotateKubeletServerCertificate, featuregates.LoggingAlphaOptions, featuregates.LoggingBetaOptions,
		featuregates.AllAlpha, featuregates.AllBeta,
	} {
		if _, ok := featuregates.Lookup(name); !ok {
			t.Errorf("feature gate %s is not in the gate table (package featuregates)", name)
		}
	}
}

func TestValidateFeatureGates(t *testing.T) {
	runValidationCases(t, []validationCase{
		{
			name:   "locked gate at its default",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) { kc.FeatureGates = map[string]bool{gateNodeSwap: true} },
		},
		{
			name: "locked gate moved",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				kc.FeatureGates = map[string]bool{gateNodeSwap: false, gateImageMaximumGCAge: false}
			},
			want: []fieldErr{forbidden("featureGates[ImageMaximumGCAge]"), forbidden("featureGates[NodeSwap]")},
		},
		{
			name: "unknown gates rejected, a case slip named",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				kc.FeatureGates = map[string]bool{"SomeFutureGate": true, "nodeswap": true}
			},
			want: []fieldErr{invalid("featureGates[SomeFutureGate]"), invalid("featureGates[nodeswap]")},
		},
		{
			name: "a dependency turned off",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				// GracefulNodeShutdownBasedOnPodPriority (on) needs it.
				kc.FeatureGates = map[string]bool{gateGracefulNodeShutdown: false, "WindowsGracefulNodeShutdown": false}
			},
			want: []fieldErr{invalid("featureGates[GracefulNodeShutdown]")},
		},
		{
			name: "a dependency turned off with its dependents",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				kc.FeatureGates = map[string]bool{
					gateGracefulNodeShutdown: false, gateGracefulNodeShutdownBasedOnPodPriority: false, "WindowsGracefulNodeShutdown": false,
				}
			},
		},
		{
			name: "AllBeta=false turns dependencies off too",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				// GracefulNodeShutdownBasedOnPodPriority stays on, its beta
				// dependency goes off with AllBeta.
				kc.FeatureGates = map[string]bool{featuregates.AllBeta: false, gateGracefulNodeShutdownBasedOnPodPriority: true}
			},
			want: []fieldErr{
				invalid("featureGates[GracefulNodeShutdownBasedOnPodPriority]"),
				// The base was defaulted with these beta gates on.
				forbidden("crashLoopBackOff.maxContainerRestartPeriod"),
				forbidden("imagePullCredentialsVerificationPolicy"),
			},
		},
		{
			name: "dependencies are not checked while a name is wrong",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				kc.FeatureGates = map[string]bool{gateGracefulNodeShutdown: false, "SomeFutureGate": true}
			},
			want: []fieldErr{invalid("featureGates[SomeFutureGate]")},
		},
		{
			name: "locked gate stays on for the fields it governs",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				kc.FeatureGates = map[string]bool{gateNodeSwap: false}
				kc.MemorySwap.SwapBehavior = "LimitedSwap"
			},
			want: []fieldErr{forbidden("featureGates[NodeSwap]")},
		},
		{
			// NodeLogQuery is locked on: turning it off is one error, on
			// featureGates, not a second one on the field it allows.
			name: "a locked gate set off stays on for the rules that read it",
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
				kc.FeatureGates = map[string]bool{gateNodeLogQuery: false}
				kc.EnableSystemLogQuery, kc.EnableSystemLogHandler = ptr.To(true), ptr.To(true)
			},
			want: []fieldErr{forbidden("featureGates[NodeLogQuery]")},
		},
	})
}

func TestValidateGeneral(t *testing.T) {
	set := func(f func(kc *kubeletv1beta1.KubeletConfiguration)) func(*kubeletv1beta1.KubeletConfiguration) {
		return f
	}
	runValidationCases(t, []validationCase{
		{"nodeLeaseDurationSeconds 1", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.NodeLeaseDurationSeconds = 1 }), nil},
		{"nodeLeaseDurationSeconds 0", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.NodeLeaseDurationSeconds = 0 }),
			[]fieldErr{invalid("nodeLeaseDurationSeconds")}},
		{"systemCgroups with cgroupRoot", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SystemCgroups, kc.CgroupRoot = "/system.slice", "/"
		}), nil},
		{"systemCgroups without cgroupRoot", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.SystemCgroups = "/system.slice" }),
			[]fieldErr{required("cgroupRoot")}},
		{"burst and qps zero", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EventBurst, kc.EventRecordQPS = 0, ptr.To[int32](0)
			kc.KubeAPIBurst, kc.KubeAPIQPS = 0, ptr.To[int32](0)
			kc.RegistryBurst, kc.RegistryPullQPS = 0, ptr.To[int32](0)
		}), nil},
		{"burst and qps negative", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EventBurst, kc.EventRecordQPS = -1, ptr.To[int32](-1)
			kc.KubeAPIBurst, kc.KubeAPIQPS = -1, ptr.To[int32](-1)
			kc.RegistryBurst, kc.RegistryPullQPS = -1, ptr.To[int32](-1)
		}), []fieldErr{
			invalid("eventBurst"), invalid("eventRecordQPS"), invalid("kubeAPIBurst"),
			invalid("kubeAPIQPS"), invalid("registryBurst"), invalid("registryPullQPS"),
		}},
		{"counts zero", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.MaxOpenFiles, kc.MaxPods, kc.PodsPerCore = 0, 0, 0
		}), nil},
		{"counts negative", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.MaxOpenFiles, kc.MaxPods, kc.PodsPerCore = -1, -1, -1
		}), []fieldErr{invalid("maxOpenFiles"), invalid("maxPods"), invalid("podsPerCore")}},
		{"nodeStatusMaxImages -1", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.NodeStatusMaxImages = ptr.To[int32](-1) }), nil},
		{"nodeStatusMaxImages -2", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.NodeStatusMaxImages = ptr.To[int32](-2) }),
			[]fieldErr{invalid("nodeStatusMaxImages")}},
		{"oomScoreAdj bounds", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.OOMScoreAdj = ptr.To[int32](-1000) }), nil},
		{"oomScoreAdj above", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.OOMScoreAdj = ptr.To[int32](1001) }),
			[]fieldErr{invalid("oomScoreAdj")}},
		{"oomScoreAdj below", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.OOMScoreAdj = ptr.To[int32](-1001) }),
			[]fieldErr{invalid("oomScoreAdj")}},
		{"iptables bits 0 and 31", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.IPTablesDropBit, kc.IPTablesMasqueradeBit = ptr.To[int32](0), ptr.To[int32](31)
		}), nil},
		{"iptables bits out of range", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.IPTablesDropBit, kc.IPTablesMasqueradeBit = ptr.To[int32](32), ptr.To[int32](-1)
		}), []fieldErr{invalid("iptablesDropBit"), invalid("iptablesMasqueradeBit")}},
		{"cpuCFSQuotaPeriod default without gate", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.CPUCFSQuotaPeriod = ptr.To(dur(100 * time.Millisecond))
		}), nil},
		{"cpuCFSQuotaPeriod changed with the gate off", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateCustomCPUCFSQuotaPeriod: false}
			kc.CPUCFSQuotaPeriod = ptr.To(dur(50 * time.Millisecond))
		}), []fieldErr{forbidden("cpuCFSQuotaPeriod")}},
		{"cpuCFSQuotaPeriod 1ms with gate", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateCustomCPUCFSQuotaPeriod: true}
			kc.CPUCFSQuotaPeriod = ptr.To(dur(time.Millisecond))
		}), nil},
		{"cpuCFSQuotaPeriod above 1s with gate", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateCustomCPUCFSQuotaPeriod: true}
			kc.CPUCFSQuotaPeriod = ptr.To(dur(time.Second + time.Nanosecond))
		}), []fieldErr{invalid("cpuCFSQuotaPeriod")}},
		{"maxParallelImagePulls with serialized pulls off", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SerializeImagePulls, kc.MaxParallelImagePulls = ptr.To(false), ptr.To[int32](10)
		}), nil},
		{"maxParallelImagePulls 1 with serialized pulls", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SerializeImagePulls, kc.MaxParallelImagePulls = ptr.To(true), ptr.To[int32](1)
		}), nil},
		{"maxParallelImagePulls 0", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SerializeImagePulls, kc.MaxParallelImagePulls = ptr.To(false), ptr.To[int32](0)
		}), []fieldErr{invalid("maxParallelImagePulls")}},
		{"maxParallelImagePulls 2 with serialized pulls", set(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SerializeImagePulls, kc.MaxParallelImagePulls = ptr.To(true), ptr.To[int32](2)
		}), []fieldErr{invalid("maxParallelImagePulls")}},
		{"runOnce set", set(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.RunOnce = true }),
			[]fieldErr{forbidden("runOnce")}},
	})
}

func TestValidateImageGC(t *testing.T) {
	runValidationCases(t, []validationCase{
		{name: "thresholds at the edges", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageGCLowThresholdPercent, kc.ImageGCHighThresholdPercent = ptr.To[int32](0), ptr.To[int32](100)
		}},
		{name: "high above 100", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageGCHighThresholdPercent = ptr.To[int32](101)
		}, want: []fieldErr{invalid("imageGCHighThresholdPercent")}},
		{name: "low negative", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageGCLowThresholdPercent = ptr.To[int32](-1)
		}, want: []fieldErr{invalid("imageGCLowThresholdPercent")}},
		{name: "low equal to high", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageGCLowThresholdPercent, kc.ImageGCHighThresholdPercent = ptr.To[int32](70), ptr.To[int32](70)
		}, want: []fieldErr{invalid("imageGCLowThresholdPercent")}},
		{name: "maximum age above minimum", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageMinimumGCAge, kc.ImageMaximumGCAge = dur(time.Hour), dur(time.Hour+time.Second)
		}},
		{name: "maximum age not above minimum", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageMinimumGCAge, kc.ImageMaximumGCAge = dur(time.Hour), dur(time.Hour)
		}, want: []fieldErr{invalid("imageMaximumGCAge")}},
		{name: "negative ages", mutate: func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageMinimumGCAge, kc.ImageMaximumGCAge = dur(-time.Second), dur(-time.Second)
		}, want: []fieldErr{invalid("imageMinimumGCAge"), invalid("imageMaximumGCAge")}},
	})
}

func TestValidateEnums(t *testing.T) {
	type enumCase struct {
		path   string
		good   []string
		bad    string
		assign func(kc *kubeletv1beta1.KubeletConfiguration, v string)
	}
	enums := []enumCase{
		{"topologyManagerPolicy", []string{"none", "best-effort", "restricted", "single-numa-node"}, "Restricted",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) { kc.TopologyManagerPolicy = v }},
		{"topologyManagerScope", []string{"container", "pod"}, "node",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) { kc.TopologyManagerScope = v }},
		{"hairpinMode", []string{"none", "hairpin-veth", "promiscuous-bridge"}, "veth",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) { kc.HairpinMode = v }},
		{"cgroupDriver", []string{"cgroupfs", "systemd"}, "Systemd",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) { kc.CgroupDriver = v }},
		{"cpuManagerPolicy", []string{"none", "static"}, "None",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) { kc.CPUManagerPolicy = v }},
		{"memoryManagerPolicy", []string{"None", "Static"}, "none",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) { kc.MemoryManagerPolicy = v }},
		{"configMapAndSecretChangeDetectionStrategy", []string{"Get", "Cache", "Watch"}, "Poll",
			func(kc *kubeletv1beta1.KubeletConfiguration, v string) {
				kc.ConfigMapAndSecretChangeDetectionStrategy = kubeletv1beta1.ResourceChangeDetectionStrategy(v)
			}},
	}
	var cases []validationCase
	for _, e := range enums {
		for _, good := range e.good {
			cases = append(cases, validationCase{
				name:   e.path + "=" + good,
				mutate: func(kc *kubeletv1beta1.KubeletConfiguration) { e.assign(kc, good) },
			})
		}
		cases = append(cases, validationCase{
			name:   e.path + "=" + e.bad,
			mutate: func(kc *kubeletv1beta1.KubeletConfiguration) { e.assign(kc, e.bad) },
			want:   []fieldErr{notSupported(e.path)},
		})
	}
	runValidationCases(t, cases)
}

// TestFeatureGateMessages pins the exact errors of featureGates, wording
// included: each profile words them as its component does.
func TestFeatureGateMessages(t *testing.T) {
	at := field.NewPath("featureGates").Key
	for _, tc := range []struct {
		gates map[string]bool
		want  field.ErrorList
	}{
		{map[string]bool{"SomeFutureGate": true, "nodeswap": true, gateImageMaximumGCAge: false}, field.ErrorList{
			field.Forbidden(at(gateImageMaximumGCAge), "feature gate ImageMaximumGCAge is locked to true"),
			field.Invalid(at("SomeFutureGate"), "SomeFutureGate", "not a feature gate of the kubelet of Kubernetes 1.37"),
			field.Invalid(at("nodeswap"), "nodeswap", "not a feature gate of the kubelet of Kubernetes 1.37 (gate names are case-sensitive: did you mean NodeSwap?)"),
		}},
		{map[string]bool{gateGracefulNodeShutdown: false, "WindowsGracefulNodeShutdown": false}, field.ErrorList{
			field.Invalid(at(gateGracefulNodeShutdown), false,
				"feature gate GracefulNodeShutdownBasedOnPodPriority is enabled but depends on GracefulNodeShutdown, which the configuration disables"),
		}},
	} {
		kc := &kubeletv1beta1.KubeletConfiguration{}
		Default(kc)
		kc.FeatureGates = tc.gates
		if diff := cmp.Diff(tc.want, Validate(kc)); diff != "" {
			t.Errorf("Validate() with featureGates %v (-want +got):\n%s", tc.gates, diff)
		}
	}
}
