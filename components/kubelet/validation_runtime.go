package kubelet

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// previousMemoryThrottlingFactor is the memoryThrottlingFactor default of
// the releases before 1.37.
const previousMemoryThrottlingFactor = 0.9

// previousMinor is the only value showHiddenMetricsForVersion may take on a
// 1.37 kubelet: metrics hidden in the current release can be shown again for
// one release only.
const previousMinor = "1.36"

// validateShutdown checks graceful node shutdown, both the two-period form
// and the by-pod-priority form, against their feature gates.
func (v *validator) validateShutdown() {
	kc := v.kc
	period, critical := kc.ShutdownGracePeriod.Duration, kc.ShutdownGracePeriodCriticalPods.Duration
	if v.gates.Enabled(gateGracefulNodeShutdown) {
		if critical > period {
			v.add(field.Invalid(field.NewPath("shutdownGracePeriodCriticalPods"), critical.String(),
				fmt.Sprintf("must not be greater than shutdownGracePeriod (%v)", period)))
		}
		if period < 0 || (period > 0 && period < time.Second) {
			v.add(field.Invalid(field.NewPath("shutdownGracePeriod"), period.String(), "must be zero or at least 1s"))
		}
		if critical < 0 || (critical > 0 && critical < time.Second) {
			v.add(field.Invalid(field.NewPath("shutdownGracePeriodCriticalPods"), critical.String(), "must be zero or at least 1s"))
		}
	} else {
		if period > 0 {
			v.add(field.Forbidden(field.NewPath("shutdownGracePeriod"), "requires feature gate "+gateGracefulNodeShutdown))
		}
		if critical > 0 {
			v.add(field.Forbidden(field.NewPath("shutdownGracePeriodCriticalPods"), "requires feature gate "+gateGracefulNodeShutdown))
		}
	}

	byPriority := kc.ShutdownGracePeriodByPodPriority
	if len(byPriority) == 0 {
		return
	}
	path := field.NewPath("shutdownGracePeriodByPodPriority")
	if !v.gates.Enabled(gateGracefulNodeShutdownBasedOnPodPriority) {
		v.add(field.Forbidden(path, "requires feature gate "+gateGracefulNodeShutdownBasedOnPodPriority))
		return
	}
	if period > 0 || critical > 0 {
		v.add(field.Forbidden(path, "must not be set together with shutdownGracePeriod or shutdownGracePeriodCriticalPods"))
	}
	// Not checked upstream, where a negative period or a repeated priority
	// only makes the shutdown order ambiguous at run time.
	seen := make(map[int32]bool, len(byPriority))
	for i, entry := range byPriority {
		if entry.ShutdownGracePeriodSeconds < 0 {
			v.add(field.Invalid(path.Index(i).Child("shutdownGracePeriodSeconds"), entry.ShutdownGracePeriodSeconds, "must not be negative"))
		}
		if seen[entry.Priority] {
			v.add(field.Duplicate(path.Index(i).Child("priority"), entry.Priority))
		}
		seen[entry.Priority] = true
	}
}

