package kubeadm

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const benchDoc = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 192.168.0.8
port: 20250
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
  imagefs.available: 15%
`

func BenchmarkRender(b *testing.B) {
	c := &kubeletv1beta1.KubeletConfiguration{
		Address:             "192.168.0.8",
		Port:                20250,
		SerializeImagePulls: ptr.To(false),
		EvictionHard:        map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(c, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderDocument(b *testing.B) {
	doc := []byte(benchDoc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderDocument(doc, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKubeadmApply is what kubeadm then does with the patch: YAML to
// JSON and a strategic merge over its generated configuration, for scale.
func BenchmarkKubeadmApply(b *testing.B) {
	base, err := os.ReadFile(defaultsFixture)
	if err != nil {
		b.Fatal(err)
	}
	p, err := RenderDocument([]byte(benchDoc), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		bj, err := yaml.YAMLToJSON(base)
		if err != nil {
			b.Fatal(err)
		}
		pj, err := yaml.YAMLToJSON(p.Content)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := strategicpatch.StrategicMergePatch(bj, pj, kubeletv1beta1.KubeletConfiguration{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSnippet(b *testing.B) {
	opts := SnippetOptions{Init: true, Join: true, KubeletExtraArgs: []Arg{{Name: "node-labels", Value: "tier=web"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Snippet(opts); err != nil {
			b.Fatal(err)
		}
	}
}
