package merge

import (
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// parseBothWays parses data with the YAML fast path on and off, in strict
// and lenient mode, and fails on any difference in tree, layers, problems
// or warnings. It reports whether the fast path took the document.
func parseBothWays(t testing.TB, data []byte) (fast bool) {
	t.Helper()
	for _, lenient := range []bool{false, true} {
		var a arena
		probe := parser{arena: &a, layer: 3, lenient: lenient}
		if _, ok := probe.parseYAMLFast(data); ok {
			fast = true
		} else if len(probe.problems) > 0 || len(probe.warnings) > 0 || len(probe.path) > 0 {
			t.Fatalf("parseYAMLFast gave up but left problems %v, warnings %v, path %v", probe.problems, probe.warnings, probe.path)
		}
		pf := parser{arena: &a, layer: 3, lenient: lenient}
		ps := parser{arena: &a, layer: 3, lenient: lenient, noFastPaths: true}
		got, want := pf.parse(data), ps.parse(data)
		if (got == nil) != (want == nil) {
			t.Fatalf("lenient=%v: fast path root %v, yaml.v2 root %v\n%s", lenient, got != nil, want != nil, data)
		}
		if got != nil {
			if g, w := string(appendJSON(nil, got)), string(appendJSON(nil, want)); g != w {
				t.Fatalf("lenient=%v: fast path and yaml.v2 differ:\n fast %s\n yaml %s\ndocument:\n%s", lenient, g, w, data)
			}
			if !sameLayers(got, want) {
				t.Fatalf("lenient=%v: layers differ\n%s", lenient, data)
			}
		}
		if !reflect.DeepEqual(pf.problems, ps.problems) || !reflect.DeepEqual(pf.warnings, ps.warnings) {
			t.Fatalf("lenient=%v: problems differ:\n fast %v %v\n yaml %v %v\ndocument:\n%s", lenient, pf.problems, pf.warnings, ps.problems, ps.warnings, data)
		}
	}
	return fast
}

func sameLayers(a, b *node) bool {
	if a.layer != b.layer || len(a.obj) != len(b.obj) || len(a.arr) != len(b.arr) {
		return false
	}
	for i := range a.obj {
		if !sameLayers(a.obj[i].val, b.obj[i].val) {
			return false
		}
	}
	for i := range a.arr {
		if !sameLayers(a.arr[i], b.arr[i]) {
			return false
		}
	}
	return true
}

// yamlFastCases are documents at the edges of the fast path: each is
// either read the same way by both parsers, or left to yaml.v2.
var yamlFastCases = []string{
	"a: 1\n",
	"a: y\nb: n\nc: yes\nd: No\ne: on\nf: OFF\ng: ~\nh: null\ni: Null\nj: true\nk: False\n",
	"y: 1\nn: 2\non: 3\nnull: 4\n",
	"1: a\n010: b\n0x1F: c\n1.5: d\n-1: e\n",
	"a: 0777\nb: 0x1F\nc: 1_000\nd: 1e3\ne: 1.5\nf: .5\ng: -.inf\nh: .nan\ni: +1\nj: -0\nk: 0\nl: -12\nm: 1.\nn: 1.5e\n",
	"a: 123456789012345678\nb: 1234567890123456789\nc: 12345678901234567890\nd: 99999999999999999999999\n",
	"a: 2024-01-01\nb: 2024-01-01T10:00:00Z\nc: 1234-\nd: 12345-1\n",
	"a: 10.96.0.10\nb: 1.2.3\nc: 10Mi\nd: 5m0s\ne: 15%\nf: 0-1\ng: -foo\nh: +x\ni: .foo\nj: 0b101\nk: -0b11\nl: 0o17\n",
	"a: 'x'\nb: \"y\"\nc: 'it''s'\nd: \"a\\nb\"\ne: ''\nf: \"\"\ng: 'a' # c\nh: \"b\"#c\ni: 'x'y\n",
	"a: {}\nb: []\nc: {x: 1}\nd: [1, 2]\ne: {} # c\nf: []x\n",
	"a: [10.96.0.10]\nb: [ a , 'b', \"c\" ]\nc: [a,,b]\nd: [a, b,]\ne: [y, ~, 1.5, 010]\nf: [a b]\ng: [[a]]\nh: [{a: 1}]\ni: [a:b]\nj: [a # x]\nk: [- a]\nl: ['a,b']\nm: [\"a\\\"\"]\n",
	"a: [x] # c\nb: [x]y\nc: [\n  x]\n",
	"a: b: c\n",
	"a: b:\n",
	"a: x #c\nb: x#c\nc: #c\nd:\n",
	"a: |\n  x\n",
	"a: >-\n  x\n",
	"a: &x 1\nb: *x\n",
	"a: !!str 1\n",
	"a:\n  b: 1\n  c: 2\n",
	"a:\n  b: 1\n c: 2\n",
	"a:\n    b: 1\n  c: 2\n",
	"a: 1\n  b: 2\n",
	"a: x\n  y\n",
	"a:\n- 1\n- 2\nb: 3\n",
	"a:\n  - 1\n  -  2\n",
	"a:\n- x: 1\n  y: 2\n- x: 3\n-   z: 4\n    w: 5\n",
	"a:\n- x:\n  - 1\n  y: 2\n",
	"a:\n- - 1\n",
	"a:\n-\n  x: 1\n",
	"a:\n- \n",
	"a:\n- x\n  y\n",
	"a: 1\na: 2\nb:\n  c: 1\n  c: 2\n",
	"- a\n",
	"---\na: 1\n",
	"--- \na: 1\n",
	"a: 1\n---\nb: 2\n",
	"a: 1\n...\n",
	"%YAML 1.1\n---\na: 1\n",
	"# only a comment\n",
	"",
	"\n\n",
	"a:\tb\n",
	"a: b\r\n",
	"a: \xc3\xa9\n",
	"\xef\xbb\xbfa: 1\n",
	"? a\n: b\n",
	"a: [\n",
	"\"a\": 1\n",
	"a b: 1\n",
	"a:1\n",
	"$patch: replace\nx:\n  $patch: delete\n",
	"<<: {a: 1}\n",
	"a: @x\n",
	"a: `x\n",
	"a: -\n",
	"a: - b\n",
	"a: ?x\n",
	"a: :x\n",
	"a: x:y\n",
	"a: http://x:80/y\n",
	"a: x,y\n",
	"a: x[0]\n",
	"a: 'x\n  y'\n",
	"a: \"x\n  y\"\n",
	"  a: 1\n  b: 2\n",
	"a:\n  # comment\n  b: 1\n# comment\nc: 2\n",
	"a: 1   \nb:   2  \n",
	"a:\n  b:\n    c:\n      d: 1\n",
	"a: 1e400\nb: -1e400\nc: 1e-400\n",
	"a: 0.0000001\nb: 1e21\nc: 100000000000000000000.0\n",
	"x: Y\nx2: NO\nx3: True\nx4: tRUE\nx5: oN\n",
	"k1: v\nk2: v\nk3: v\nk4: v\nk5: v\nk6: v\nk7: v\nk8: v\nk9: v\nk10: v\nk11: v\nk12: v\nk13: v\nk14: v\nk15: v\nk16: v\nk17: v\nk1: w\nk18: v\nk17: w\n",
}

// TestYAMLFastPath: the fast path reads every document it takes exactly as
// yaml.v2 does (the edge cases above, every YAML file of the repository,
// generated kubelet documents), and it does take the realistic ones (else
// it would be dead code and the benchmark would say nothing).
func TestYAMLFastPath(t *testing.T) {
	for _, c := range yamlFastCases {
		parseBothWays(t, []byte(c))
		// Each line alone too: one line the fast path leaves to yaml.v2
		// sends the whole document there.
		for line := range strings.SplitSeq(c, "\n") {
			parseBothWays(t, []byte(line+"\n"))
		}
	}

	mustBeFast := map[string]bool{}
	for _, dir := range []string{"testdata/bench", "testdata/layers", "testdata/kep"} {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".conf")) {
				mustBeFast[path] = true
			}
			return nil
		})
	}
	files := 0
	_ = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".conf")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || len(data) > 1<<20 {
			return nil
		}
		files++
		if fast := parseBothWays(t, data); !fast && mustBeFast[strings.TrimPrefix(path, "../merge/")] {
			t.Errorf("%s: the fast path did not take it", path)
		}
		return nil
	})
	for path := range mustBeFast {
		if fast := parseBothWays(t, readFile(t, path)); !fast {
			t.Errorf("%s: the fast path did not take it", path)
		}
	}
	if files < 10 {
		t.Fatalf("only %d YAML files found in the repository", files)
	}

	root, err := buildSchema(reflect.TypeFor[kubeletConfig]())
	if err != nil {
		t.Fatal(err)
	}
	n, fast := 400, 0
	if testing.Short() {
		n = 100
	}
	g := &gen{r: rand.New(rand.NewSource(7)), fieldProb: 0.3, nulls: true}
	for i := 0; i < n; i++ {
		if parseBothWays(t, g.document(t, root, [2]string{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"})) {
			fast++
		}
	}
	if fast < n/2 {
		t.Errorf("the fast path took only %d of %d generated documents", fast, n)
	}
}

// FuzzYAMLFastPath: on any input, the fast path and yaml.v2 agree.
func FuzzYAMLFastPath(f *testing.F) {
	for _, c := range yamlFastCases {
		f.Add([]byte(c))
	}
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parseBothWays(t, data)
	})
}
