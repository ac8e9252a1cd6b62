package kubeproxy

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// Proxy modes and detect-local modes kube-proxy accepts on Linux.
const (
	modeIPTables = "iptables"
	modeIPVS     = "ipvs"
	modeNFTables = "nftables"

	localModeClusterCIDR         = "ClusterCIDR"
	localModeNodeCIDR            = "NodeCIDR"
	localModeBridgeInterface     = "BridgeInterface"
	localModeInterfaceNamePrefix = "InterfaceNamePrefix"
)

// gateKubeProxyIPVS allows the ipvs mode. The logging rules read the
// logging gates of package featuregates, which the kubelet reads too.
const gateKubeProxyIPVS = "KubeProxyIPVS"

// The enumerations below are functions, not package variables, so that
// nothing in the package is shared mutable state.

func supportedModes() []string { return []string{modeIPTables, modeIPVS, modeNFTables} }

func supportedLocalModes() []string {
	return []string{localModeClusterCIDR, localModeNodeCIDR, localModeBridgeInterface, localModeInterfaceNamePrefix}
}

// ipvsSchedulers lists every scheduler of the Linux IPVS code (the
// ip_vs_<name> kernel modules).
func ipvsSchedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}
}

func isIPVSScheduler(s string) bool {
	return slices.Contains(ipvsSchedulers(), s) // the slice stays on the stack
}

func isNodePortKeyword(s string) bool {
	return s == "primary" || s == "localhost" || s == "all"
}

// Validate checks a defaulted cfg against kube-proxy's rules for Linux and
// returns every violation at once, each naming its JSON field path (for
// example "iptables.minSyncPeriod"). It does not modify cfg. Call Default
// first: like kube-proxy, Validate treats zero durations and empty addresses
// as wrong, not as "use the default". The rules, and the upstream rules
// left out, are listed in the package documentation.
func (Profile) Validate(cfg *v1alpha1.KubeProxyConfiguration) field.ErrorList {
	if cfg == nil {
		return field.ErrorList{field.Required(field.NewPath("KubeProxyConfiguration"), "must not be nil")}
	}
	var errs field.ErrorList
	// featureGates as kube-proxy checks them when it sets its gates
	// (SetFromMap, in Options.Complete and in its Validate).
	errs = featuregates.Gates(cfg.FeatureGates).Validate(errs, gateWording)
	errs = validateClientConnection(errs, cfg)
	errs = validateLogging(errs, &cfg.Logging, cfg.FeatureGates)
	errs = validateAddresses(errs, cfg)
	errs = validateModes(errs, cfg)
	errs = validateConntrack(errs, &cfg.Conntrack)
	errs = validateDetectLocal(errs, cfg)
	errs = validateNodePortAddresses(errs, cfg.NodePortAddresses)

	if v := cfg.OOMScoreAdj; v != nil && (*v < -1000 || *v > 1000) {
		errs = append(errs, field.Invalid(field.NewPath("oomScoreAdj"), *v, "must be between -1000 and 1000"))
	}
	errs = positive(errs, cfg.ConfigSyncPeriod, "configSyncPeriod")
	if cfg.PortRange != "" {
		if _, err := utilnet.ParsePortRange(cfg.PortRange); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("portRange"), cfg.PortRange,
				"must be a port range such as 30000-32767 or 30000+2767 (the field is unused by kube-proxy)"))
		}
	}
	// kube-proxy refuses to start unless it is empty or its previous minor
	// version (component-base's metrics options).
	if v := cfg.ShowHiddenMetricsForVersion; v != "" && v != hiddenMetricsVersion {
		errs = append(errs, field.Invalid(field.NewPath("showHiddenMetricsForVersion"), v,
			"must be empty or "+hiddenMetricsVersion+": kube-proxy "+release+" shows the hidden metrics of its previous minor version only"))
	}
	return errs
}

func validateClientConnection(errs field.ErrorList, cfg *v1alpha1.KubeProxyConfiguration) field.ErrorList {
	// "not >= 0" also catches NaN, which a flag overlay could produce.
	if qps := cfg.ClientConnection.QPS; !(qps >= 0) {
		errs = append(errs, field.Invalid(field.NewPath("clientConnection", "qps"), qps, "must be a number that is not negative"))
	}
	if burst := cfg.ClientConnection.Burst; burst < 0 {
		errs = append(errs, field.Invalid(field.NewPath("clientConnection", "burst"), burst, "must not be negative"))
	}
	return errs
}

