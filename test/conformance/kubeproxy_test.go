package conformance

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsapi "k8s.io/component-base/metrics/api/v1"
	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	proxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	proxyvalidation "k8s.io/kubernetes/pkg/proxy/apis/config/validation"

	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/test/conformance/kubeletgates"
)

// kubeProxyCases is how many configurations each kube-proxy test generates
// per run (a tenth with -short).
const kubeProxyCases = 3000

func newKubeProxyGen(r *rand.Rand, pSet, pBad float64) *gen {
	return &gen{r: r, pSet: pSet, pBad: pBad, pools: kubeProxyPools(), skip: map[string]bool{"featureGates": true}}
}

func kubeProxyPools() map[string]pool {
	i32 := anyOf[int32]
	str := anyOf[string]
	dur := anyOf[metavDuration]
	return map[string]pool{
		"clientConnection.kubeconfig":         {good: str("/var/lib/kube-proxy/kubeconfig")},
		"clientConnection.acceptContentTypes": {good: str("application/json")},
		"clientConnection.contentType":        {good: str("application/vnd.kubernetes.protobuf", "application/json")},
		"clientConnection.qps":                {good: anyOf[float32](5, 50, 0.5), bad: anyOf[float32](-1)},
		"clientConnection.burst":              {good: i32(10, 100), bad: i32(-1)},
		"logging.format":                      {good: str("text", "json"), bad: str("xml")},
		"logging.flushFrequency":              {good: []any{logsapi.TimeOrMetaDuration{Duration: d("5s")}}, bad: []any{logsapi.TimeOrMetaDuration{Duration: d("-1s")}}},
		"logging.verbosity":                   {good: anyOf[uint32](0, 2), bad: anyOf[uint32](1 << 31)},
		"logging.vmodule":                     {good: []any{logsapi.VModuleConfiguration{{FilePattern: "proxier*", Verbosity: 4}}}, bad: []any{logsapi.VModuleConfiguration{{FilePattern: "a,b", Verbosity: 1}}}},
		"logging.options.text.splitStream":    {good: anyOf(false), bad: anyOf(true)},
		"logging.options.json.splitStream":    {good: anyOf(false), bad: anyOf(true)},
		"logging.options.text.infoBufferSize": {good: []any{quantityValue("0")}, bad: []any{quantityValue("64Ki")}},
		"logging.options.json.infoBufferSize": {good: []any{quantityValue("0")}, bad: []any{quantityValue("1Mi")}},
		"hostnameOverride":                    {good: str("node-1")},
		"bindAddress":                         {good: str("0.0.0.0", "10.0.0.5", "::", "::ffff:10.0.0.1", "010.000.000.005"), bad: str("localhost", "10.0.0.300", "[::]")},
		"healthzBindAddress":                  {good: str("0.0.0.0:10256", "10.0.0.5", "[::]:10256", "::1", ""), bad: str("0.0.0.0:0", "0.0.0.0:70000", "host:10256", "[::1]", "10.0.0.5:")},
		"metricsBindAddress":                  {good: str("127.0.0.1:10249", "0.0.0.0", "[::1]:10249", "fd00::1"), bad: str("localhost:10249", ":10249", "127.0.0.1:x")},
		"bindAddressHardFail":                 {good: anyOf(true, false)},
		"enableProfiling":                     {good: anyOf(true, false)},
		"showHiddenMetricsForVersion":         {good: str("1.36", ""), bad: str("1.35", "1.37", "x", "1.36.0")},
		"mode":                                {good: str("", "iptables", "ipvs", "nftables"), bad: str("kernelspace", "userspace", "IPTables")},
		"iptables.masqueradeBit":              {good: i32(14, 0, 31), bad: i32(-1, 32)},
		"iptables.masqueradeAll":              {good: anyOf(true, false)},
		"iptables.localhostNodePorts":         {good: anyOf(true, false)},
		"iptables.syncPeriod":                 {good: dur(d("30s"), d("1m")), bad: dur(d("-1s"), d("500ms"))},
		"iptables.minSyncPeriod":              {good: dur(d("1s"), d("0s"), d("10s")), bad: dur(d("-1s"), d("2m"))},
		"ipvs.syncPeriod":                     {good: dur(d("30s")), bad: dur(d("-5s"), d("500ms"))},
		"ipvs.minSyncPeriod":                  {good: dur(d("0s"), d("2s")), bad: dur(d("-1s"), d("1h"))},
		"ipvs.scheduler":                      {good: str("", "rr", "lc", "mh"), bad: str("roundrobin")},
		"ipvs.excludeCIDRs":                   {good: []any{[]string{"10.0.0.0/8"}, []string{"fd00::/8", "192.168.0.0/16"}}, bad: []any{[]string{"10.0.0.0"}, []string{"x"}}},
		"ipvs.strictARP":                      {good: anyOf(true, false)},
		"ipvs.tcpTimeout":                     {good: dur(d("0s"), d("15m")), bad: dur(d("-1s"))},
		"ipvs.tcpFinTimeout":                  {good: dur(d("0s"), d("2m")), bad: dur(d("-1s"))},
		"ipvs.udpTimeout":                     {good: dur(d("0s"), d("5m")), bad: dur(d("-1s"))},
		"nftables.masqueradeBit":              {good: i32(14, 0), bad: i32(-1, 40)},
		"nftables.masqueradeAll":              {good: anyOf(true, false)},
		"nftables.syncPeriod":                 {good: dur(d("30s")), bad: dur(d("-1s"))},
		"nftables.minSyncPeriod":              {good: dur(d("1s"), d("0s")), bad: dur(d("-1s"), d("10m"))},
		"detectLocalMode":                     {good: str("", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"), bad: str("clustercidr", "PodCIDR")},
		"detectLocal.bridgeInterface":         {good: str("cbr0")},
		"detectLocal.interfaceNamePrefix":     {good: str("veth")},
		"clusterCIDR":                         {good: str("10.244.0.0/16", "10.244.0.0/16,fd00::/48", ""), bad: str("10.244.0.0", "10.0.0.0/8,10.1.0.0/16", "a,b,c", "10.0.0.0/8,")},
		"nodePortAddresses":                   {good: []any{[]string{"primary"}, []string{"10.0.0.0/8", "localhost"}, []string{"all"}}, bad: []any{[]string{"primary", "primary"}, []string{"10.0.0.1"}, []string{"eth0"}}},
		"oomScoreAdj":                         {good: i32(-999, 0), bad: i32(-1001, 1001)},
		"conntrack.maxPerCore":                {good: i32(32768, 0), bad: i32(-1)},
		"conntrack.min":                       {good: i32(131072, 0), bad: i32(-1)},
		"conntrack.tcpEstablishedTimeout":     {good: dur(d("24h"), d("0s")), bad: dur(d("-1h"))},
		"conntrack.tcpCloseWaitTimeout":       {good: dur(d("1h")), bad: dur(d("-1s"))},
		"conntrack.tcpBeLiberal":              {good: anyOf(true, false)},
		"conntrack.udpTimeout":                {good: dur(d("30s"), d("0s")), bad: dur(d("-1s"))},
		"conntrack.udpStreamTimeout":          {good: dur(d("2m")), bad: dur(d("-1s"))},
		"configSyncPeriod":                    {good: dur(d("15m")), bad: dur(d("-1m"))},
		"portRange":                           {good: str("", "30000-32767", "30000+2767"), bad: str("30000", "x-y")},
		"winkernel.networkName":               {good: str("l2bridge")},
		"winkernel.sourceVip":                 {good: str("10.0.0.1")},
		"winkernel.enableDSR":                 {good: anyOf(false)},
		"winkernel.rootHnsEndpointName":       {good: str("cbr0")},
		"winkernel.forwardHealthCheckVip":     {good: anyOf(false)},
		"windowsRunAsService":                 {good: anyOf(false)},
	}
}

// kubeProxyGateNames are the gates the kube-proxy generator sets.
var kubeProxyGateNames = []string{"KubeProxyIPVS", "LoggingAlphaOptions", "LoggingBetaOptions", "AllAlpha", "AllBeta", "NFTablesNetlink", "ContextualLogging"}

// TestKubeProxyDefaults: kubeproxy.Profile.Default equals kube-proxy's own
// v1alpha1 defaulting (its scheme's), field for field, on generated
// configurations.
func TestKubeProxyDefaults(t *testing.T) {
	forEachCase(t, 4_000_000, kubeProxyCases, func(t *testing.T, seed int64, r *rand.Rand) {
		g := newKubeProxyGen(r, 0.3, 0.2)
		in := &proxyv1alpha1.KubeProxyConfiguration{}
		g.fill(in)
		in.FeatureGates = g.validGatesFrom(kubeProxyGateNames)

		want := in.DeepCopy()
		proxyscheme.Scheme.Default(want)
		got := in.DeepCopy()
		kubeproxy.Profile{}.Default(got)
		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("seed %d: Default differs from kube-proxy's (-kube-proxy +ours):\n%s\ninput:\n%s", seed, diff, dump(in))
		}
	})
}

// TestKubeProxyValidation: on generated configurations, valid and invalid,
// kubeproxy.Profile.Validate and kube-proxy's Validate (on the configuration
// converted to its internal type) agree on accept or reject and on the
// fields at fault, but for the differences components/kubeproxy/doc.go
// lists (kubeProxyStricter, kubeProxyLeftOut).
func TestKubeProxyValidation(t *testing.T) {
	var accepted, rejected, gatesRejected int
	forEachCase(t, 5_000_000, kubeProxyCases, func(t *testing.T, seed int64, r *rand.Rand) {
		var g *gen
		if r.Float64() < 0.5 {
			g = newKubeProxyGen(r, 0.15, 0)
		} else {
			g = newKubeProxyGen(r, 0.3, pick(&gen{r: r}, 0.02, 0.1, 0.3))
		}
		kc := &proxyv1alpha1.KubeProxyConfiguration{}
		g.fill(kc)
		switch {
		case g.chance(0.6):
			kc.FeatureGates = g.validGatesFrom(kubeProxyGateNames)
		case g.chance(0.5):
			kc.FeatureGates = g.featureGates(true)
		default:
			kc.FeatureGates = g.dependentGates()
		}
		// kube-proxy validates defaulted configurations only (its Validate
		// dereferences conntrack timeouts the defaults set).
		kubeproxy.Profile{}.Default(kc)

		var oursGates bool
		for _, e := range (kubeproxy.Profile{}).Validate(kc) {
			oursGates = oursGates || normalizeProxyPath(e.Field, kc) == "featureGates"
		}
		if err := gatesAccepted(kc.FeatureGates); err != nil {
			// kube-proxy stops at its featureGates (Options.Complete, and
			// its Validate sets them first): we must reject them too.
			if !oursGates && !kubeProxyAllowed(kubeProxyLeftOut, "featureGates", kc) {
				t.Errorf("seed %d: kube-proxy rejects featureGates %v (%v), we do not", seed, kc.FeatureGates, err)
			}
			gatesRejected++
			return
		}
		upstream := kubeProxyUpstreamPaths(t, kc)
		ours := map[string]bool{}
		for _, e := range (kubeproxy.Profile{}).Validate(kc) {
			ours[normalizeProxyPath(e.Field, kc)] = true
		}
		for p := range ours {
			if !upstream[p] && !kubeProxyAllowed(kubeProxyStricter, p, kc) {
				t.Errorf("seed %d: we reject %s, kube-proxy does not, and no listed difference explains it\nkube-proxy: %v\nours: %v\ninput:\n%s",
					seed, p, sortedSet(upstream), (kubeproxy.Profile{}).Validate(kc), dump(kc))
			}
		}
		for p := range upstream {
			if !ours[p] && !kubeProxyAllowed(kubeProxyLeftOut, p, kc) {
				t.Errorf("seed %d: kube-proxy rejects %s, we do not\nkube-proxy: %v\nours: %v\ninput:\n%s",
					seed, p, kubeProxyUpstreamErrors(t, kc), (kubeproxy.Profile{}).Validate(kc), dump(kc))
			}
		}
		if len(ours) == 0 {
			accepted++
		} else {
			rejected++
		}
	})
	t.Logf("we accepted %d configurations, rejected %d; kube-proxy rejected %d for their featureGates, and so did we", accepted, rejected, gatesRejected)
	if total := accepted + rejected + gatesRejected; total >= 100 && gatesRejected < total/20 {
		t.Errorf("the generator is lopsided: only %d of %d configurations have featureGates kube-proxy rejects", gatesRejected, total)
	}
	if total := accepted + rejected; total >= 100 && (accepted < total/10 || rejected < total/10) {
		t.Errorf("the generator is lopsided: %d accepted, %d rejected", accepted, rejected)
	}
}

func kubeProxyUpstreamErrors(t *testing.T, kc *proxyv1alpha1.KubeProxyConfiguration) field.ErrorList {
	t.Helper()
	in := kc.DeepCopy()
	// Judged by the binary's version, which a test binary does not have:
	// see kubeProxyUpstreamPaths.
	in.ShowHiddenMetricsForVersion = ""
	// kube-proxy completes its configuration for the platform before it
	// validates it (cmd/kube-proxy/app Options.Complete,
	// platformApplyDefaults on Linux): an empty mode is iptables, an empty
	// detectLocalMode is ClusterCIDR, nftables without nodePortAddresses
	// serves the primary addresses. The profile leaves these unset, for
	// kube-proxy to decide, and validates them as kube-proxy will.
	if in.Mode == "" {
		in.Mode = "iptables"
	}
	if in.Mode == "nftables" && len(in.NodePortAddresses) == 0 {
		in.NodePortAddresses = []string{"primary"}
	}
	if in.DetectLocalMode == "" {
		in.DetectLocalMode = "ClusterCIDR"
	}
	internal := &proxyconfig.KubeProxyConfiguration{}
	if err := proxyscheme.Scheme.Convert(in, internal, nil); err != nil {
		t.Fatalf("converting to kube-proxy's internal type: %v", err)
	}
	// kube-proxy sets its global feature gate from the configuration before
	// it validates (Options.Complete), and its mode check reads that gate:
	// do the same on a copy, for this call only.
	saved, savedRO := utilfeature.DefaultMutableFeatureGate, utilfeature.DefaultFeatureGate
	fg := saved.DeepCopy()
	if err := fg.SetFromMap(in.FeatureGates); err != nil {
		t.Fatalf("featureGates were checked before: %v", err)
	}
	utilfeature.DefaultMutableFeatureGate, utilfeature.DefaultFeatureGate = fg, fg
	defer func() { utilfeature.DefaultMutableFeatureGate, utilfeature.DefaultFeatureGate = saved, savedRO }()
	return proxyvalidation.Validate(internal)
}

// kubeProxyUpstreamPaths returns the JSON fields kube-proxy rejects kc for.
func kubeProxyUpstreamPaths(t *testing.T, kc *proxyv1alpha1.KubeProxyConfiguration) map[string]bool {
	out := map[string]bool{}
	for _, e := range kubeProxyUpstreamErrors(t, kc) {
		out[upstreamProxyPath(t, e.Field, kc)] = true
	}
	if metricsapi.ValidateShowHiddenMetricsVersionForKubeletBackwardCompatOnly(semver.MustParse("1.37.0"), kc.ShowHiddenMetricsForVersion) != nil {
		out["showHiddenMetricsForVersion"] = true
	}
	return out
}

// proxyPaths maps kube-proxy's validation paths (Go names of its internal
// type) to the v1alpha1 JSON paths, after the "KubeProxyConfiguration."
// prefix and any index are taken off.
var proxyPaths = map[string]string{
	"featureGates": "featureGates",
	"KubeProxyIPTablesConfiguration.MasqueradeBit":                                      "iptables.masqueradeBit",
	"KubeProxyNFTablesConfiguration.MasqueradeBit":                                      "nftables.masqueradeBit",
	"KubeProxyIPVSConfiguration.TCPTimeout":                                             "ipvs.tcpTimeout",
	"KubeProxyIPVSConfiguration.TCPFinTimeout":                                          "ipvs.tcpFinTimeout",
	"KubeProxyIPVSConfiguration.UDPTimeout":                                             "ipvs.udpTimeout",
	"KubeProxyIPVSConfiguration.ExcludeCidrs":                                           "ipvs.excludeCIDRs",
	"KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.MaxPerCore":            "conntrack.maxPerCore",
	"KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.Min":                   "conntrack.min",
	"KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.TCPEstablishedTimeout": "conntrack.tcpEstablishedTimeout",
	"KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.TCPCloseWaitTimeout":   "conntrack.tcpCloseWaitTimeout",
	"KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.UDPTimeout":            "conntrack.udpTimeout",
	"KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.UDPStreamTimeout":      "conntrack.udpStreamTimeout",
	"KubeProxyLinuxConfiguration.OOMScoreAdj":                                           "oomScoreAdj",
	"Mode.ProxyMode":                           "mode",
	"ClientConnection.Burst":                   "clientConnection.burst",
	"ConfigSyncPeriod":                         "configSyncPeriod",
	"BindAddress":                              "bindAddress",
	"HealthzBindAddress":                       "healthzBindAddress",
	"MetricsBindAddress":                       "metricsBindAddress",
	"NodePortAddresses":                        "nodePortAddresses",
	"ShowHiddenMetricsForVersion":              "showHiddenMetricsForVersion",
	"DetectLocalMode":                          "detectLocalMode",
	"DetectLocalConfiguration.InterfaceName":   "detectLocal.bridgeInterface",
	"DetectLocalConfiguration.InterfacePrefix": "detectLocal.interfaceNamePrefix",
	"DetectLocalConfiguration.ClusterCIDRs":    "clusterCIDR",
}

func upstreamProxyPath(t *testing.T, p string, kc *proxyv1alpha1.KubeProxyConfiguration) string {
	t.Helper()
	p, _, _ = strings.Cut(strings.TrimPrefix(p, "KubeProxyConfiguration."), "[")
	switch {
	case p == "SyncPeriod" || p == "MinSyncPeriod":
		return proxyMode(kc) + ".syncPeriods"
	case strings.HasPrefix(p, "logging."):
		return p
	}
	if j, ok := proxyPaths[p]; ok {
		return j
	}
	t.Fatalf("no JSON path known for kube-proxy's validation path %q: add it to proxyPaths", p)
	return ""
}

// normalizeProxyPath brings our paths to the comparison's granularity: up
// to the first map key or list index, and a backend's syncPeriod and
// minSyncPeriod as one (kube-proxy reports their relation on either).
func normalizeProxyPath(p string, kc *proxyv1alpha1.KubeProxyConfiguration) string {
	p, _, _ = strings.Cut(p, "[")
	if section, f, ok := strings.Cut(p, "."); ok && (f == "syncPeriod" || f == "minSyncPeriod") && section == proxyMode(kc) {
		return section + ".syncPeriods"
	}
	return p
}

func proxyMode(kc *proxyv1alpha1.KubeProxyConfiguration) string {
	switch kc.Mode {
	case "ipvs", "nftables":
		return string(kc.Mode)
	}
	return "iptables"
}

// proxyDifference is a difference components/kubeproxy/doc.go lists,
// allowed for exactly the configurations applies describes.
type proxyDifference struct {
	path    string
	applies func(kc *proxyv1alpha1.KubeProxyConfiguration) bool
}

// kubeProxyStricter: checks we make and kube-proxy's Validate does not
// (components/kubeproxy/doc.go, "Checks added beyond upstream").
var kubeProxyStricter = []proxyDifference{
	{"clientConnection.qps", func(kc *proxyv1alpha1.KubeProxyConfiguration) bool {
		return !(kc.ClientConnection.QPS >= 0)
	}},
	{"portRange", func(kc *proxyv1alpha1.KubeProxyConfiguration) bool {
		_, err := utilnet.ParsePortRange(kc.PortRange)
		return kc.PortRange != "" && err != nil
	}},
	{"ipvs.scheduler", func(kc *proxyv1alpha1.KubeProxyConfiguration) bool {
		return kc.Mode == "ipvs" && kc.IPVS.Scheduler != "" && !slices.Contains(linuxIPVSSchedulers, kc.IPVS.Scheduler)
	}},
}

// linuxIPVSSchedulers are the schedulers of the Linux kernel's IPVS.
var linuxIPVSSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// kubeProxyLeftOut: kube-proxy's checks we leave out
// (components/kubeproxy/doc.go, "Upstream checks left out"): none.
var kubeProxyLeftOut = []proxyDifference{}

// dependentGates draws a featureGates map around the gates that depend on
// others: one enabled, its dependencies each on, off or unset, sometimes
// with AllAlpha or AllBeta, so that both sides judge dependencies.
func (g *gen) dependentGates() map[string]bool {
	var dependents []kubeletgates.Gate
	for _, k := range knownGates {
		if len(k.DependsOn) > 0 && !k.Locked && k.Stage != kubeletgates.PreAlpha {
			dependents = append(dependents, k)
		}
	}
	d := pick(g, dependents...)
	m := map[string]bool{d.Name: g.chance(0.8)}
	for _, dep := range d.DependsOn {
		switch g.r.Intn(3) {
		case 0:
			m[dep] = true
		case 1:
			m[dep] = false
		}
	}
	if g.chance(0.3) {
		m[pick(g, kubeletgates.AllAlpha, kubeletgates.AllBeta)] = g.chance(0.5)
	}
	return m
}

func kubeProxyAllowed(list []proxyDifference, path string, kc *proxyv1alpha1.KubeProxyConfiguration) bool {
	return slices.ContainsFunc(list, func(d proxyDifference) bool { return d.path == path && d.applies(kc) })
}

type metavDuration = metav1.Duration

func quantityValue(s string) resource.QuantityValue {
	return resource.QuantityValue{Quantity: resource.MustParse(s)}
}
