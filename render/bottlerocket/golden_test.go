package bottlerocket

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// loadConfig reads a KubeletConfiguration the way a provisioning tool would:
// strict YAML, no defaulting.
func loadConfig(t testing.TB, path string) *kc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c kc
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &c
}

// TestGolden renders each testdata/*.yaml with RenderDocument (so zero
// values written in it count) and compares the result with <name>.toml, or
// with <name>.err when rendering fails. Run with -update to
// rewrite them. Successful output must also parse as TOML, hold only known
// settings, render identically twice, and leave the input untouched.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < 3 {
		t.Fatalf("found %d golden inputs, want at least 3", len(inputs))
	}
	known := map[string]bool{}
	for _, m := range SupportedFields() {
		known[strings.TrimPrefix(m.Setting, settingsPrefix)] = true
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			c, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			before := bytes.Clone(c)
			out, err := RenderDocument(c)
			if diff := cmp.Diff(string(before), string(c)); diff != "" {
				t.Errorf("RenderDocument modified its input (-before +after):\n%s", diff)
			}

			got, ext := out, ".toml"
			if err != nil {
				got, ext = []byte(err.Error()+"\n"), ".err"
			}
			golden := filepath.Join("testdata", name+ext)
			if *update {
				for _, stale := range []string{".toml", ".err"} {
					_ = os.Remove(filepath.Join("testdata", name+stale))
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("render result is %s but %v (run with -update?)", ext, rerr)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-golden +got):\n%s", golden, diff)
			}
			if err != nil {
				return
			}

			doc, perr := parseTOML(string(out))
			if perr != nil {
				t.Fatalf("output is not valid TOML: %v", perr)
			}
			settings, ok := doc["settings"].(map[string]any)
			if !ok || len(doc) != 1 {
				t.Fatalf("top level = %v, want only [settings]", doc)
			}
			k8s, ok := settings["kubernetes"].(map[string]any)
			if !ok || len(settings) != 1 {
				t.Fatalf("settings = %v, want only [settings.kubernetes]", settings)
			}
			for key := range k8s {
				if !known[key] {
					t.Errorf("output has settings.kubernetes.%s, which no supported field renders to", key)
				}
			}
			again, err := RenderDocument(c)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second RenderDocument differs: %v\n%s", err, again)
			}
		})
	}
}

// TestGoldenSeedSemantics checks the seed's example value by value after
// parsing, independent of layout.
func TestGoldenSeedSemantics(t *testing.T) {
	out, err := Render(loadConfig(t, filepath.Join("testdata", "seed-003.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseTOML(string(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"settings": map[string]any{"kubernetes": map[string]any{
		"max-pods":               int64(100),
		"allowed-unsafe-sysctls": []string{"net.core.somaxconn", "net.ipv4.ip_local_port_range"},
	}}}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("parsed output (-want +got):\n%s", diff)
	}
}
