package bottlerocket

import (
	"path/filepath"
	"testing"
)

// BenchmarkRender renders the realistic worker configuration from testdata
// (25 fields, five subtables).
func BenchmarkRender(b *testing.B) {
	c := loadConfig(b, filepath.Join("testdata", "eksa-worker.yaml"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderUnsupported measures the failure path: reflection over every
// field plus the error text.
func BenchmarkRenderUnsupported(b *testing.B) {
	c := loadConfig(b, filepath.Join("testdata", "unsupported.yaml"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(c); err == nil {
			b.Fatal("Render succeeded, want an error")
		}
	}
}
