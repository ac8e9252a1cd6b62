package merge_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
)

// The benchmarks in this file compare, in one `go test -bench` run and on the
// realistic layers of testdata/bench (a kubeadm-style shared file, three
// drop-ins, an instance file, three flags), the whole pipeline with the real
// components/kubelet profile against the two upstream ways of layering
// kubelet configuration, each given the same defaulting and validation so
// that the comparison is fair:
//
//	go test -run '^$' -bench 'KubeletProfile|StrictDecodeFloor' -benchmem ./merge/
//
// Each upstream way is first checked to give the pipeline's configuration
// (TestSameMergeAsUpstream, and again at the start of each benchmark).
// They live in the external test package because components/kubelet
// imports merge. cpu-ns/op is the process's CPU time per operation: compare
// ratios of it on a loaded machine, not wall times.

type kubeletConfig = kubeletv1beta1.KubeletConfiguration

func benchKubeletLayers(tb testing.TB) merge.Layers {
	tb.Helper()
	dir := filepath.Join("testdata", "bench")
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
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
		tb.Fatal(err)
	}
	for _, e := range entries {
		layers.DropIns = append(layers.DropIns, merge.Document{Name: e.Name(), Data: read(filepath.Join(dir, "config.d", e.Name()))})
	}
	if len(layers.DropIns) != 3 {
		tb.Fatalf("want 3 drop-ins, got %d", len(layers.DropIns))
	}
	return layers
}