// validateRuntime checks the container runtime, image pulling, swap, memory
// QoS and crash-loop back-off settings.
func (v *validator) validateRuntime() {
	kc := v.kc
	if kc.ContainerRuntimeEndpoint == "" {
		v.add(field.Required(field.NewPath("containerRuntimeEndpoint"), "the container runtime endpoint must be set"))
	}

	// NodeSwap is GA and locked on in 1.37, so the swap behavior is always
	// checked.
	oneOf(v, "memorySwap.swapBehavior", kc.MemorySwap.SwapBehavior, "", "NoSwap", "LimitedSwap")

	restart := kc.CrashLoopBackOff.MaxContainerRestartPeriod
	restartPath := func() *field.Path { return field.NewPath("crashLoopBackOff", "maxContainerRestartPeriod") }
	if v.gates.Enabled(gateKubeletCrashLoopBackOffMax) {
		if restart == nil {
			v.add(field.Required(restartPath(), "required when feature gate "+gateKubeletCrashLoopBackOffMax+" is enabled"))
		} else if ms := restart.Duration.Milliseconds(); ms < 1000 || ms > 300000 {
			v.add(field.Invalid(restartPath(), restart.Duration.String(), "must be between 1s and 300s, inclusive"))
		}
	} else if restart != nil {
		v.add(field.Forbidden(restartPath(), "requires feature gate "+gateKubeletCrashLoopBackOffMax))
	}

	v.validateImageCredentialPolicy()

	if f := kc.MemoryThrottlingFactor; f != nil {
		// 0.9, the default of earlier releases, stays accepted without the
		// gate so that old config files keep working.
		if !v.gates.Enabled(gateMemoryQoS) && *f != previousMemoryThrottlingFactor {
			v.add(field.Forbidden(field.NewPath("memoryThrottlingFactor"), "requires feature gate "+gateMemoryQoS))
		}
		if math.IsNaN(*f) || *f <= 0 || *f > 1 {
			v.add(field.Invalid(field.NewPath("memoryThrottlingFactor"), *f, "must be greater than 0 and at most 1.0"))
		}
	}
	if kc.MemoryReservationPolicy == kubeletv1beta1.TieredReservationMemoryReservationPolicy && !v.gates.Enabled(gateMemoryQoS) {
		v.add(field.Forbidden(field.NewPath("memoryReservationPolicy"), "TieredReservation requires feature gate "+gateMemoryQoS))
	}
	oneOf(v, "memoryReservationPolicy", kc.MemoryReservationPolicy,
		kubeletv1beta1.NoneMemoryReservationPolicy, kubeletv1beta1.TieredReservationMemoryReservationPolicy)

	if ns := kc.UserNamespaces; ns != nil && ns.IDsPerPod != nil {
		// The rule the field documents: a positive multiple of 65536 below 2^32.
		if n := *ns.IDsPerPod; n <= 0 || n%65536 != 0 || n >= 1<<32 {
			v.add(field.Invalid(field.NewPath("userNamespaces", "idsPerPod"), n, "must be a positive multiple of 65536 less than 4294967296"))
		}
	}
}

// validateImageCredentialPolicy checks the ensure-secret-pulled-images
// settings against their feature gate.
func (v *validator) validateImageCredentialPolicy() {
	kc := v.kc
	policy := kc.ImagePullCredentialsVerificationPolicy
	allowlist := kc.PreloadedImagesVerificationAllowlist
	listPath := func() *field.Path { return field.NewPath("preloadedImagesVerificationAllowlist") }
	if !v.gates.Enabled(gateKubeletEnsureSecretPulledImages) {
		if policy != "" {
			v.add(field.Forbidden(field.NewPath("imagePullCredentialsVerificationPolicy"), "requires feature gate "+gateKubeletEnsureSecretPulledImages))
		}
		if len(allowlist) > 0 {
			v.add(field.Forbidden(listPath(), "requires feature gate "+gateKubeletEnsureSecretPulledImages))
		}
		return
	}
	oneOf(v, "imagePullCredentialsVerificationPolicy", policy,
		kubeletv1beta1.NeverVerify, kubeletv1beta1.NeverVerifyPreloadedImages,
		kubeletv1beta1.NeverVerifyAllowlistedImages, kubeletv1beta1.AlwaysVerify)
	if len(allowlist) == 0 {
		return
	}
	if policy != kubeletv1beta1.NeverVerifyAllowlistedImages {
		v.add(field.Forbidden(listPath(), "may only be set when imagePullCredentialsVerificationPolicy is NeverVerifyAllowlistedImages"))
		return
	}
	for i, pattern := range allowlist {
		if msg := allowlistPatternProblem(pattern); msg != "" {
			v.add(field.Invalid(listPath().Index(i), pattern, msg))
		}
	}
}

