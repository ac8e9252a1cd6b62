package merge

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The four benchmarks below work on the same realistic kubelet layers
// (testdata/bench: a kubeadm-style shared file, three drop-ins, an instance
// file) and are meant to be read side by side from one run:
//
//	go test -run '^$' -bench . -benchmem ./merge/
//
// BenchmarkPipeline is the whole of Merge: decode and check every layer,
// merge, three flag overrides, default, validate (kubeletTestProfile, a
// stand-in for components/kubelet of similar cost) and provenance.
// BenchmarkKubeadmWay and BenchmarkKubeletWay only merge and decode;
// BenchmarkStrictDecodeFloor only strict-decodes each document once.

// reportCPU adds a cpu-ns/op metric: the process's CPU time (all threads,
// GC included) per operation. On a shared machine wall time swings with the
// load of other processes; CPU time much less, so compare ratios of this.
func reportCPU(b *testing.B, start time.Duration) {
	if cpu := processCPUTime() - start; cpu > 0 && b.N > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

type benchLayers struct {
	base     []byte
	dropIns  [][]byte
	instance []byte
}

func loadBenchLayers(b *testing.B) benchLayers {
	b.Helper()
	dir := filepath.Join("testdata", "bench")
	l := benchLayers{
		base:     readFile(b, filepath.Join(dir, "kubelet.yaml")),
		instance: readFile(b, filepath.Join(dir, "instance.yaml")),
	}
	entries, err := os.ReadDir(filepath.Join(dir, "config.d"))
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		l.dropIns = append(l.dropIns, readFile(b, filepath.Join(dir, "config.d", e.Name())))
	}
	if len(l.dropIns) != 3 {
		b.Fatalf("want 3 drop-ins, got %d", len(l.dropIns))
	}
	return l
}

var benchFlags = []Override{
	{Path: "nodeStatusMaxImages", Value: 25, Source: "flag --node-status-max-images"},
	{Path: "featureGates", Value: map[string]bool{"GracefulNodeShutdown": true}, Source: "flag --feature-gates", Merge: true},
	{Path: "hairpinMode", Value: "hairpin-veth", Source: "flag --hairpin-mode"},
}

// BenchmarkPipeline: our whole pipeline, validation and provenance included.
func BenchmarkPipeline(b *testing.B) {
	l := loadBenchLayers(b)
	p := newPipeline(b, Profile[kubeletConfig](kubeletTestProfile{}), Options{})
	layers := Layers{
		Base:     &Document{Name: "kubelet.yaml", Data: l.base},
		Instance: &Document{Name: "instance.yaml", Data: l.instance},
		Flags:    benchFlags,
	}
	for i, d := range l.dropIns {
		layers.DropIns = append(layers.DropIns, Document{Name: filepath.Join("config.d", string(rune('a'+i))+".conf"), Data: d})
	}
	if _, err := p.Merge(layers); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := processCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		res, err := p.Merge(layers)
		if err != nil || len(res.Provenance) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkKubeadmWay: strategicpatch.StrategicMergePatch of every layer in
// turn with the typed struct (what kubeadm does for its kubeletconfiguration
// patches and the KEP proposes), then a plain decode.
func BenchmarkKubeadmWay(b *testing.B) {
	l := loadBenchLayers(b)
	patches := append(append([][]byte{}, l.dropIns...), l.instance)
	b.ReportAllocs()
	start := processCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		merged, err := yaml.YAMLToJSON(l.base)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range patches {
			pj, err := yaml.YAMLToJSON(p)
			if err != nil {
				b.Fatal(err)
			}
			if merged, err = strategicpatch.StrategicMergePatch(merged, pj, &kubeletConfig{}); err != nil {
				b.Fatal(err)
			}
		}
		var c kubeletConfig
		if err := kjson.UnmarshalCaseSensitivePreserveInts(merged, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKubeletWay: jsonpatch.MergePatch of every layer in turn over the
// base (the kubelet's --config-dir), then a plain decode.
func BenchmarkKubeletWay(b *testing.B) {
	l := loadBenchLayers(b)
	patches := append(append([][]byte{}, l.dropIns...), l.instance)
	b.ReportAllocs()
	start := processCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		merged, err := yaml.YAMLToJSON(l.base)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range patches {
			pj, err := yaml.YAMLToJSON(p)
			if err != nil {
				b.Fatal(err)
			}
			if merged, err = jsonpatch.MergePatch(merged, pj); err != nil {
				b.Fatal(err)
			}
		}
		var c kubeletConfig
		if err := kjson.UnmarshalCaseSensitivePreserveInts(merged, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStrictDecodeFloor: each of the five documents strictly decoded
// once into the typed struct, as the Kubernetes strict serializer does
// (YAML to JSON with duplicate detection, then a strict case-sensitive
// decode), and nothing else: no merge, no defaults, no validation.
func BenchmarkStrictDecodeFloor(b *testing.B) {
	l := loadBenchLayers(b)
	docs := append(append([][]byte{l.base}, l.dropIns...), l.instance)
	b.ReportAllocs()
	start := processCPUTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		for _, d := range docs {
			js, err := yaml.YAMLToJSONStrict(d)
			if err != nil {
				b.Fatal(err)
			}
			var c kubeletConfig
			if strict, err := kjson.UnmarshalStrict(js, &c); err != nil || len(strict) > 0 {
				b.Fatal(err, strict)
			}
		}
	}
}
