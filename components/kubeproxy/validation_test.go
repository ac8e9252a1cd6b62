package kubeproxy

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// fieldErr is the part of a field.Error the tests pin down: the kind of
// error and the JSON path it names.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func summarize(errs field.ErrorList) []fieldErr {
	var out []fieldErr
	for _, e := range errs {
		out = append(out, fieldErr{e.Type, e.Field})
	}
	return out
}

func defaulted(mutate func(*v1alpha1.KubeProxyConfiguration)) *v1alpha1.KubeProxyConfiguration {
	cfg := &v1alpha1.KubeProxyConfiguration{}
	Profile{}.Default(cfg)
	if mutate != nil {
		mutate(cfg)
	}
	return cfg
}

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func invalid(path string) fieldErr      { return fieldErr{field.ErrorTypeInvalid, path} }
func required(path string) fieldErr     { return fieldErr{field.ErrorTypeRequired, path} }
func notSupported(path string) fieldErr { return fieldErr{field.ErrorTypeNotSupported, path} }
func forbidden(path string) fieldErr    { return fieldErr{field.ErrorTypeForbidden, path} }

type cfgFunc = func(*v1alpha1.KubeProxyConfiguration)

// TestValidateRules has, for every rule, at least one configuration that
// passes and one that fails, and pins the exact type and path of each error.
// Every case starts from the defaults of an empty configuration.
func TestValidateRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate cfgFunc
		want   []fieldErr
	}{
		// mode
		{"mode empty", func(c *v1alpha1.KubeProxyConfiguration) { c.Mode = "" }, nil},
		{"mode iptables", func(c *v1alpha1.KubeProxyConfiguration) { c.Mode = "iptables" }, nil},
		{"mode ipvs", func(c *v1alpha1.KubeProxyConfiguration) { c.Mode = "ipvs" }, nil},
		{"mode nftables", func(c *v1alpha1.KubeProxyConfiguration) { c.Mode = "nftables" }, nil},
		{"mode kernelspace is Windows-only", func(c *v1alpha1.KubeProxyConfiguration) { c.Mode = "kernelspace" },
			[]fieldErr{notSupported("mode")}},
		{"mode userspace was removed", func(c *v1alpha1.KubeProxyConfiguration) { c.Mode = "userspace" },
			[]fieldErr{notSupported("mode")}},

		// iptables sync periods (the empty mode reads iptables)
		{"iptables minSync equal to sync", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPTables.MinSyncPeriod = dur(30 * time.Second)
		}, nil},
		{"iptables sync not positive", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPTables.SyncPeriod = dur(-time.Second)
		}, []fieldErr{invalid("iptables.syncPeriod")}},
		{"iptables minSync negative", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPTables.MinSyncPeriod = dur(-time.Second)
		}, []fieldErr{invalid("iptables.minSyncPeriod")}},
		{"iptables minSync above sync", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPTables.MinSyncPeriod = dur(time.Minute)
		}, []fieldErr{invalid("iptables.minSyncPeriod")}},
		{"iptables mode checks iptables periods", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "iptables"
			c.IPTables.SyncPeriod = dur(0)
		}, []fieldErr{invalid("iptables.syncPeriod")}},
		{"ipvs mode ignores iptables periods", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPTables.SyncPeriod = dur(0)
		}, nil},

		// masquerade bits
		{"iptables masqueradeBit 0 and 31", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPTables.MasqueradeBit = ptr.To[int32](31)
			c.NFTables.MasqueradeBit = ptr.To[int32](0)
		}, nil},
		{"iptables masqueradeBit 32", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPTables.MasqueradeBit = ptr.To[int32](32)
		}, []fieldErr{invalid("iptables.masqueradeBit")}},
		{"iptables masqueradeBit checked in ipvs mode", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPTables.MasqueradeBit = ptr.To[int32](-1)
		}, []fieldErr{invalid("iptables.masqueradeBit")}},
		{"nftables masqueradeBit ignored outside nftables mode", func(c *v1alpha1.KubeProxyConfiguration) {
			c.NFTables.MasqueradeBit = ptr.To[int32](32)
		}, nil},
		{"nftables masqueradeBit in nftables mode", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "nftables"
			c.NFTables.MasqueradeBit = ptr.To[int32](32)
		}, []fieldErr{invalid("nftables.masqueradeBit")}},

		// nftables sync periods
		{"nftables periods", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "nftables"
			c.NFTables.SyncPeriod = dur(time.Minute)
			c.NFTables.MinSyncPeriod = dur(0)
		}, nil},
		{"nftables sync not positive", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "nftables"
			c.NFTables.SyncPeriod = dur(0)
		}, []fieldErr{invalid("nftables.syncPeriod")}},
		{"nftables minSync above sync", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "nftables"
			c.NFTables.MinSyncPeriod = dur(time.Hour)
		}, []fieldErr{invalid("nftables.minSyncPeriod")}},

		// ipvs
		{"ipvs settings", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.MinSyncPeriod = dur(5 * time.Second)
			c.IPVS.Scheduler = "mh"
			c.IPVS.ExcludeCIDRs = []string{"10.0.0.0/8", "fd00::/8"}
			c.IPVS.TCPTimeout = dur(0)
			c.IPVS.TCPFinTimeout = dur(time.Second)
		}, nil},
		{"ipvs sync not positive", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.SyncPeriod = dur(0)
		}, []fieldErr{invalid("ipvs.syncPeriod")}},
		{"ipvs minSync negative", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.MinSyncPeriod = dur(-time.Second)
		}, []fieldErr{invalid("ipvs.minSyncPeriod")}},
		{"ipvs minSync above sync", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.MinSyncPeriod = dur(time.Hour)
		}, []fieldErr{invalid("ipvs.minSyncPeriod")}},
		{"ipvs timeouts negative", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.TCPTimeout = dur(-time.Second)
			c.IPVS.TCPFinTimeout = dur(-time.Second)
			c.IPVS.UDPTimeout = dur(-time.Second)
		}, []fieldErr{invalid("ipvs.tcpTimeout"), invalid("ipvs.tcpFinTimeout"), invalid("ipvs.udpTimeout")}},
		{"ipvs scheduler unknown", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.Scheduler = "random"
		}, []fieldErr{notSupported("ipvs.scheduler")}},
		{"ipvs section ignored in iptables mode", func(c *v1alpha1.KubeProxyConfiguration) {
			c.IPVS.Scheduler = "random"
			c.IPVS.ExcludeCIDRs = []string{"nope"}
		}, nil},
		{"ipvs excludeCIDRs entry not a CIDR", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.IPVS.ExcludeCIDRs = []string{"10.0.0.0/8", "10.0.0.1"}
		}, []fieldErr{invalid("ipvs.excludeCIDRs[1]")}},

		// addresses
		{"bindAddress IPv6 with matching listen addresses", func(c *v1alpha1.KubeProxyConfiguration) {
			c.BindAddress = "fd00::1"
			c.HealthzBindAddress = "[::]:10256"
			c.MetricsBindAddress = "[::1]:10249"
		}, nil},
		{"bindAddress with leading zeros, as kube-proxy accepts", func(c *v1alpha1.KubeProxyConfiguration) {
			c.BindAddress = "010.000.000.001"
		}, nil},
		{"bindAddress hostname", func(c *v1alpha1.KubeProxyConfiguration) { c.BindAddress = "node-1" },
			[]fieldErr{invalid("bindAddress")}},
		{"bindAddress with zone", func(c *v1alpha1.KubeProxyConfiguration) { c.BindAddress = "fe80::1%eth0" },
			[]fieldErr{invalid("bindAddress")}},
		{"bindAddress empty", func(c *v1alpha1.KubeProxyConfiguration) { c.BindAddress = "" },
			[]fieldErr{invalid("bindAddress")}},
		{"healthz empty disables it", func(c *v1alpha1.KubeProxyConfiguration) { c.HealthzBindAddress = "" }, nil},
		{"healthz ports 1 and 65535", func(c *v1alpha1.KubeProxyConfiguration) {
			c.HealthzBindAddress = "0.0.0.0:1"
			c.MetricsBindAddress = "127.0.0.1:65535"
		}, nil},
		{"healthz without port", func(c *v1alpha1.KubeProxyConfiguration) { c.HealthzBindAddress = "0.0.0.0" },
			[]fieldErr{invalid("healthzBindAddress")}},
		{"healthz port 0", func(c *v1alpha1.KubeProxyConfiguration) { c.HealthzBindAddress = "0.0.0.0:0" },
			[]fieldErr{invalid("healthzBindAddress")}},
		{"healthz port 65536", func(c *v1alpha1.KubeProxyConfiguration) { c.HealthzBindAddress = "0.0.0.0:65536" },
			[]fieldErr{invalid("healthzBindAddress")}},
		{"healthz hostname and named port", func(c *v1alpha1.KubeProxyConfiguration) { c.HealthzBindAddress = "localhost:http" },
			[]fieldErr{invalid("healthzBindAddress"), invalid("healthzBindAddress")}},
		{"healthz IPv6 without brackets", func(c *v1alpha1.KubeProxyConfiguration) { c.HealthzBindAddress = "::1:10256" },
			[]fieldErr{invalid("healthzBindAddress")}},
		{"metrics empty", func(c *v1alpha1.KubeProxyConfiguration) { c.MetricsBindAddress = "" },
			[]fieldErr{required("metricsBindAddress")}},
		{"metrics bad port", func(c *v1alpha1.KubeProxyConfiguration) { c.MetricsBindAddress = "127.0.0.1:-1" },
			[]fieldErr{invalid("metricsBindAddress")}},

		// clientConnection
		{"qps and burst zero", func(c *v1alpha1.KubeProxyConfiguration) {
			c.ClientConnection.QPS = 0
			c.ClientConnection.Burst = 0
		}, nil},
		{"qps negative", func(c *v1alpha1.KubeProxyConfiguration) { c.ClientConnection.QPS = -1 },
			[]fieldErr{invalid("clientConnection.qps")}},
		{"qps NaN", func(c *v1alpha1.KubeProxyConfiguration) { c.ClientConnection.QPS = float32(math.NaN()) },
			[]fieldErr{invalid("clientConnection.qps")}},
		{"burst negative", func(c *v1alpha1.KubeProxyConfiguration) { c.ClientConnection.Burst = -1 },
			[]fieldErr{invalid("clientConnection.burst")}},

		// conntrack
		{"conntrack zeros and nils", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Conntrack = v1alpha1.KubeProxyConntrackConfiguration{MaxPerCore: ptr.To[int32](0)}
		}, nil},
		{"conntrack negatives", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Conntrack.MaxPerCore = ptr.To[int32](-1)
			c.Conntrack.Min = ptr.To[int32](-1)
			c.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: -time.Second}
			c.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: -time.Second}
			c.Conntrack.UDPTimeout = dur(-time.Second)
			c.Conntrack.UDPStreamTimeout = dur(-time.Second)
		}, []fieldErr{
			invalid("conntrack.maxPerCore"), invalid("conntrack.min"),
			invalid("conntrack.tcpEstablishedTimeout"), invalid("conntrack.tcpCloseWaitTimeout"),
			invalid("conntrack.udpTimeout"), invalid("conntrack.udpStreamTimeout"),
		}},

		// oomScoreAdj, configSyncPeriod
		{"oomScoreAdj bounds", func(c *v1alpha1.KubeProxyConfiguration) { c.OOMScoreAdj = ptr.To[int32](-1000) }, nil},
		{"oomScoreAdj upper bound", func(c *v1alpha1.KubeProxyConfiguration) { c.OOMScoreAdj = ptr.To[int32](1000) }, nil},
		{"oomScoreAdj too high", func(c *v1alpha1.KubeProxyConfiguration) { c.OOMScoreAdj = ptr.To[int32](1001) },
			[]fieldErr{invalid("oomScoreAdj")}},
		{"oomScoreAdj too low", func(c *v1alpha1.KubeProxyConfiguration) { c.OOMScoreAdj = ptr.To[int32](-1001) },
			[]fieldErr{invalid("oomScoreAdj")}},
		{"configSyncPeriod zero", func(c *v1alpha1.KubeProxyConfiguration) { c.ConfigSyncPeriod = dur(0) },
			[]fieldErr{invalid("configSyncPeriod")}},

		// detectLocalMode and its fields
		{"detectLocalMode NodeCIDR", func(c *v1alpha1.KubeProxyConfiguration) { c.DetectLocalMode = "NodeCIDR" }, nil},
		{"detectLocalMode unknown", func(c *v1alpha1.KubeProxyConfiguration) { c.DetectLocalMode = "PodCIDR" },
			[]fieldErr{notSupported("detectLocalMode")}},
		{"BridgeInterface with its interface", func(c *v1alpha1.KubeProxyConfiguration) {
			c.DetectLocalMode = "BridgeInterface"
			c.DetectLocal.BridgeInterface = "cbr0"
		}, nil},
		{"BridgeInterface without its interface", func(c *v1alpha1.KubeProxyConfiguration) {
			c.DetectLocalMode = "BridgeInterface"
			c.DetectLocal.InterfaceNamePrefix = "veth"
		}, []fieldErr{required("detectLocal.bridgeInterface")}},
		{"InterfaceNamePrefix with its prefix", func(c *v1alpha1.KubeProxyConfiguration) {
			c.DetectLocalMode = "InterfaceNamePrefix"
			c.DetectLocal.InterfaceNamePrefix = "veth"
		}, nil},
		{"InterfaceNamePrefix without its prefix", func(c *v1alpha1.KubeProxyConfiguration) {
			c.DetectLocalMode = "InterfaceNamePrefix"
			c.DetectLocal.BridgeInterface = "cbr0"
		}, []fieldErr{required("detectLocal.interfaceNamePrefix")}},

		// clusterCIDR
		{"clusterCIDR single", func(c *v1alpha1.KubeProxyConfiguration) { c.ClusterCIDR = "10.244.0.0/16" }, nil},
		{"clusterCIDR dual-stack", func(c *v1alpha1.KubeProxyConfiguration) {
			c.DetectLocalMode = "ClusterCIDR"
			c.ClusterCIDR = "10.244.0.0/16,fd00:10:244::/56"
		}, nil},
		{"clusterCIDR dual-stack IPv6 first", func(c *v1alpha1.KubeProxyConfiguration) {
			c.ClusterCIDR = "fd00:10:244::/56,10.244.0.0/16"
		}, nil},
		{"clusterCIDR two IPv4", func(c *v1alpha1.KubeProxyConfiguration) { c.ClusterCIDR = "10.244.0.0/16,10.245.0.0/16" },
			[]fieldErr{invalid("clusterCIDR")}},
		{"clusterCIDR three", func(c *v1alpha1.KubeProxyConfiguration) {
			c.ClusterCIDR = "10.244.0.0/16,fd00::/56,10.1.0.0/16"
		}, []fieldErr{invalid("clusterCIDR")}},
		{"clusterCIDR an IP", func(c *v1alpha1.KubeProxyConfiguration) { c.ClusterCIDR = "10.244.0.1" },
			[]fieldErr{invalid("clusterCIDR")}},
		{"clusterCIDR both halves bad", func(c *v1alpha1.KubeProxyConfiguration) { c.ClusterCIDR = "10.0.0.0/33,x" },
			[]fieldErr{invalid("clusterCIDR"), invalid("clusterCIDR")}},
		{"clusterCIDR unread in NodeCIDR mode", func(c *v1alpha1.KubeProxyConfiguration) {
			c.DetectLocalMode = "NodeCIDR"
			c.ClusterCIDR = "garbage"
		}, nil},

		// nodePortAddresses
		{"nodePortAddresses keywords and CIDRs", func(c *v1alpha1.KubeProxyConfiguration) {
			c.NodePortAddresses = []string{"primary", "localhost", "10.0.0.0/8", "fd00::/64", "all"}
		}, nil},
		{"nodePortAddresses keyword twice", func(c *v1alpha1.KubeProxyConfiguration) {
			c.NodePortAddresses = []string{"primary", "10.0.0.0/8", "primary"}
		}, []fieldErr{{field.ErrorTypeDuplicate, "nodePortAddresses[2]"}}},
		{"ipvs mode with KubeProxyIPVS off", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.FeatureGates = map[string]bool{"KubeProxyIPVS": false}
		}, []fieldErr{forbidden("mode")}},
		{"ipvs mode with AllBeta off (KubeProxyIPVS is deprecated, not beta)", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Mode = "ipvs"
			c.FeatureGates = map[string]bool{"AllBeta": false}
		}, nil},
		{"nodePortAddresses unknown keyword", func(c *v1alpha1.KubeProxyConfiguration) {
			c.NodePortAddresses = []string{"primary", "public"}
		}, []fieldErr{invalid("nodePortAddresses[1]")}},
		{"nodePortAddresses IP without prefix", func(c *v1alpha1.KubeProxyConfiguration) {
			c.NodePortAddresses = []string{"10.0.0.1", "10.0.0.0/8", "1.2.3"}
		}, []fieldErr{invalid("nodePortAddresses[0]"), invalid("nodePortAddresses[2]")}},

		// featureGates
		{"featureGates names", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"AllAlpha": false, "KubeProxyIPVS": true, "KubeProxyNFTablesLocalhostNodePorts": true}
		}, nil},
		{"featureGates unknown names sorted", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"NoSuchGate": true, "lowerCase": true, "With-Dash": false, "": true}
		}, []fieldErr{invalid("featureGates[]"), invalid("featureGates[NoSuchGate]"), invalid("featureGates[With-Dash]"), invalid("featureGates[lowerCase]")}},
		{"featureGates name in the wrong case", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"kubeProxyIPVS": true}
		}, []fieldErr{invalid("featureGates[kubeProxyIPVS]")}},
		{"featureGates locked gate at its default", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"CPUManagerPolicyOptions": true}
		}, nil},
		{"featureGates locked gate moved", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"CPUManagerPolicyOptions": false}
		}, []fieldErr{forbidden("featureGates[CPUManagerPolicyOptions]")}},
		{"featureGates dependency disabled", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"WorkloadWithJob": true}
		}, []fieldErr{invalid("featureGates[WorkloadWithJob]")}},
		{"featureGates dependency enabled", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"WorkloadWithJob": true, "GenericWorkload": true}
		}, nil},
		{"featureGates AllAlpha alone enables alpha gates whose beta dependencies stay off", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"AllAlpha": true}
		}, []fieldErr{invalid("featureGates[AllAlpha]"), invalid("featureGates[AllAlpha]"), invalid("featureGates[AllAlpha]"), invalid("featureGates[AllAlpha]")}},

		// logging
		{"logging json", func(c *v1alpha1.KubeProxyConfiguration) { c.Logging.Format = "json" }, nil},
		{"logging json without beta gate", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.Format = "json"
			c.FeatureGates["LoggingBetaOptions"] = false
		}, []fieldErr{forbidden("logging.format")}},
		{"logging json with AllBeta off", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.Format = "json"
			c.FeatureGates["AllBeta"] = false
		}, []fieldErr{forbidden("logging.format")}},
		{"logging json: explicit gate beats AllBeta", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.Format = "json"
			c.FeatureGates["AllBeta"] = false
			c.FeatureGates["LoggingBetaOptions"] = true
		}, nil},
		{"logging format unknown", func(c *v1alpha1.KubeProxyConfiguration) { c.Logging.Format = "xml" },
			[]fieldErr{notSupported("logging.format")}},
		{"logging flushFrequency zero", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.FlushFrequency.Duration = dur(0)
		}, []fieldErr{invalid("logging.flushFrequency")}},
		{"logging verbosity max", func(c *v1alpha1.KubeProxyConfiguration) { c.Logging.Verbosity = math.MaxInt32 }, nil},
		{"logging verbosity too high", func(c *v1alpha1.KubeProxyConfiguration) { c.Logging.Verbosity = math.MaxInt32 + 1 },
			[]fieldErr{invalid("logging.verbosity")}},
		{"logging vmodule", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "proxier*", Verbosity: 4}}
		}, nil},
		{"logging vmodule with json", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.Format = "json"
			c.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "proxier*", Verbosity: 4}}
		}, []fieldErr{forbidden("logging.vmodule")}},
		{"logging vmodule items", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.VModule = logsapi.VModuleConfiguration{
				{FilePattern: "", Verbosity: 1},
				{FilePattern: "a=b", Verbosity: 1},
				{FilePattern: "ok", Verbosity: math.MaxInt32 + 1},
			}
		}, []fieldErr{
			required("logging.vmodule[0].filePattern"),
			invalid("logging.vmodule[1].filePattern"),
			invalid("logging.vmodule[2].verbosity"),
		}},
		{"logging alpha options without gate", func(c *v1alpha1.KubeProxyConfiguration) {
			c.Logging.Options.Text.SplitStream = true
			c.Logging.Options.JSON.InfoBufferSize = resource.QuantityValue{Quantity: resource.MustParse("1Mi")}
		}, []fieldErr{forbidden("logging.options.text.splitStream"), forbidden("logging.options.json.infoBufferSize")}},
		{"logging alpha options with gate", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates["LoggingAlphaOptions"] = true
			c.Logging.Options.Text.SplitStream = true
			c.Logging.Options.JSON.InfoBufferSize = resource.QuantityValue{Quantity: resource.MustParse("1Mi")}
		}, nil},
		{"logging alpha options with AllAlpha", func(c *v1alpha1.KubeProxyConfiguration) {
			c.FeatureGates["AllAlpha"] = true
			c.FeatureGates["AllBeta"] = true // the dependencies of alpha gates
			c.Logging.Options.JSON.SplitStream = true
		}, nil},

		// portRange, showHiddenMetricsForVersion
		{"portRange forms", func(c *v1alpha1.KubeProxyConfiguration) { c.PortRange = "30000-32767" }, nil},
		{"portRange reversed", func(c *v1alpha1.KubeProxyConfiguration) { c.PortRange = "32767-30000" },
			[]fieldErr{invalid("portRange")}},
		{"showHiddenMetricsForVersion", func(c *v1alpha1.KubeProxyConfiguration) { c.ShowHiddenMetricsForVersion = "1.36" }, nil},
		{"showHiddenMetricsForVersion with v", func(c *v1alpha1.KubeProxyConfiguration) { c.ShowHiddenMetricsForVersion = "v1.36" },
			[]fieldErr{invalid("showHiddenMetricsForVersion")}},
		// kube-proxy 1.37 starts only with its previous minor (issue 21).
		{"showHiddenMetricsForVersion of its own minor", func(c *v1alpha1.KubeProxyConfiguration) { c.ShowHiddenMetricsForVersion = "1.37" },
			[]fieldErr{invalid("showHiddenMetricsForVersion")}},
		{"showHiddenMetricsForVersion two minors back", func(c *v1alpha1.KubeProxyConfiguration) { c.ShowHiddenMetricsForVersion = "1.35" },
			[]fieldErr{invalid("showHiddenMetricsForVersion")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaulted(tt.mutate)
			before := cfg.DeepCopy()
			errs := Profile{}.Validate(cfg)
			if diff := cmp.Diff(tt.want, summarize(errs)); diff != "" {
				t.Errorf("Validate errors (-want +got):\n%s\nall: %v", diff, errs)
			}
			for _, e := range errs {
				if !strings.HasPrefix(e.Error(), e.Field+": ") {
					t.Errorf("error %q does not start with its path %q", e.Error(), e.Field)
				}
			}
			if diff := cmp.Diff(before, cfg, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("Validate modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

// TestValidateReportsEverything checks that errors from every area come back
// from one call, in a stable order, not only the first.
func TestValidateReportsEverything(t *testing.T) {
	cfg := defaulted(func(c *v1alpha1.KubeProxyConfiguration) {
		c.Mode = "ipvs"
		c.FeatureGates["bad-gate"] = true
		c.ClientConnection.Burst = -5
		c.Logging.Format = "yaml"
		c.BindAddress = "nope"
		c.IPTables.MasqueradeBit = ptr.To[int32](40)
		c.IPVS.MinSyncPeriod = dur(time.Hour)
		c.Conntrack.Min = ptr.To[int32](-1)
		c.DetectLocalMode = "BridgeInterface"
		c.NodePortAddresses = []string{"x"}
		c.OOMScoreAdj = ptr.To[int32](5000)
	})
	want := []fieldErr{
		invalid("featureGates[bad-gate]"),
		invalid("clientConnection.burst"),
		notSupported("logging.format"),
		invalid("bindAddress"),
		invalid("iptables.masqueradeBit"),
		invalid("ipvs.minSyncPeriod"),
		invalid("conntrack.min"),
		required("detectLocal.bridgeInterface"),
		invalid("nodePortAddresses[0]"),
		invalid("oomScoreAdj"),
	}
	for i := 0; i < 3; i++ { // the order must not depend on map iteration
		if diff := cmp.Diff(want, summarize(Profile{}.Validate(cfg))); diff != "" {
			t.Fatalf("run %d: errors (-want +got):\n%s", i, diff)
		}
	}
}

// TestValidateDefaultedIsClean checks that whatever Default produces passes
// Validate, for each mode and each bindAddress family.
func TestValidateDefaultedIsClean(t *testing.T) {
	tests := []struct {
		name string
		in   v1alpha1.KubeProxyConfiguration
	}{
		{"empty", v1alpha1.KubeProxyConfiguration{}},
		{"ipvs", v1alpha1.KubeProxyConfiguration{Mode: "ipvs"}},
		{"nftables", v1alpha1.KubeProxyConfiguration{Mode: "nftables"}},
		{"IPv6 bindAddress", v1alpha1.KubeProxyConfiguration{BindAddress: "fd00::10"}},
		{"bare listen IPs", v1alpha1.KubeProxyConfiguration{HealthzBindAddress: "10.0.0.1", MetricsBindAddress: "::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.in.DeepCopy()
			Profile{}.Default(cfg)
			if errs := (Profile{}).Validate(cfg); len(errs) != 0 {
				t.Errorf("defaulted config does not validate: %v", errs)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	got := summarize(Profile{}.Validate(nil))
	if diff := cmp.Diff([]fieldErr{required("KubeProxyConfiguration")}, got); diff != "" {
		t.Errorf("Validate(nil) (-want +got):\n%s", diff)
	}
}

// TestValidateUndefaulted documents that Validate does not apply defaults:
// an empty configuration fails on the fields that have no usable zero.
func TestValidateUndefaulted(t *testing.T) {
	want := []fieldErr{
		notSupported("logging.format"),
		invalid("logging.flushFrequency"),
		invalid("bindAddress"),
		required("metricsBindAddress"),
		invalid("iptables.syncPeriod"),
		invalid("configSyncPeriod"),
	}
	got := summarize(Profile{}.Validate(&v1alpha1.KubeProxyConfiguration{Logging: logsapi.LoggingConfiguration{Format: "?"}}))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestIPVSSchedulersAgree keeps the error message's list and the check in
// step: every listed scheduler validates in ipvs mode.
func TestIPVSSchedulersAgree(t *testing.T) {
	for _, s := range ipvsSchedulers() {
		t.Run(s, func(t *testing.T) {
			cfg := defaulted(func(c *v1alpha1.KubeProxyConfiguration) {
				c.Mode = "ipvs"
				c.IPVS.Scheduler = s
			})
			if errs := (Profile{}).Validate(cfg); len(errs) != 0 {
				t.Errorf("scheduler %q rejected: %v", s, errs)
			}
		})
	}
}

// TestFeatureGateMessages pins the exact errors of featureGates, wording
// included: each profile words them as its component does.
func TestFeatureGateMessages(t *testing.T) {
	at := field.NewPath("featureGates").Key
	names := defaulted(func(c *v1alpha1.KubeProxyConfiguration) {
		c.FeatureGates = map[string]bool{"SomeFutureGate": true, "kubeProxyIPVS": true, "CPUManagerPolicyOptions": false}
	})
	dependency := defaulted(func(c *v1alpha1.KubeProxyConfiguration) { c.FeatureGates = map[string]bool{"WorkloadWithJob": true} })
	for cfg, want := range map[*v1alpha1.KubeProxyConfiguration]field.ErrorList{
		names: {
			field.Forbidden(at("CPUManagerPolicyOptions"), "feature gate CPUManagerPolicyOptions is locked to true"),
			field.Invalid(at("SomeFutureGate"), "SomeFutureGate", "not a feature gate of kube-proxy 1.37"),
			field.Invalid(at("kubeProxyIPVS"), "kubeProxyIPVS", "not a feature gate of kube-proxy 1.37 (gate names are case-sensitive: did you mean KubeProxyIPVS?)"),
		},
		dependency: {
			field.Invalid(at("WorkloadWithJob"), true, "feature gate WorkloadWithJob is enabled but depends on GenericWorkload, which the configuration disables"),
		},
	} {
		if diff := cmp.Diff(want, (Profile{}).Validate(cfg)); diff != "" {
			t.Errorf("Validate() with featureGates %v (-want +got):\n%s", cfg.FeatureGates, diff)
		}
	}
}

// TestConsultedGatesAreKnown: every gate this package's rules read is in the
// gate table, at the stage and default the rules' documentation assumes (a
// gate upstream removes or moves must be noticed here).
func TestConsultedGatesAreKnown(t *testing.T) {
	for name, want := range map[string]featuregates.Spec{
		gateKubeProxyIPVS:                {Default: true, Stage: featuregates.Deprecated},
		featuregates.LoggingAlphaOptions: {Default: false, Stage: featuregates.Alpha},
		featuregates.LoggingBetaOptions:  {Default: true, Stage: featuregates.Beta},
	} {
		if got, ok := featuregates.Lookup(name); !ok || got != want {
			t.Errorf("Lookup(%s) = %+v, %t; want %+v", name, got, ok, want)
		}
	}
}