// allowlistPatternProblem says what is wrong with one entry of
// preloadedImagesVerificationAllowlist, or returns "". An entry is an image
// name without tag or digest ("registry.example.com/team/app"), or a prefix
// ending in "/*" ("registry.example.com/team/*").
//
// As upstream (the kubelet's image pull manager): a plain name is parsed with
// the container image reference grammar of github.com/distribution/reference
// (reference.Parse, which does not normalise: "pause" stays "pause", a
// registry host may contain upper case, the repository path may not); a
// wildcard entry is matched as a plain string prefix, so nothing is checked
// in it but that the only '*' is the trailing one and that something comes
// before "/*".
func allowlistPatternProblem(pattern string) string {
	if pattern != strings.TrimSpace(pattern) {
		return "must not have leading or trailing white space"
	}
	name, wildcard := strings.CutSuffix(pattern, "/*")
	if strings.Contains(name, "*") {
		return "the only wildcard allowed is a trailing \"/*\""
	}
	if wildcard {
		if name == "" {
			return "a wildcard pattern needs at least a registry host before \"/*\""
		}
		return ""
	}
	if name == "" {
		return "must not be empty"
	}
	ref, err := reference.Parse(name)
	if err != nil {
		return "must be a container image name: " + err.Error()
	}
	if _, ok := ref.(reference.Digested); ok {
		return "must be an image name without digest"
	}
	if _, ok := ref.(reference.Tagged); ok {
		return "must be an image name without tag"
	}
	return ""
}

// validateLogsAndHandlers checks container log rotation, the pod log
// directory, the node log query endpoint and hidden metrics.
func (v *validator) validateLogsAndHandlers() {
	kc := v.kc
	if n := i32(kc.ContainerLogMaxWorkers); n < 1 {
		v.add(field.Invalid(field.NewPath("containerLogMaxWorkers"), n, "must be at least 1"))
	}
	if d := duration(kc.ContainerLogMonitorInterval); d < 3*time.Second {
		v.add(field.Invalid(field.NewPath("containerLogMonitorInterval"), d.String(), "must be at least 3s"))
	}
	if n := i32(kc.ContainerLogMaxFiles); n <= 1 {
		v.add(field.Invalid(field.NewPath("containerLogMaxFiles"), n, "must be greater than 1"))
	}
	// Upstream parses this when it builds the container log manager and
	// refuses to start on failure. A negative size turns log rotation off.
	if size := kc.ContainerLogMaxSize; size != "" {
		if q, err := resource.ParseQuantity(size); err != nil {
			v.add(field.Invalid(field.NewPath("containerLogMaxSize"), size, "must be a quantity such as \"10Mi\""))
		} else if _, ok := q.AsInt64(); !ok {
			v.add(field.Invalid(field.NewPath("containerLogMaxSize"), size, "must be a whole number of bytes that fits in 64 bits"))
		}
	}

	switch dir := kc.PodLogsDir; {
	case dir == "":
		v.add(field.Required(field.NewPath("podLogsDir"), "the pod log directory must be set"))
	case !filepath.IsAbs(dir):
		v.add(field.Invalid(field.NewPath("podLogsDir"), dir, "must be an absolute path"))
	case filepath.Clean(dir) != dir:
		v.add(field.Invalid(field.NewPath("podLogsDir"), dir, fmt.Sprintf("must be a clean path (%q)", filepath.Clean(dir))))
	case !isASCII(dir):
		// The directory appears in metric labels, which must be ASCII.
		v.add(field.Invalid(field.NewPath("podLogsDir"), dir, "must contain ASCII characters only"))
	}

	if boolean(kc.EnableSystemLogQuery) {
		if !v.gates.Enabled(gateNodeLogQuery) {
			v.add(field.Forbidden(field.NewPath("enableSystemLogQuery"), "requires feature gate "+gateNodeLogQuery))
		}
		if !boolean(kc.EnableSystemLogHandler) {
			v.add(field.Forbidden(field.NewPath("enableSystemLogQuery"), "requires enableSystemLogHandler to be true"))
		}
	}

	if s := kc.ShowHiddenMetricsForVersion; s != "" && s != previousMinor {
		v.add(field.Invalid(field.NewPath("showHiddenMetricsForVersion"), s,
			fmt.Sprintf("must be omitted or %q; only the previous minor version is allowed", previousMinor)))
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > 0x7f {
			return false
		}
	}
	return true
}
