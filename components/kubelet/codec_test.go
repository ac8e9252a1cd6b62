package kubelet_test

import (
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/components/kubelet"
)

func TestDecode(t *testing.T) {
	cfg, err := kubelet.Decode("kubelet.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 42\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 42 || cfg.Port != 10250 {
		t.Fatalf("decoded %d, port %v; want 42 and the default port", cfg.MaxPods, cfg.Port)
	}
	_, err = kubelet.Decode("kubelet.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPodz: 1\nkubeAPIQPS: fast\n"))
	for _, want := range []string{`kubelet.yaml: unknown field "maxPodz"`, "kubelet.yaml: kubeAPIQPS:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to contain %q", err, want)
		}
	}
	_, err = kubelet.Decode("kubelet.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {memory.avaliable: 1Mi}\n"))
	if err == nil || !strings.Contains(err.Error(), "evictionHard[memory.avaliable]") {
		t.Errorf("error %v; want the misspelled eviction signal named", err)
	}
}