func validateLogging(errs field.ErrorList, l *logsapi.LoggingConfiguration, gates featuregates.Gates) field.ErrorList {
	switch l.Format {
	case "", logsapi.DefaultLogFormat:
	case logsapi.JSONLogFormat:
		if !gates.Enabled(featuregates.LoggingBetaOptions) {
			errs = append(errs, field.Forbidden(field.NewPath("logging", "format"),
				"the json format needs feature gate "+featuregates.LoggingBetaOptions))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("logging", "format"), l.Format, []string{logsapi.DefaultLogFormat, logsapi.JSONLogFormat}))
	}
	if d := l.FlushFrequency.Duration.Duration; d <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("logging", "flushFrequency"), d.String(), "must be greater than 0"))
	}
	if l.Verbosity > math.MaxInt32 {
		errs = append(errs, field.Invalid(field.NewPath("logging", "verbosity"), l.Verbosity,
			fmt.Sprintf("must be at most %d", math.MaxInt32)))
	}
	if len(l.VModule) > 0 && l.Format != "" && l.Format != logsapi.DefaultLogFormat {
		errs = append(errs, field.Forbidden(field.NewPath("logging", "vmodule"), "only supported by the text format"))
	}
	for i, item := range l.VModule {
		switch {
		case item.FilePattern == "":
			errs = append(errs, field.Required(field.NewPath("logging", "vmodule").Index(i).Child("filePattern"), ""))
		case strings.ContainsAny(item.FilePattern, "=,"):
			errs = append(errs, field.Invalid(field.NewPath("logging", "vmodule").Index(i).Child("filePattern"),
				item.FilePattern, "must not contain '=' or ','"))
		}
		if item.Verbosity > math.MaxInt32 {
			errs = append(errs, field.Invalid(field.NewPath("logging", "vmodule").Index(i).Child("verbosity"),
				item.Verbosity, fmt.Sprintf("must be at most %d", math.MaxInt32)))
		}
	}
	if !gates.Enabled(featuregates.LoggingAlphaOptions) {
		errs = alphaRouting(errs, &l.Options.Text.OutputRoutingOptions, "text")
		errs = alphaRouting(errs, &l.Options.JSON.OutputRoutingOptions, "json")
	}
	return errs
}

// alphaRouting rejects the alpha-only output routing options of one format.
func alphaRouting(errs field.ErrorList, o *logsapi.OutputRoutingOptions, format string) field.ErrorList {
	const why = "needs feature gate " + featuregates.LoggingAlphaOptions
	if o.SplitStream {
		errs = append(errs, field.Forbidden(field.NewPath("logging", "options", format, "splitStream"), why))
	}
	if !o.InfoBufferSize.IsZero() {
		errs = append(errs, field.Forbidden(field.NewPath("logging", "options", format, "infoBufferSize"), why))
	}
	return errs
}

func validateAddresses(errs field.ErrorList, cfg *v1alpha1.KubeProxyConfiguration) field.ErrorList {
	if _, ok := ipFamily(cfg.BindAddress); !ok {
		errs = append(errs, field.Invalid(field.NewPath("bindAddress"), cfg.BindAddress, "must be an IP address"))
	}
	// An empty healthz address turns the health server off.
	if cfg.HealthzBindAddress != "" {
		errs = hostPort(errs, cfg.HealthzBindAddress, "healthzBindAddress")
	}
	if cfg.MetricsBindAddress == "" {
		errs = append(errs, field.Required(field.NewPath("metricsBindAddress"), "must be IP:port"))
	} else {
		errs = hostPort(errs, cfg.MetricsBindAddress, "metricsBindAddress")
	}
	return errs
}

// hostPort checks that s is IP:port with a port in 1..65535, reporting the
// host and the port separately.
func hostPort(errs field.ErrorList, s, name string) field.ErrorList {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return append(errs, field.Invalid(field.NewPath(name), s, "must be IP:port (IPv6 in brackets, e.g. [::]:10256)"))
	}
	if _, ok := ipFamily(host); !ok {
		errs = append(errs, field.Invalid(field.NewPath(name), s, fmt.Sprintf("host %q must be an IP address", host)))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		errs = append(errs, field.Invalid(field.NewPath(name), s, fmt.Sprintf("port %q must be a number between 1 and 65535", port)))
	}
	return errs
}

