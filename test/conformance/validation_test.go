package conformance

import (
	"errors"
	"math"
	"math/rand"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	libcontainercgroups "github.com/opencontainers/cgroups"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	metricsapi "k8s.io/component-base/metrics/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/eviction"

	"github.com/dynconfig/dynconfig/components/kubelet"
)

// validationCases is how many configurations TestKubeletValidation
// generates per run (a tenth with -short).
const validationCases = 3000

// TestKubeletValidation: on generated configurations, valid and invalid,
// kubelet.Validate and the kubelet agree on accept or reject and on the
// fields at fault.
//
// "The kubelet" is ValidateKubeletConfiguration (on the configuration
// converted to the internal type through the kubelet's scheme, with the
// kubelet's feature gates) plus the startup checks the kubelet makes later
// and that this package makes up front (startupChecks: the upstream parsers
// where they are exported, the upstream rule otherwise). The fields are
// compared at the granularity upstream's messages have: a path up to its
// first map key or list index ("evictionHard", "featureGates",
// "logging.vmodule"), the four eviction maps as one ("eviction", since the
// kubelet parses them together and reports the first problem).
//
// The only differences allowed are the ones components/kubelet/doc.go lists
// (TestKubeletDocumentedDifferences checks that the lists agree):
// stricterChecks, which we reject and the kubelet accepts, each applying only
// to the configurations its rule describes; and the host-dependent checks in
// hostDependent, which are taken out of the comparison.
func TestKubeletValidation(t *testing.T) {
	var accepted, rejected, gatesRejected int
	forEachCase(t, 2_000_000, validationCases, func(t *testing.T, seed int64, r *rand.Rand) {
		kc := validationInput(r)

		upstream, gatesErr := upstreamValidationPaths(t, kc)
		ours := ourValidationPaths(kubelet.Validate(kc))

		if gatesErr != nil {
			// The kubelet stops at its first featureGates problem; we must
			// reject the map too.
			if !ours["featureGates"] {
				t.Errorf("seed %d: the kubelet rejects featureGates (%v), we do not; our errors: %v\ninput:\n%s", seed, gatesErr, sortedSet(ours), dump(kc))
			}
			rejected++
			gatesRejected++
			return
		}
		for p := range ours {
			if upstream[p] {
				continue
			}
			if c := stricterCheck(p, kc); c == nil {
				t.Errorf("seed %d: we reject %s, the kubelet does not, and no listed difference explains it\nupstream errors: %v\nour errors: %v\ninput:\n%s",
					seed, p, sortedSet(upstream), kubelet.Validate(kc), dump(kc))
			}
		}
		for p := range upstream {
			if !ours[p] {
				t.Errorf("seed %d: the kubelet rejects %s, we do not\nupstream errors: %v\nour errors: %v\ninput:\n%s",
					seed, p, upstreamErrors(t, kc), kubelet.Validate(kc), dump(kc))
			}
		}
		if len(ours) == 0 {
			accepted++
		} else {
			rejected++
		}
	})
	t.Logf("both accepted %d configurations, rejected %d (%d for their featureGates)", accepted, rejected, gatesRejected)
	if total := accepted + rejected; total >= 100 && (accepted < total/10 || rejected < total/10) {
		t.Errorf("the generator is lopsided: %d accepted, %d rejected; both must be at least a tenth", accepted, rejected)
	}
}

// validationInput generates one configuration: a tenth or a quarter of the
// fields set, a share of the cases with bad values mixed in, featureGates
// maps from every gate the kubelet knows (some it rejects: unknown names,
// locked gates moved, dependencies turned off); most cases then defaulted (as the
// kubelet validates defaulted configurations; the defaults are proven equal
// by TestKubeletDefaults), some left raw.
func validationInput(r *rand.Rand) *kubeletv1beta1.KubeletConfiguration {
	var g *gen
	switch x := r.Float64(); {
	case x < 0.45: // plausible values only, few of them: mostly valid
		g = newKubeletGen(r, 0.1, 0)
	default: // more fields, bad values mixed in at some rate
		g = newKubeletGen(r, 0.25, pick(&gen{r: r}, 0.0, 0.02, 0.05, 0.1, 0.3))
	}
	kc := &kubeletv1beta1.KubeletConfiguration{}
	g.fill(kc)
	if g.chance(0.7) {
		kc.FeatureGates = g.validGates()
	} else {
		kc.FeatureGates = g.featureGates(true)
	}
	if g.chance(0.85) {
		kubelet.Default(kc)
	}
	return kc
}