func newKubeletPipeline(tb testing.TB) *merge.Pipeline[kubeletConfig] {
	tb.Helper()
	p, err := merge.New[kubeletConfig](kubelet.Profile{}, merge.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// applyBenchFlags sets what the three flag overrides of benchKubeletLayers
// set, as the kubelet's flag parsing does on top of its config file.
func applyBenchFlags(c *kubeletConfig) {
	c.NodeStatusMaxImages = ptrTo[int32](25)
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	c.FeatureGates["GracefulNodeShutdown"] = true
	c.HairpinMode = "hairpin-veth"
}

func ptrTo[T any](v T) *T { return &v }

// kubeadmWay is kubeadm's way with the kubelet profile's defaulting and
// validation: YAML to JSON, strategicpatch.StrategicMergePatch of every
// drop-in and the instance in turn over the base with the typed struct
// (kubeadm's kubeletconfiguration patches, and what the KEP proposes), a
// strict decode, the flags, Default, Validate.
func kubeadmWay(l merge.Layers) (*kubeletConfig, error) {
	merged, err := yaml.YAMLToJSONStrict(l.Base.Data)
	if err != nil {
		return nil, err
	}
	for _, d := range append(append([]merge.Document{}, l.DropIns...), *l.Instance) {
		pj, err := yaml.YAMLToJSONStrict(d.Data)
		if err != nil {
			return nil, err
		}
		if merged, err = strategicpatch.StrategicMergePatch(merged, pj, &kubeletConfig{}); err != nil {
			return nil, err
		}
	}
	c := new(kubeletConfig)
	if strict, err := kjson.UnmarshalStrict(merged, c); err != nil || len(strict) > 0 {
		return nil, firstErr(err, strict)
	}
	applyBenchFlags(c)
	kubelet.Default(c)
	if errs := kubelet.Validate(c); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return c, nil
}

// kubeletWay is the kubelet's --config-dir way with the same profile: the
// config file strictly decoded and defaulted (Default: the kubelet's loader
// defaults, eviction defaults included), encoded, every drop-in and then the
// instance applied as a JSON merge patch (jsonpatch.MergePatch), decoded,
// the flags, the kubelet's defaults after a drop-in merge
// (DefaultDropInMerge), Validate.
func kubeletWay(l merge.Layers) (*kubeletConfig, error) {
	js, err := yaml.YAMLToJSONStrict(l.Base.Data)
	if err != nil {
		return nil, err
	}
	base := new(kubeletConfig)
	if strict, err := kjson.UnmarshalStrict(js, base); err != nil || len(strict) > 0 {
		return nil, firstErr(err, strict)
	}
	kubelet.Default(base)
	merged, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	for _, d := range append(append([]merge.Document{}, l.DropIns...), *l.Instance) {
		pj, err := yaml.YAMLToJSONStrict(d.Data)
		if err != nil {
			return nil, err
		}
		if merged, err = jsonpatch.MergePatch(merged, pj); err != nil {
			return nil, err
		}
	}
	c := new(kubeletConfig)
	if strict, err := kjson.UnmarshalStrict(merged, c); err != nil || len(strict) > 0 {
		return nil, firstErr(err, strict)
	}
	applyBenchFlags(c)
	kubelet.DefaultDropInMerge(c)
	if errs := kubelet.Validate(c); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return c, nil
}

func firstErr(err error, strict []error) error {
	if err != nil {
		return err
	}
	return strict[0]
}

// TestSameMergeAsUpstream: on the benchmark's layers, the pipeline gives the
// configuration that kubeadm's way and the kubelet's --config-dir way give
// (with the same defaulting and validation), field for field; so the
// benchmarks below compare the cost of the same result.
func TestSameMergeAsUpstream(t *testing.T) {
	checkSameAsUpstream(t, benchKubeletLayers(t), newKubeletPipeline(t))
}

func checkSameAsUpstream(tb testing.TB, l merge.Layers, p *merge.Pipeline[kubeletConfig]) {
	tb.Helper()
	res, err := p.Merge(l)
	if err != nil {
		tb.Fatalf("pipeline: %v", err)
	}
	for _, way := range []struct {
		name string
		fn   func(merge.Layers) (*kubeletConfig, error)
	}{{"kubeadm's way", kubeadmWay}, {"the kubelet's --config-dir way", kubeletWay}} {
		want, err := way.fn(l)
		if err != nil {
			tb.Fatalf("%s: %v", way.name, err)
		}
		if diff := cmp.Diff(want, res.Object); diff != "" {
			tb.Fatalf("the pipeline differs from %s (-upstream +pipeline):\n%s", way.name, diff)
		}
	}
}

func reportCPU(b *testing.B, start time.Duration) {
	if cpu := merge.ProcessCPUTime() - start; cpu > 0 && b.N > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkPipelineKubeletProfile: the whole of Merge with the real
// components/kubelet profile (decode and check five documents, merge, three
// flags, defaults, validation, provenance).
func BenchmarkPipelineKubeletProfile(b *testing.B) {
	layers := benchKubeletLayers(b)
	p := newKubeletPipeline(b)
	checkSameAsUpstream(b, layers, p)
	b.ReportAllocs()
	start := merge.ProcessCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		res, err := p.Merge(layers)
		if err != nil || len(res.Provenance) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipelineKubeletProfileJSON is BenchmarkPipelineKubeletProfile
// with the five documents in JSON (a ConfigMap payload may be either).
func BenchmarkPipelineKubeletProfileJSON(b *testing.B) {
	layers := benchKubeletLayers(b)
	toJSON := func(d *merge.Document) {
		js, err := yaml.YAMLToJSON(d.Data)
		if err != nil {
			b.Fatal(err)
		}
		d.Data = js
	}
	toJSON(layers.Base)
	toJSON(layers.Instance)
	for i := range layers.DropIns {
		toJSON(&layers.DropIns[i])
	}
	p := newKubeletPipeline(b)
	checkSameAsUpstream(b, layers, p)
	b.ReportAllocs()
	start := merge.ProcessCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		res, err := p.Merge(layers)
		if err != nil || len(res.Provenance) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkKubeadmWayKubeletProfile: kubeadmWay, defaults and validation included.
func BenchmarkKubeadmWayKubeletProfile(b *testing.B) {
	benchUpstream(b, kubeadmWay)
}

// BenchmarkKubeletWayKubeletProfile: kubeletWay, defaults and validation included.
func BenchmarkKubeletWayKubeletProfile(b *testing.B) {
	benchUpstream(b, kubeletWay)
}

func benchUpstream(b *testing.B, way func(merge.Layers) (*kubeletConfig, error)) {
	layers := benchKubeletLayers(b)
	checkSameAsUpstream(b, layers, newKubeletPipeline(b))
	b.ReportAllocs()
	start := merge.ProcessCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		if _, err := way(layers); err != nil {
			b.Fatal(err)
		}
	}
}
