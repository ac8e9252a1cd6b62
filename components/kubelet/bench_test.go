package kubelet

import (
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/merge"
)

// BenchmarkDefault defaults a realistic node configuration. Default fills in
// place, so every iteration needs a fresh copy; copies are made in batches
// outside the timer.
func BenchmarkDefault(b *testing.B) {
	base := realisticConfig()
	const batch = 256
	copies := make([]*kubeletv1beta1.KubeletConfiguration, batch)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		b.StopTimer()
		n := min(batch, b.N-done)
		for i := 0; i < n; i++ {
			copies[i] = base.DeepCopy()
		}
		b.StartTimer()
		for i := 0; i < n; i++ {
			Default(copies[i])
		}
	}
}

// BenchmarkValidate validates a defaulted realistic node configuration (which
// is valid, the common case).
func BenchmarkValidate(b *testing.B) {
	kc := realisticConfig()
	Default(kc)
	if errs := Validate(kc); len(errs) != 0 {
		b.Fatalf("benchmark config is invalid: %v", errs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if errs := Validate(kc); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkValidateInvalid validates a configuration with many errors, to
// show the cost of building field errors.
func BenchmarkValidateInvalid(b *testing.B) {
	kc := fullySetConfig()
	Default(kc)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if errs := Validate(kc); len(errs) == 0 {
			b.Fatal("want errors")
		}
	}
}

// realisticDocument is realisticConfig as the YAML a node would read.
func realisticDocument(b *testing.B) []byte {
	b.Helper()
	kc := realisticConfig()
	kc.APIVersion, kc.Kind = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
	data, err := yaml.Marshal(kc)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDecode is Decode: a pipeline built on every call. Compare with
// BenchmarkDecodeReusedPipeline, the way to decode many documents.
func BenchmarkDecode(b *testing.B) {
	data := realisticDocument(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("kubelet.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeReusedPipeline decodes with one pipeline from NewPipeline.
func BenchmarkDecodeReusedPipeline(b *testing.B) {
	data := realisticDocument(b)
	p, err := NewPipeline(merge.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Merge(merge.Layers{Base: &merge.Document{Name: "kubelet.yaml", Data: data}}); err != nil {
			b.Fatal(err)
		}
	}
}