// ourValidationPaths normalizes our errors' paths to the granularity of the
// comparison.
func ourValidationPaths(errs field.ErrorList) map[string]bool {
	out := map[string]bool{}
	for _, e := range errs {
		out[normalizePath(e.Field)] = true
	}
	return out
}

func normalizePath(p string) string {
	if i := strings.IndexByte(p, '['); i >= 0 {
		p = p[:i]
	}
	switch p {
	case "evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim":
		return "eviction"
	}
	return p
}

// cgroupV1Host is whether this host runs cgroup v1, where two upstream
// checks (hostDependent) reject configurations they accept elsewhere.
var cgroupV1Host = !libcontainercgroups.IsCgroup2UnifiedMode()

// upstreamErrors runs ValidateKubeletConfiguration on kc and returns its
// errors, after taking the host-dependent settings out (hostDependent).
func upstreamErrors(t *testing.T, kc *kubeletv1beta1.KubeletConfiguration) []error {
	in := kc.DeepCopy()
	for _, h := range hostDependent {
		h.neutralize(in)
	}
	// Judged by binaryVersionChecks instead.
	in.ShowHiddenMetricsForVersion = ""
	err := validation.ValidateKubeletConfiguration(toInternal(t, in), utilfeature.DefaultFeatureGate)
	if err == nil {
		return nil
	}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		return agg.Errors()
	}
	return []error{err}
}

// upstreamValidationPaths returns the fields the kubelet rejects kc for.
// gatesErr is set when the kubelet rejects the featureGates map, which makes
// it stop before any other check.
func upstreamValidationPaths(t *testing.T, kc *kubeletv1beta1.KubeletConfiguration) (paths map[string]bool, gatesErr error) {
	t.Helper()
	if err := gatesAccepted(kc.FeatureGates); err != nil {
		return nil, err
	}
	paths = map[string]bool{}
	for _, err := range upstreamErrors(t, kc) {
		ps, ok := upstreamPaths(err, kc)
		if !ok {
			t.Fatalf("no field known for the upstream error %q: add it to upstreamMessages", err)
		}
		for _, p := range ps {
			paths[p] = true
		}
	}
	for _, c := range append(startupChecks, binaryVersionChecks...) {
		if c.rejects(kc) {
			paths[c.path] = true
		}
	}
	return paths, nil
}

// upstreamPaths names the fields an upstream validation error is about:
// field.Errors carry it; the plain errors are matched by message.
func upstreamPaths(err error, kc *kubeletv1beta1.KubeletConfiguration) ([]string, bool) {
	var fe *field.Error
	if errors.As(err, &fe) {
		return []string{normalizePath(fe.Field)}, true
	}
	msg := err.Error()
	for _, m := range upstreamMessages {
		if m.re.MatchString(msg) {
			if m.pathsFor != nil {
				return m.pathsFor(kc), true
			}
			return []string{m.path}, true
		}
	}
	return nil, false
}

