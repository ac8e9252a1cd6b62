package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestDecodeSpecYAMLAndJSON checks that the same spec decodes the same from
// YAML and from JSON, numbers in kubeletConfiguration exact.
func TestDecodeSpecYAMLAndJSON(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "vsphere", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := DecodeSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := DecodeSpec(j)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromYAML, fromJSON); diff != "" {
		t.Errorf("YAML and JSON decode differently (-yaml +json):\n%s", diff)
	}
	if got := fromYAML.Spec.ControlPlaneConfiguration.KubeletConfiguration["port"]; got != int64(20250) {
		t.Errorf("port = %#v, want int64 20250", got)
	}
	if got := len(fromYAML.groups()); got != 3 {
		t.Errorf("%d groups, want 3", got)
	}
}

// FuzzSpec feeds arbitrary bytes to the spec decoder. It must not panic,
// and a spec it accepts must encode and decode again to the same value.
func FuzzSpec(f *testing.F) {
	for _, name := range []string{"vsphere", "docker-alternate"} {
		data, err := os.ReadFile(filepath.Join("testdata", name, "cluster.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		cluster + "  controlPlaneConfiguration: {osFamily: ubuntu}\n",
		cluster + "  controlPlaneConfiguration: {osFamily: ubuntu, kubeletConfiguration: {maxPods: 1.5e3, a: [1, null, {b: c}]}}\n",
		cluster + "  controlPlaneConfiguration: {osFamily: ubuntu, labels: {a: b}}\n  workerNodeGroupConfigurations: []\n",
		`{"apiVersion":"anywhere.eks.amazonaws.com/v1alpha1","kind":"Cluster","spec":{"datacenterRef":{"kind":"SnowDatacenterConfig"},"controlPlaneConfiguration":{"osFamily":"bottlerocket"}}}`,
		"spec: {controlPlaneConfiguration: {count: 1}}\n",
		"a: 1\na: 2\n",
		"- x\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeSpec(data)
		if err != nil {
			return
		}
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("encoding an accepted spec: %v", err)
		}
		again, err := DecodeSpec(j)
		if err != nil {
			t.Fatalf("an accepted spec does not decode again: %v\n%s", err, j)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("decode(encode(spec)) differs (-first +second):\n%s", diff)
		}
	})
}
