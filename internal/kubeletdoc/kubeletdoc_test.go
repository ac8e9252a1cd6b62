package kubeletdoc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func tree(t *testing.T, doc string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func describe(nulls []Null) []string {
	var out []string
	for _, n := range nulls {
		out = append(out, n.Path.String()+": "+n.Detail)
	}
	return out
}

// TestNulls: a null field is "not set" wherever it stands; a null map value
// or list element is reported at its path, at any depth (a list of structs
// holding a map), in sorted key order; a value with its own JSON form and
// an unknown field are not walked.
func TestNulls(t *testing.T) {
	doc := `
maxPods: null
evictionHard: {nodefs.available: null, memory.available: 1Gi}
clusterDNS: [10.0.0.10, null]
reservedMemory: [{numaNode: 0, limits: {memory: null}}]
authentication: {x509: {clientCAFile: null}, webhook: {cacheTTL: null}}
staticPodURLHeader: {X-Token: [a, null]}
notAField: {a: null}
`
	want := []string{
		"clusterDNS[1]: " + NullListElement,
		"evictionHard[nodefs.available]: " + NullMapValue,
		"reservedMemory[0].limits[memory]: " + NullMapValue,
		"staticPodURLHeader[X-Token][1]: " + NullListElement,
	}
	m := tree(t, doc)
	if diff := cmp.Diff(want, describe(Nulls(m, Type, nil))); diff != "" {
		t.Errorf("Nulls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tree(t, doc), m); diff != "" {
		t.Errorf("Nulls changed the tree:\n%s", diff)
	}
}

// TestDropNulls: the same reports, and the null fields are gone, with the
// objects that held nothing else; objects and lists written empty stay.
func TestDropNulls(t *testing.T) {
	m := tree(t, `
maxPods: null
evictionHard: {memory.available: null}
authentication: {x509: {clientCAFile: null}, anonymous: {}}
logging: {options: {json: {infoBufferSize: null}}}
featureGates: {}
clusterDNS: []
eventBurst: 5
`)
	got := describe(DropNulls(m, Type, nil))
	if want := []string{"evictionHard[memory.available]: " + NullMapValue}; !cmp.Equal(want, got) {
		t.Errorf("DropNulls reported %q, want %q", got, want)
	}
	want := tree(t, `
evictionHard: {memory.available: null}
authentication: {anonymous: {}}
featureGates: {}
clusterDNS: []
eventBurst: 5
`)
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("tree after DropNulls (-want +got):\n%s", diff)
	}
}

func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct{ doc, err string }{
		{"maxPods: 10\n", ""},
		{`{"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1", "maxPods": 10}`, ""},
		{"", "not a YAML or JSON object"},
		{"- a\n", "not a YAML or JSON object"},
		{"maxPods: 10\nmaxPods: 11\n", `"maxPods" already set`},
		{"maxPod: 10\n", `unknown field "maxPod"`},
		{"maxPods: ten\n", "cannot unmarshal"},
		{"apiVersion: v1\n", `apiVersion "v1", want "kubelet.config.k8s.io/v1beta1"`},
		{"kind: KubeProxyConfiguration\n", `kind "KubeProxyConfiguration", want "KubeletConfiguration"`},
	} {
		cfg, j, err := DecodeStrict([]byte(tc.doc))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.err == "" && (cfg == nil || cfg.MaxPods != 10 || !json.Valid(j)):
			t.Errorf("%q: got %+v, %s", tc.doc, cfg, j)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one with %q", tc.doc, err, tc.err)
		}
	}
}

// FuzzDecodeStrict: any bytes give a configuration and JSON, or an error;
// never a panic. What is accepted walks without a panic too.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{"maxPods: 10\n", `{"evictionHard":{"a":null}}`, "reservedMemory: [{limits: {memory: null}}]\n", "{", "- 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, j, err := DecodeStrict(doc)
		if err != nil {
			return
		}
		if cfg == nil || !json.Valid(j) {
			t.Fatalf("accepted %q as %+v, %q", doc, cfg, j)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			t.Fatal(err)
		}
		Nulls(m, Type, nil)
		DropNulls(m, Type, nil)
	})
}
