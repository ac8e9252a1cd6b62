package kubeproxy_test

import (
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/components/kubeproxy"
)

func TestDecode(t *testing.T) {
	cfg, err := kubeproxy.Decode("config.conf", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != "ipvs" || cfg.ClientConnection.QPS == 0 {
		t.Fatalf("decoded mode %q, qps %v; want ipvs and a defaulted qps", cfg.Mode, cfg.ClientConnection.QPS)
	}
	_, err = kubeproxy.Decode("config.conf", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: fast\nbogus: 1\n"))
	if err == nil || !strings.Contains(err.Error(), `config.conf: unknown field "bogus"`) {
		t.Errorf("error %v; want the unknown field named", err)
	}
}
