package kubeproxy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/kube-proxy/config/v1alpha1"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/yaml"
)

// FuzzAddressParsing checks that the allocation-free parsers agree with the
// lenient net parsers kube-proxy uses, on acceptance and on address family.
func FuzzAddressParsing(f *testing.F) {
	for _, s := range []string{
		"", "1.2.3.4", "010.001.002.003", "::", "::1", "fe80::1%eth0", "::ffff:1.2.3.4",
		"10.0.0.0/8", "10.0.0.0/33", "010.0.0.0/08", "fd00::/64", "::ffff:1.2.3.4/120",
		"::ffff:1.2.3.4/24", "1.2.3.4/+5", "1.2.3.4/-0", "1.2.3", "[::1]", "0x1.2.3.4",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fam, ok := ipFamily(s)
		ip := netutils.ParseIPSloppy(s)
		if ok != (ip != nil) {
			t.Fatalf("ipFamily(%q) ok=%v, ParseIPSloppy=%v", s, ok, ip)
		}
		if ok && (fam == ipv4) != (ip.To4() != nil) {
			t.Fatalf("ipFamily(%q) = %v, ParseIPSloppy says IPv4=%v", s, fam, ip.To4() != nil)
		}
		cfam, cok := cidrFamily(s)
		_, n, err := netutils.ParseCIDRSloppy(s)
		if cok != (err == nil) {
			t.Fatalf("cidrFamily(%q) ok=%v, ParseCIDRSloppy err=%v", s, cok, err)
		}
		if cok && (cfam == ipv4) != (n.IP.To4() != nil) {
			t.Fatalf("cidrFamily(%q) = %v, ParseCIDRSloppy says IPv4=%v", s, cfam, n.IP.To4() != nil)
		}
	})
}

// FuzzDefaultValidate decodes arbitrary documents and checks the profile's
// invariants on them: Default is idempotent and never panics, Validate
// never panics, leaves its input alone, and names a real top-level field
// in every error.
func FuzzDefaultValidate(f *testing.F) {
	for _, s := range []string{
		"{}",
		"mode: ipvs\nipvs:\n  scheduler: xx\n  excludeCIDRs: [10.0.0.0/8, bad]\n  minSyncPeriod: 1h\n",
		"bindAddress: '::1'\nhealthzBindAddress: '::1'\nmetricsBindAddress: 1.2.3.4:99999\n",
		"clusterCIDR: 10.0.0.0/8,fd00::/48,x\ndetectLocalMode: BridgeInterface\n",
		"featureGates: {'': true, AllAlpha: true}\nlogging: {format: json, vmodule: [{filePattern: 'a,b'}]}\n",
		"nodePortAddresses: [primary, localhost, 1.2.3.4]\noomScoreAdj: 2000\nportRange: 10-1\n",
		"conntrack: {maxPerCore: -1, tcpCloseWaitTimeout: -1s}\nclientConnection: {qps: -1, burst: -1}\n",
	} {
		f.Add([]byte(s))
	}
	topLevel := jsonFieldNames(reflect.TypeOf(v1alpha1.KubeProxyConfiguration{}))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var cfg v1alpha1.KubeProxyConfiguration
		if err := yaml.Unmarshal(doc, &cfg); err != nil {
			return
		}
		p := Profile{}
		p.Default(&cfg)
		again := cfg.DeepCopy()
		p.Default(again)
		if diff := cmp.Diff(&cfg, again, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("Default is not idempotent (-once +twice):\n%s", diff)
		}
		for _, e := range p.Validate(again) {
			top, _, _ := strings.Cut(e.Field, ".")
			top, _, _ = strings.Cut(top, "[")
			if !topLevel[top] {
				t.Fatalf("error %q names %q, not a field of the document", e.Error(), e.Field)
			}
		}
		if diff := cmp.Diff(&cfg, again, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("Validate modified its input:\n%s", diff)
		}
	})
}

func jsonFieldNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	return names
}