// validateModes checks the proxy mode and the settings of the backend it
// selects. kube-proxy reads the sync periods of the selected backend only
// (an empty or unknown mode reads iptables), so the other backends' periods
// are not checked; iptables.masqueradeBit is also used by ipvs and is always
// checked.
func validateModes(errs field.ErrorList, cfg *v1alpha1.KubeProxyConfiguration) field.ErrorList {
	switch mode := string(cfg.Mode); mode {
	case "", modeIPTables, modeNFTables:
	case modeIPVS:
		if !featuregates.Gates(cfg.FeatureGates).Enabled(gateKubeProxyIPVS) {
			errs = append(errs, field.Forbidden(field.NewPath("mode"), "the ipvs mode needs feature gate "+gateKubeProxyIPVS))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("mode"), mode, supportedModes()))
	}
	errs = masqueradeBit(errs, cfg.IPTables.MasqueradeBit, "iptables")
	switch string(cfg.Mode) {
	case modeIPVS:
		ipvs := &cfg.IPVS
		errs = syncPeriods(errs, ipvs.SyncPeriod, ipvs.MinSyncPeriod, "ipvs")
		errs = nonNegative(errs, ipvs.TCPTimeout, "ipvs", "tcpTimeout")
		errs = nonNegative(errs, ipvs.TCPFinTimeout, "ipvs", "tcpFinTimeout")
		errs = nonNegative(errs, ipvs.UDPTimeout, "ipvs", "udpTimeout")
		// Empty means kube-proxy's default, rr.
		if ipvs.Scheduler != "" && !isIPVSScheduler(ipvs.Scheduler) {
			errs = append(errs, field.NotSupported(field.NewPath("ipvs", "scheduler"), ipvs.Scheduler, ipvsSchedulers()))
		}
		for i, c := range ipvs.ExcludeCIDRs {
			if _, ok := cidrFamily(c); !ok {
				errs = append(errs, field.Invalid(field.NewPath("ipvs", "excludeCIDRs").Index(i), c, "must be a CIDR"))
			}
		}
	case modeNFTables:
		errs = syncPeriods(errs, cfg.NFTables.SyncPeriod, cfg.NFTables.MinSyncPeriod, "nftables")
		errs = masqueradeBit(errs, cfg.NFTables.MasqueradeBit, "nftables")
	default:
		errs = syncPeriods(errs, cfg.IPTables.SyncPeriod, cfg.IPTables.MinSyncPeriod, "iptables")
	}
	return errs
}

func syncPeriods(errs field.ErrorList, sync, minSync metav1.Duration, section string) field.ErrorList {
	n := len(errs)
	errs = positive(errs, sync, section, "syncPeriod")
	errs = nonNegative(errs, minSync, section, "minSyncPeriod")
	if len(errs) == n && minSync.Duration > sync.Duration {
		errs = append(errs, field.Invalid(field.NewPath(section, "minSyncPeriod"), minSync.Duration.String(),
			fmt.Sprintf("must not be greater than %s.syncPeriod (%s)", section, sync.Duration)))
	}
	return errs
}

func masqueradeBit(errs field.ErrorList, bit *int32, section string) field.ErrorList {
	if bit != nil && (*bit < 0 || *bit > 31) {
		errs = append(errs, field.Invalid(field.NewPath(section, "masqueradeBit"), *bit, "must be between 0 and 31"))
	}
	return errs
}

func validateConntrack(errs field.ErrorList, c *v1alpha1.KubeProxyConntrackConfiguration) field.ErrorList {
	if v := c.MaxPerCore; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(field.NewPath("conntrack", "maxPerCore"), *v, "must not be negative (0 leaves the limit as is)"))
	}
	if v := c.Min; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(field.NewPath("conntrack", "min"), *v, "must not be negative"))
	}
	if d := c.TCPEstablishedTimeout; d != nil {
		errs = nonNegative(errs, *d, "conntrack", "tcpEstablishedTimeout")
	}
	if d := c.TCPCloseWaitTimeout; d != nil {
		errs = nonNegative(errs, *d, "conntrack", "tcpCloseWaitTimeout")
	}
	errs = nonNegative(errs, c.UDPTimeout, "conntrack", "udpTimeout")
	errs = nonNegative(errs, c.UDPStreamTimeout, "conntrack", "udpStreamTimeout")
	return errs
}

