package kubelet

import (
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
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
