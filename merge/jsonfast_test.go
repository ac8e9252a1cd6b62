package merge

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// parseJSONBothWays parses data with the fast paths on and off and fails on
// any difference; it reports whether parseJSONFast took the document.
func parseJSONBothWays(t testing.TB, data []byte) (fast bool) {
	t.Helper()
	var a arena
	probe := parser{arena: &a, layer: 2}
	trimmed := []byte(strings.TrimSpace(string(data)))
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if _, ok := probe.parseJSONFast(trimmed); ok {
			fast = true
		}
	}
	if len(a.members) > 0 || len(a.elems) > 0 {
		t.Fatalf("parseJSONFast left %d members and %d elements on the stacks", len(a.members), len(a.elems))
	}
	pf := parser{arena: &a, layer: 2}
	ps := parser{arena: &a, layer: 2, noFastPaths: true}
	got, want := pf.parse(data), ps.parse(data)
	if (got == nil) != (want == nil) {
		t.Fatalf("fast root %v, slow root %v\n%s", got != nil, want != nil, data)
	}
	if got != nil {
		if g, w := string(appendJSON(nil, got)), string(appendJSON(nil, want)); g != w {
			t.Fatalf("fast path and encoding/json differ:\n fast %s\n slow %s\ndocument:\n%s", g, w, data)
		}
		if !sameLayers(got, want) || !sameKinds(got, want) {
			t.Fatalf("layers or kinds differ\n%s", data)
		}
	}
	if !reflect.DeepEqual(pf.problems, ps.problems) || !reflect.DeepEqual(pf.warnings, ps.warnings) {
		t.Fatalf("problems differ:\n fast %v %v\n slow %v %v\ndocument:\n%s", pf.problems, pf.warnings, ps.problems, ps.warnings, data)
	}
	return fast
}

func sameKinds(a, b *node) bool {
	if a.kind != b.kind || len(a.obj) != len(b.obj) || len(a.arr) != len(b.arr) {
		return false
	}
	for i := range a.obj {
		if !sameKinds(a.obj[i].val, b.obj[i].val) {
			return false
		}
	}
	for i := range a.arr {
		if !sameKinds(a.arr[i], b.arr[i]) {
			return false
		}
	}
	return true
}

var jsonFastCases = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":-0,"b":0.5,"c":1e3,"d":-1.5E-7,"e":12345678901234567890123}`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`, `{"a":0x1}`,
	`{"a":true,"b":false,"c":null}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`,
	`{"a":"x\"y"}`, `{"a":"\u00e9"}`, `{"a":"é"}`, "{\"a\":\"\xff\"}", "{\"a\":\"x\ty\"}",
	`{"a":[1,2,[3,{}]],"b":[]}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":{"b":{"c":{}}}}`,
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":1}}`, `{"a":1} x`, `{"a":1}{}`,
	`{a:1}`, `{'a':1}`, `{"a":1`, `{"a":[`, "{\"a\":\n 1\r\n}",
	`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1e3,"maxPods":7}`,
	strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70),
	strings.Repeat(`[`, 30) + `]`,
}

// TestJSONFastPath: parseJSONFast reads every JSON document it takes as
// parseJSON does (edge cases, every YAML file of the repository as JSON,
// generated kubelet documents), and takes the realistic ones.
func TestJSONFastPath(t *testing.T) {
	for _, c := range jsonFastCases {
		parseJSONBothWays(t, []byte(c))
	}
	files, fast := 0, 0
	_ = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".conf")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || len(data) > 1<<20 {
			return nil
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil || len(js) == 0 || js[0] != '{' {
			return nil
		}
		files++
		if parseJSONBothWays(t, js) {
			fast++
		}
		return nil
	})
	if files < 10 || fast < files/2 {
		t.Fatalf("the fast path took %d of %d repository files as JSON", fast, files)
	}
	root, err := buildSchema(reflect.TypeFor[kubeletConfig]())
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{r: rand.New(rand.NewSource(9)), fieldProb: 0.3, nulls: true}
	taken := 0
	for i := 0; i < 200; i++ {
		v, _ := g.value(root, 0)
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if parseJSONBothWays(t, js) {
			taken++
		}
	}
	if taken < 100 {
		t.Errorf("the fast path took only %d of 200 generated documents", taken)
	}
}

// FuzzJSONFastPath: on any input, the fast paths and the full parsers agree.
func FuzzJSONFastPath(f *testing.F) {
	for _, c := range jsonFastCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parseJSONBothWays(t, data)
	})
}