// upstreamMessages maps the messages of ValidateKubeletConfiguration's
// plain errors to the field they are about (the field whose value has to
// change), first match wins.
var upstreamMessages = func() []upstreamMessage {
	var out []upstreamMessage
	add := func(re, path string) {
		out = append(out, upstreamMessage{re: regexp.MustCompile(re), path: path})
	}
	// Relations: the field named first in the message is not always the one
	// at fault.
	add(`systemCgroups \(--system-cgroups\) was specified and cgroupRoot`, "cgroupRoot")
	add(`must be less than imageGCHighThresholdPercent`, "imageGCLowThresholdPercent")
	add(`imageMaximumGCAge .* must be greater than imageMinimumGCAge`, "imageMaximumGCAge")
	add(`ImageMaximumGCAge feature gate is required`, "imageMaximumGCAge")
	add(`DefaultPodSysctls feature gate is required|for defaultPodSysctls|in defaultPodSysctls`, "defaultPodSysctls")
	add(`maxParallelImagePulls`, "maxParallelImagePulls")
	add(`invalid taint|taint.TimeAdded`, "registerWithTaints")
	add(`shutdownGracePeriodCriticalPods .* must be <= shutdownGracePeriod`, "shutdownGracePeriodCriticalPods")
	add(`shutdownGracePeriodByPodPriority`, "shutdownGracePeriodByPodPriority")
	add(`shutdownGracePeriodCriticalPods .* must be either zero`, "shutdownGracePeriodCriticalPods")
	add(`shutdownGracePeriod .* must be either zero`, "shutdownGracePeriod")
	// One message for both periods: it is about the ones that are set.
	out = append(out, upstreamMessage{re: regexp.MustCompile(`specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires`), pathsFor: func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		var ps []string
		if kc.ShutdownGracePeriod.Duration > 0 {
			ps = append(ps, "shutdownGracePeriod")
		}
		if kc.ShutdownGracePeriodCriticalPods.Duration > 0 {
			ps = append(ps, "shutdownGracePeriodCriticalPods")
		}
		return ps
	}})
	add(`CrashLoopBackOff.MaxContainerRestartPeriod`, "crashLoopBackOff.maxContainerRestartPeriod")
	add(`systemReservedCgroup \(--system-reserved-cgroup\) must be specified`, "systemReservedCgroup")
	add(`kubeReservedCgroup \(--kube-reserved-cgroup\) must be specified`, "kubeReservedCgroup")
	add(`cgroupsPerQOS \(--cgroups-per-qos\) must be set to true`, "cgroupsPerQOS")
	add(`enforceNodeAllocatable`, "enforceNodeAllocatable")
	add("can't set `preloadedImagesVerificationAllowlist`|`preloadedImagesVerificationAllowlist`", "preloadedImagesVerificationAllowlist")
	add("imagePullCredentialsVerificationPolicy", "imagePullCredentialsVerificationPolicy")
	add(`reservedSystemCPUs`, "reservedSystemCPUs")
	add(`NUMA node`, "reservedMemory")
	add(`not to run on a host using cgroup v1`, "failCgroupV1")
	add(`singleProcessOOMKill`, "singleProcessOOMKill")
	add(`userNamespaces.idsPerPod`, "userNamespaces.idsPerPod")
	add(`showHiddenMetricsForVersion`, "showHiddenMetricsForVersion")
	add(`memoryThrottlingFactor`, "memoryThrottlingFactor")
	add(`memoryReservationPolicy`, "memoryReservationPolicy")
	add(`containerRuntimeEndpoint`, "containerRuntimeEndpoint")
	add(`enableSystemLogQuery`, "enableSystemLogQuery")
	add(`podLogsDir|pod logs path`, "podLogsDir")
	add(`memorySwap`, "memorySwap.swapBehavior")
	add(`specified for hairpinMode`, "hairpinMode")
	// A field named at the start of the message.
	for _, f := range []string{
		"nodeLeaseDurationSeconds", "eventBurst", "eventRecordQPS", "healthzPort", "cpuCFSQuotaPeriod",
		"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge", "imageMaximumGCAge",
		"iptablesDropBit", "iptablesMasqueradeBit", "kubeAPIBurst", "kubeAPIQPS", "nodeStatusMaxImages",
		"maxOpenFiles", "maxPods", "oomScoreAdj", "podsPerCore", "readOnlyPort", "port", "registryBurst",
		"registryPullQPS", "serverTLSBootstrap", "runOnce", "topologyManagerPolicy", "topologyManagerScope",
		"hairpinMode", "containerLogMaxWorkers", "containerLogMonitorInterval", "containerLogMaxFiles",
	} {
		add(`^invalid configuration: `+regexp.QuoteMeta(f)+`\b`, f)
	}
	return out
}()

