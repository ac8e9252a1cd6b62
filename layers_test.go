package dynconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
)

const kubeletHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func kubeletLayers(t *testing.T, local LocalConfig) Layers[kubeletv1beta1.KubeletConfiguration] {
	t.Helper()
	p, err := merge.New[kubeletv1beta1.KubeletConfiguration](kubelet.Profile{}, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLayers(p, local)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLayersKubelet(t *testing.T) {
	dir := t.TempDir()
	init := filepath.Join(dir, "kubelet.yaml")
	writeFile(t, init, kubeletHeader+"maxPods: 50\nfeatureGates: {MemoryQoS: true}\n")
	writeFile(t, filepath.Join(dir, "conf.d", "10-a.conf"), kubeletHeader+"maxPods: 60\n")
	inst := filepath.Join(dir, "instance.yaml")
	writeFile(t, inst, kubeletHeader+"featureGates: {NodeLogQuery: true}\n")
	l := kubeletLayers(t, LocalConfig{InitFile: init, DropInDir: filepath.Join(dir, "conf.d"), InstanceFile: inst,
		Flags: []merge.Override{{Path: "kubeAPIQPS", Value: 77, Source: "flag --kube-api-qps"}}})
	if !l.HasInitConfig() {
		t.Error("HasInitConfig = false")
	}
	cfg, err := l.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 60 || !cfg.FeatureGates["MemoryQoS"] || !cfg.FeatureGates["NodeLogQuery"] || *cfg.KubeAPIQPS != 77 || cfg.Address != "0.0.0.0" {
		t.Fatalf("merged config: maxPods %d gates %v qps %v address %q", cfg.MaxPods, cfg.FeatureGates, *cfg.KubeAPIQPS, cfg.Address)
	}
	// A remote base replaces the init file; drop-ins, instance and flags
	// still apply.
	cfg, err = l.Build(&Document{Name: "configmap kube-system/k key kubelet", Data: []byte(kubeletHeader + "maxPods: 10\nfeatureGates: {ImageMaximumGCAge: true}\n")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 60 || cfg.FeatureGates["MemoryQoS"] || !cfg.FeatureGates["ImageMaximumGCAge"] || !cfg.FeatureGates["NodeLogQuery"] {
		t.Fatalf("remote base: maxPods %d gates %v", cfg.MaxPods, cfg.FeatureGates)
	}

	for _, tc := range []struct {
		name, doc string
		stage     lkg.Stage
		want      string
	}{
		{"unknown field", kubeletHeader + "maxPodz: 3\n", lkg.StageDecode, `configmap kube-system/k key kubelet: unknown field "maxPodz"`},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", lkg.StageDecode, "kind"},
		{"invalid value", kubeletHeader + "kubeAPIBurst: -5\n", lkg.StageValidate, "kubeAPIBurst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Build(&Document{Name: "configmap kube-system/k key kubelet", Data: []byte(tc.doc)})
			var ce *lkg.ConfigError
			if !errors.As(err, &ce) || ce.Stage != tc.stage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want stage %v containing %q", err, tc.stage, tc.want)
			}
		})
	}
}

// TestBootstrapKubeletInvalidLocal: an invalid init file stops the
// component with an error naming the file and the field.
func TestBootstrapKubeletInvalidLocal(t *testing.T) {
	dir := t.TempDir()
	init := filepath.Join(dir, "kubelet.yaml")
	writeFile(t, init, kubeletHeader+"evictionHard: {memory.avaliable: 100Mi}\nmaxPods: -3\n")
	src, _ := source.NewDir(source.DirOptions{Path: filepath.Join(dir, "src"), PayloadKey: "kubelet"})
	c, err := New(Options[kubeletv1beta1.KubeletConfiguration]{
		Profile: kubelet.Profile{}, Layers: kubeletLayers(t, LocalConfig{InitFile: init}),
		StateDir: filepath.Join(dir, "state"), ComponentVersion: "v1", Remote: src,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Bootstrap(context.Background())
	if err == nil {
		t.Fatal("Bootstrap accepted an invalid local config")
	}
	for _, want := range []string{"invalid local config", init, "maxPods", "memory.avaliable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}
