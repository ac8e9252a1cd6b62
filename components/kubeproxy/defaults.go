package kubeproxy

import (
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
)

// Default values, as kube-proxy's v1alpha1 defaulting sets them on Linux.
const (
	defaultBindAddress      = "0.0.0.0"
	defaultHealthzPort      = 10256 // kube-proxy's well-known healthz port
	defaultMetricsPort      = 10249 // kube-proxy's well-known metrics (status) port
	defaultOOMScoreAdj      = -999  // the kubelet's QoS value reserved for kube-proxy
	defaultSyncPeriod       = 30 * time.Second
	defaultMinSyncPeriod    = time.Second
	defaultMasqueradeBit    = 14
	defaultConntrackPerCore = 32 * 1024
	defaultConntrackMin     = 128 * 1024
	// An idle established TCP flow is forgotten after a day: a fifth of the
	// kernel's own five-day default, which is far longer than any NAT needs.
	defaultTCPEstablishedTimeout = 24 * time.Hour
	// CLOSE_WAIT entries live an hour: if they expired sooner than the
	// remote side's FIN_WAIT timers, the final FIN of a half-closed,
	// SNAT'd connection would leave untranslated and a later connection
	// reusing the same source port could be reset by the peer.
	defaultTCPCloseWaitTimeout = time.Hour
	defaultConfigSyncPeriod    = 15 * time.Minute
	defaultContentType         = "application/vnd.kubernetes.protobuf"
	defaultQPS                 = 5
	defaultBurst               = 10
)

func setDefaults(c *v1alpha1.KubeProxyConfiguration) {
	if c == nil {
		return
	}
	if c.BindAddress == "" {
		c.BindAddress = defaultBindAddress
	}
	// The healthz and metrics servers listen on the family of bindAddress:
	// anything that is not an IPv4 address (IPv6, or garbage that
	// validation will reject) selects the IPv6 wildcard and loopback.
	healthzHost, metricsHost := "::", "::1"
	if isIPv4(c.BindAddress) {
		healthzHost, metricsHost = "0.0.0.0", "127.0.0.1"
	}
	c.HealthzBindAddress = withDefaultPort(c.HealthzBindAddress, healthzHost, defaultHealthzPort)
	c.MetricsBindAddress = withDefaultPort(c.MetricsBindAddress, metricsHost, defaultMetricsPort)

	if c.OOMScoreAdj == nil {
		c.OOMScoreAdj = ptr.To[int32](defaultOOMScoreAdj)
	}

	setDuration(&c.IPTables.SyncPeriod, defaultSyncPeriod)
	setDuration(&c.IPTables.MinSyncPeriod, defaultMinSyncPeriod)
	if c.IPTables.LocalhostNodePorts == nil {
		c.IPTables.LocalhostNodePorts = ptr.To(true)
	}
	if c.IPTables.MasqueradeBit == nil {
		c.IPTables.MasqueradeBit = ptr.To[int32](defaultMasqueradeBit)
	}
	// ipvs.minSyncPeriod has no default: zero means "resync on every change".
	setDuration(&c.IPVS.SyncPeriod, defaultSyncPeriod)
	setDuration(&c.NFTables.SyncPeriod, defaultSyncPeriod)
	setDuration(&c.NFTables.MinSyncPeriod, defaultMinSyncPeriod)
	if c.NFTables.MasqueradeBit == nil {
		c.NFTables.MasqueradeBit = ptr.To[int32](defaultMasqueradeBit)
	}

	if c.Conntrack.MaxPerCore == nil {
		c.Conntrack.MaxPerCore = ptr.To[int32](defaultConntrackPerCore)
	}
	if c.Conntrack.Min == nil {
		c.Conntrack.Min = ptr.To[int32](defaultConntrackMin)
	}
	if c.Conntrack.TCPEstablishedTimeout == nil {
		c.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: defaultTCPEstablishedTimeout}
	}
	if c.Conntrack.TCPCloseWaitTimeout == nil {
		c.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: defaultTCPCloseWaitTimeout}
	}
	setDuration(&c.ConfigSyncPeriod, defaultConfigSyncPeriod)

	if c.ClientConnection.ContentType == "" {
		c.ClientConnection.ContentType = defaultContentType
	}
	if c.ClientConnection.QPS == 0 {
		c.ClientConnection.QPS = defaultQPS
	}
	if c.ClientConnection.Burst == 0 {
		c.ClientConnection.Burst = defaultBurst
	}
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	// component-base owns the logging defaults (format text, flush every
	// 5s, zero info buffers); it too only fills unset fields.
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
}

// setDuration sets d to def when d is zero. For these non-pointer fields
// zero and "unset" cannot be told apart, exactly as upstream.
func setDuration(d *metav1.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// withDefaultPort returns addr completed the way kube-proxy completes its
// listen addresses: empty becomes host:port, a bare IP gains the port (in
// brackets for IPv6), and anything else (already host:port, or invalid and
// left for validation to report) is returned unchanged.
func withDefaultPort(addr, host string, port int) string {
	if addr == "" {
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if _, ok := ipFamily(addr); !ok {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}