type upstreamMessage struct {
	re       *regexp.Regexp
	path     string
	pathsFor func(*kubeletv1beta1.KubeletConfiguration) []string
}

// startupCheck is a check the kubelet makes after ValidateKubeletConfiguration
// (when it builds the component the field configures) and refuses to start
// on, and that kubelet.Validate makes up front.
type startupCheck struct {
	path string
	// rejects reports whether the kubelet refuses kc: the upstream parser
	// where it is exported, else the upstream rule.
	rejects func(kc *kubeletv1beta1.KubeletConfiguration) bool
}

var startupChecks = []startupCheck{
	{"eviction", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		_, err := eviction.ParseThresholdConfig(kc.EnforceNodeAllocatable, kc.EvictionHard, kc.EvictionSoft, kc.EvictionSoftGracePeriod, kc.EvictionMinimumReclaim)
		return err != nil
	}},
	{"qosReserved", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		_, err := cm.ParseQOSReserved(kc.QOSReserved)
		return err != nil
	}},
	{"tlsMinVersion", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		_, err := cliflag.TLSVersion(kc.TLSMinVersion)
		return err != nil
	}},
	{"tlsCipherSuites", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		_, err := cliflag.TLSCipherSuites(kc.TLSCipherSuites)
		return err != nil
	}},
	{"tlsCurvePreferences", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		_, err := cliflag.TLSCurvePreferences(kc.TLSCurvePreferences)
		return err != nil
	}},
	// cmd/kubelet/app parseResourceList (unexported): cpu, memory,
	// ephemeral-storage and pid, each a non-negative quantity.
	{"systemReserved", func(kc *kubeletv1beta1.KubeletConfiguration) bool { return badReservation(kc.SystemReserved) }},
	{"kubeReserved", func(kc *kubeletv1beta1.KubeletConfiguration) bool { return badReservation(kc.KubeReserved) }},
	// pkg/kubelet/logs parseMaxSize (unexported): a quantity that fits an
	// int64; a negative one turns log rotation off.
	{"containerLogMaxSize", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		if kc.ContainerLogMaxSize == "" {
			return false // the kubelet always has the default here
		}
		q, err := resource.ParseQuantity(kc.ContainerLogMaxSize)
		if err != nil {
			return true
		}
		_, ok := q.AsInt64()
		return !ok
	}},
	// The managers' constructors: cpumanager.NewManager, memorymanager.NewManager
	// (BestEffort is Windows only), NewMainKubelet, BuildAuthz.
	{"cpuManagerPolicy", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return !slices.Contains([]string{"none", "static"}, kc.CPUManagerPolicy)
	}},
	{"memoryManagerPolicy", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return !slices.Contains([]string{"None", "Static"}, kc.MemoryManagerPolicy)
	}},
	{"configMapAndSecretChangeDetectionStrategy", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return !slices.Contains([]kubeletv1beta1.ResourceChangeDetectionStrategy{"Watch", "Cache", "Get"}, kc.ConfigMapAndSecretChangeDetectionStrategy)
	}},
	{"authorization.mode", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return !slices.Contains([]kubeletv1beta1.KubeletAuthorizationMode{"AlwaysAllow", "Webhook"}, kc.Authorization.Mode)
	}},
}

// binaryVersionChecks are ValidateKubeletConfiguration's checks that depend on
// the binary's version, which a test binary does not have (upstreamErrors
// takes the field out of that call): judged as a kubelet built from v1.37.0.
var binaryVersionChecks = []startupCheck{
	{"showHiddenMetricsForVersion", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return metricsapi.ValidateShowHiddenMetricsVersionForKubeletBackwardCompatOnly(semver.MustParse("1.37.0"), kc.ShowHiddenMetricsForVersion) != nil
	}},
}

