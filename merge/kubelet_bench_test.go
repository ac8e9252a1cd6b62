package merge_test

import (
	"os"
	"path/filepath"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
)

// BenchmarkPipelineKubeletProfile is BenchmarkPipeline with the real
// components/kubelet profile (its full defaulting and validation) instead of
// the stand-in, on the same layers; it runs in the same `go test -bench`
// process as the upstream comparisons. It lives in the external test
// package because components/kubelet imports merge.
func BenchmarkPipelineKubeletProfile(b *testing.B) {
	dir := filepath.Join("testdata", "bench")
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	layers := merge.Layers{
		Base:     &merge.Document{Name: "kubelet.yaml", Data: read(filepath.Join(dir, "kubelet.yaml"))},
		Instance: &merge.Document{Name: "instance.yaml", Data: read(filepath.Join(dir, "instance.yaml"))},
		Flags: []merge.Override{
			{Path: "nodeStatusMaxImages", Value: 25, Source: "flag --node-status-max-images"},
			{Path: "featureGates", Value: map[string]bool{"GracefulNodeShutdown": true}, Source: "flag --feature-gates", Merge: true},
			{Path: "hairpinMode", Value: "hairpin-veth", Source: "flag --hairpin-mode"},
		},
	}
	entries, err := os.ReadDir(filepath.Join(dir, "config.d"))
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		layers.DropIns = append(layers.DropIns, merge.Document{Name: e.Name(), Data: read(filepath.Join(dir, "config.d", e.Name()))})
	}
	p, err := merge.New[kubeletv1beta1.KubeletConfiguration](kubelet.Profile{}, merge.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Merge(layers); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := p.Merge(layers)
		if err != nil || len(res.Provenance) == 0 {
			b.Fatal(err)
		}
	}
}
