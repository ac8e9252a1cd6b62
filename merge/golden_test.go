package merge

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// render prints a result for a golden file: the merged layers before
// defaulting, the provenance of every field, and the warnings.
func render(t *testing.T, res *Result[kubeletConfig]) []byte {
	t.Helper()
	merged, err := yaml.JSONToYAML(res.MergedJSON())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# merged layers, before defaults\n")
	b.Write(merged)
	b.WriteString("---\n# provenance\n")
	paths := make([]string, 0, len(res.Provenance))
	for p := range res.Provenance {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&b, "%s: %s\n", p, res.Provenance[p])
	}
	if len(res.Warnings) > 0 {
		b.WriteString("---\n# warnings\n")
		for _, w := range res.Warnings {
			b.WriteString(w + "\n")
		}
	}
	return []byte(b.String())
}

// TestGoldenLayers adds one layer at a time to testdata/layers and compares
// each result with testdata/layers/*.golden (go test -update rewrites them).
func TestGoldenLayers(t *testing.T) {
	dir := filepath.Join("testdata", "layers")
	base := &Document{Name: filepath.Join(dir, "kubelet.yaml"), Data: readFile(t, filepath.Join(dir, "kubelet.yaml"))}
	instance := &Document{Name: filepath.Join(dir, "instance.yaml"), Data: readFile(t, filepath.Join(dir, "instance.yaml"))}
	flags := []Override{
		{Path: "maxPods", Value: 32, Source: "flag --max-pods"},
		{Path: "featureGates", Value: map[string]bool{"GracefulNodeShutdown": true}, Source: "flag --feature-gates", Merge: true},
	}
	policy := Policy{
		Owner:  "eks-a",
		Locked: []string{"readOnlyPort", "tlsCertFile"},
		Platform: []PlatformValue{
			{Path: "clusterDomain", Value: "eks.local", Rule: PlatformWins},
			{Path: "registerNode", Value: true, Rule: UserWins},
			{Path: "containerRuntimeEndpoint", Value: "unix:///run/containerd/containerd.sock", Rule: ErrorIfBoth},
		},
	}
	plain := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{})
	dropIns, err := plain.ReadDropIns(filepath.Join(dir, "config.d"))
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name   string
		layers Layers
		policy bool
	}{
		{"01-base", Layers{Base: base}, false},
		{"02-dropins", Layers{Base: base, DropIns: dropIns}, false},
		{"03-instance", Layers{Base: base, DropIns: dropIns, Instance: instance}, false},
		{"04-flags", Layers{Base: base, DropIns: dropIns, Instance: instance, Flags: flags}, false},
		{"05-policy", Layers{Base: base, DropIns: dropIns, Instance: instance, Flags: flags}, true},
	}
	withPolicy := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{Policy: policy})
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			p := plain
			if s.policy {
				p = withPolicy
			}
			res, err := p.Merge(s.layers)
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			golden(t, filepath.Join("layers", s.name+".golden"), render(t, res))
		})
	}
}