func validateDetectLocal(errs field.ErrorList, cfg *v1alpha1.KubeProxyConfiguration) field.ErrorList {
	switch mode := string(cfg.DetectLocalMode); mode {
	case "", localModeClusterCIDR, localModeNodeCIDR:
	case localModeBridgeInterface:
		if cfg.DetectLocal.BridgeInterface == "" {
			errs = append(errs, field.Required(field.NewPath("detectLocal", "bridgeInterface"),
				"required when detectLocalMode is "+localModeBridgeInterface))
		}
	case localModeInterfaceNamePrefix:
		if cfg.DetectLocal.InterfaceNamePrefix == "" {
			errs = append(errs, field.Required(field.NewPath("detectLocal", "interfaceNamePrefix"),
				"required when detectLocalMode is "+localModeInterfaceNamePrefix))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("detectLocalMode"), mode, supportedLocalModes()))
	}
	// kube-proxy reads (and checks) clusterCIDR only in ClusterCIDR mode,
	// which is also what it picks for an empty mode.
	if m := cfg.DetectLocalMode; m == "" || m == localModeClusterCIDR {
		errs = validateClusterCIDR(errs, cfg.ClusterCIDR)
	}
	return errs
}

// validateClusterCIDR accepts one CIDR, or an IPv4 and an IPv6 CIDR
// separated by a comma (either order).
func validateClusterCIDR(errs field.ErrorList, s string) field.ErrorList {
	if s == "" {
		return errs
	}
	if strings.Count(s, ",") > 1 {
		return append(errs, field.Invalid(field.NewPath("clusterCIDR"), s,
			"must be one CIDR or a dual-stack pair such as 10.244.0.0/16,fd00:10:244::/56"))
	}
	first, second, pair := strings.Cut(s, ",")
	f1, ok1 := cidrFamily(first)
	if !ok1 {
		errs = append(errs, field.Invalid(field.NewPath("clusterCIDR"), s, fmt.Sprintf("%q is not a valid CIDR", first)))
	}
	if !pair {
		return errs
	}
	f2, ok2 := cidrFamily(second)
	if !ok2 {
		errs = append(errs, field.Invalid(field.NewPath("clusterCIDR"), s, fmt.Sprintf("%q is not a valid CIDR", second)))
	}
	if ok1 && ok2 && f1 == f2 {
		errs = append(errs, field.Invalid(field.NewPath("clusterCIDR"), s,
			"two CIDRs must be a dual-stack pair: one IPv4 and one IPv6"))
	}
	return errs
}

// validateNodePortAddresses accepts CIDRs and the keywords primary,
// localhost and all, in any combination (as the v1alpha1 field documents),
// each keyword once.
func validateNodePortAddresses(errs field.ErrorList, addrs []string) field.ErrorList {
	for i, a := range addrs {
		if isNodePortKeyword(a) {
			if slices.Contains(addrs[:i], a) {
				errs = append(errs, field.Duplicate(field.NewPath("nodePortAddresses").Index(i), a))
			}
			continue
		}
		if _, ok := cidrFamily(a); !ok {
			errs = append(errs, field.Invalid(field.NewPath("nodePortAddresses").Index(i), a,
				"must be a CIDR or one of the keywords primary, localhost, all"))
		}
	}
	return errs
}

func positive(errs field.ErrorList, d metav1.Duration, path string, more ...string) field.ErrorList {
	if d.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath(path, more...), d.Duration.String(), "must be greater than 0"))
	}
	return errs
}

func nonNegative(errs field.ErrorList, d metav1.Duration, path string, more ...string) field.ErrorList {
	if d.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath(path, more...), d.Duration.String(), "must not be negative"))
	}
	return errs
}

// release is the kube-proxy release this profile validates for, and
// hiddenMetricsVersion the only showHiddenMetricsForVersion it accepts.
const (
	release              = "1.37"
	hiddenMetricsVersion = "1.36"
)

// gateWording is how kube-proxy 1.37 words its featureGates errors.
var gateWording = featuregates.Wording{
	Component: "kube-proxy " + release,
	Release:   "kube-proxy " + release,
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