func badReservation(m map[string]string) bool {
	for name, v := range m {
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid":
		default:
			return true
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return true
		}
	}
	return false
}

// stricter is a check kubelet.Validate makes and the kubelet does not.
// components/kubelet/doc.go lists each under "Checks added beyond upstream".
type stricter struct {
	path string
	// applies reports whether kc breaks the rule, so that the difference is
	// allowed for exactly the configurations the rule rejects.
	applies func(kc *kubeletv1beta1.KubeletConfiguration) bool
}

var stricterChecks = []stricter{
	{"address", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return kc.Address != "" && net.ParseIP(kc.Address) == nil
	}},
	{"clusterDNS", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return slices.ContainsFunc(kc.ClusterDNS, func(s string) bool { return net.ParseIP(s) == nil })
	}},
	{"podCIDR", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		_, _, err := net.ParseCIDR(kc.PodCIDR)
		return kc.PodCIDR != "" && err != nil
	}},
	{"tlsCertFile", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return kc.TLSCertFile == "" && kc.TLSPrivateKeyFile != ""
	}},
	{"tlsPrivateKeyFile", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return kc.TLSCertFile != "" && kc.TLSPrivateKeyFile == ""
	}},
	// A driver other than "systemd" silently means cgroupfs upstream.
	{"cgroupDriver", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return kc.CgroupDriver != "systemd" && kc.CgroupDriver != "cgroupfs"
	}},
	// NaN passes every upstream range check.
	{"eviction", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		for _, m := range []map[string]string{kc.EvictionHard, kc.EvictionSoft, kc.EvictionMinimumReclaim} {
			for _, v := range m {
				if f, err := strconv.ParseFloat(strings.TrimRight(v, "%"), 32); err == nil && math.IsNaN(f) && strings.HasSuffix(v, "%") {
					return true
				}
			}
		}
		return false
	}},
	{"memoryThrottlingFactor", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		return kc.MemoryThrottlingFactor != nil && math.IsNaN(*kc.MemoryThrottlingFactor)
	}},
	// Negative periods and repeated priorities make the shutdown order
	// ambiguous.
	{"shutdownGracePeriodByPodPriority", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		seen := map[int32]bool{}
		for _, e := range kc.ShutdownGracePeriodByPodPriority {
			if e.ShutdownGracePeriodSeconds < 0 || seen[e.Priority] {
				return true
			}
			seen[e.Priority] = true
		}
		return false
	}},
	// Upstream rejects zero only.
	{"reservedMemory", func(kc *kubeletv1beta1.KubeletConfiguration) bool {
		for _, rm := range kc.ReservedMemory {
			for _, q := range rm.Limits {
				if q.Sign() < 0 {
					return true
				}
			}
		}
		return false
	}},
}

func stricterCheck(path string, kc *kubeletv1beta1.KubeletConfiguration) *stricter {
	for i := range stricterChecks {
		if c := &stricterChecks[i]; c.path == path && c.applies(kc) {
			return c
		}
	}
	return nil
}

// hostDependentCheck is an upstream check whose result depends on the host
// or the binary rather than on the configuration. The comparison takes it
// out: neutralize edits the configuration given to upstream validation so
// that the check passes. components/kubelet/doc.go lists each under
// "Upstream checks left out".
type hostDependentCheck struct {
	path       string
	neutralize func(kc *kubeletv1beta1.KubeletConfiguration)
}

var hostDependent = []hostDependentCheck{
	{"failCgroupV1", func(kc *kubeletv1beta1.KubeletConfiguration) {
		if cgroupV1Host {
			kc.FailCgroupV1 = boolPtr(false)
		}
	}},
	{"singleProcessOOMKill", func(kc *kubeletv1beta1.KubeletConfiguration) {
		if cgroupV1Host {
			kc.SingleProcessOOMKill = nil
		}
	}},
}

func boolPtr(b bool) *bool { return &b }
