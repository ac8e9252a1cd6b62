package kubeproxy

import (
	"testing"
	"time"

	"k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
)

// realistic is a dual-stack ipvs configuration of the size kubeadm clusters
// carry, already defaulted.
func realistic() *v1alpha1.KubeProxyConfiguration {
	cfg := &v1alpha1.KubeProxyConfiguration{
		Mode:              "ipvs",
		ClusterCIDR:       "10.244.0.0/16,fd00:10:244::/56",
		NodePortAddresses: []string{"primary", "10.0.0.0/8", "fd00::/64"},
		FeatureGates:      map[string]bool{"KubeProxyNFTablesLocalhostNodePorts": false, "LoggingBetaOptions": true},
		BindAddress:       "10.0.0.10",
		OOMScoreAdj:       ptr.To[int32](-999),
		IPVS: v1alpha1.KubeProxyIPVSConfiguration{
			Scheduler:     "wrr",
			ExcludeCIDRs:  []string{"10.96.0.0/12", "fd00:10:96::/112"},
			MinSyncPeriod: dur(time.Second),
			StrictARP:     true,
		},
	}
	cfg.ClientConnection.Kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
	Profile{}.Default(cfg)
	return cfg
}

func BenchmarkValidate(b *testing.B) {
	valid := realistic()
	invalid := realistic()
	invalid.IPVS.ExcludeCIDRs = append(invalid.IPVS.ExcludeCIDRs, "bad")
	invalid.MetricsBindAddress = "localhost:10249"
	invalid.OOMScoreAdj = ptr.To[int32](-2000)
	for _, bc := range []struct {
		name string
		cfg  *v1alpha1.KubeProxyConfiguration
		errs int
	}{{"valid", valid, 0}, {"invalid", invalid, 3}} {
		b.Run(bc.name, func(b *testing.B) {
			if n := len(Profile{}.Validate(bc.cfg)); n != bc.errs {
				b.Fatalf("got %d errors, want %d", n, bc.errs)
			}
			b.ReportAllocs()
			for b.Loop() {
				Profile{}.Validate(bc.cfg)
			}
		})
	}
}

func BenchmarkDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		cfg := &v1alpha1.KubeProxyConfiguration{}
		Profile{}.Default(cfg)
	}
}
