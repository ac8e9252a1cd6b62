package merge

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// fuzzSeeds are documents from the tests: good ones, and ones with every
// kind of problem.
func fuzzSeeds(f *testing.F) [][]byte {
	f.Helper()
	seeds := [][]byte{
		[]byte(kubeletHeader + "port: 10250\nclusterDNS: [10.0.0.1]\nfeatureGates:\n  A: true\n"),
		[]byte(kubeletHeader + "port: ten\nadress: x\nport: 1\n"),
		[]byte(kubeletHeader + "evictionHard:\n  memory.available: null\nauthentication:\n  $patch: replace\n  x509: {clientCAFile: a}\n"),
		[]byte(kubeletHeader + "staticPodURLHeader:\n  X: [a, b]\nregisterWithTaints:\n- key: k\n  effect: NoSchedule\n  timeAdded: null\n"),
		[]byte(kubeletHeader + "syncFrequency: 10x\nlogging:\n  flushFrequency: 5\n  options:\n    json:\n      infoBufferSize: 1Mi\n"),
		[]byte(kubeletHeader + "a: &x {b: 1}\nc:\n  <<: *x\n"),
		[]byte(`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1e3,"maxPods":7}`),
		[]byte("- a\n- b\n"),
		[]byte(""),
		[]byte("{}"),
		[]byte(kubeletHeader + "---\n" + kubeletHeader),
		[]byte(kubeletHeader + "$patch: delete\n"),
		[]byte(kubeletHeader + "tlsCipherSuites: [a, null, 3]\nmemoryThrottlingFactor: .inf\n"),
	}
	for _, dir := range []string{"bench", "bench/config.d", "kep"} {
		entries, _ := os.ReadDir(filepath.Join("testdata", dir))
		for _, e := range entries {
			if !e.IsDir() {
				seeds = append(seeds, readFile(f, filepath.Join("testdata", dir, e.Name())))
			}
		}
	}
	return seeds
}

// checkResult asserts what must hold for any input: an error is an *Error
// that says something; a result decodes, from its own merged JSON, with the
// Kubernetes strict decoder to exactly the object Merge built.
func checkResult(t *testing.T, res *Result[kubeletConfig], err error) {
	t.Helper()
	if err != nil {
		var me *Error
		if !errors.As(err, &me) || me.empty() || err.Error() == "" {
			t.Fatalf("error %v (%T) is not a non-empty *Error", err, err)
		}
		return
	}
	var c kubeletConfig
	merged := res.MergedJSON()
	if strict, err := kjson.UnmarshalStrict(merged, &c); err != nil || len(strict) > 0 {
		t.Fatalf("merged JSON does not decode strictly: %v %v\n%s", err, strict, merged)
	}
	if diff := cmp.Diff(c, *res.Object); diff != "" {
		t.Fatalf("Merge's object differs from decoding its merged JSON (-decoded +merge):\n%s\n%s", diff, merged)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	p := newPipeline(f, Profile[kubeletConfig](nopKubelet()), Options{})
	lenient := newPipeline(f, Profile[kubeletConfig](nopKubelet()), Options{Lenient: true})
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := p.Merge(Layers{Base: &Document{Name: "fuzz.yaml", Data: data}})
		checkResult(t, res, err)
		lres, lerr := lenient.Merge(Layers{Base: &Document{Name: "fuzz.yaml", Data: data}})
		checkResult(t, lres, lerr)
		if err == nil && lerr != nil {
			t.Fatalf("strict decoding accepted what lenient decoding refused: %v", lerr)
		}
	})
}

func FuzzDropInMerge(f *testing.F) {
	seeds := fuzzSeeds(f)
	for i, s := range seeds {
		f.Add(seeds[0], s)
		f.Add(s, seeds[(i+1)%len(seeds)])
	}
	p := newPipeline(f, Profile[kubeletConfig](nopKubelet()), Options{})
	f.Fuzz(func(t *testing.T, base, dropIn []byte) {
		res, err := p.Merge(Layers{
			Base:    &Document{Name: "base.yaml", Data: base},
			DropIns: []Document{{Name: "10.conf", Data: dropIn}},
		})
		checkResult(t, res, err)
		if err != nil {
			return
		}
		// Oracle: the kubelet's way, where it is defined the same way. It
		// is not for nulls in the base (a plain decode keeps them as zero
		// values, we drop them) and nulls inside lists (jsonpatch prunes
		// them, RFC 7386 keeps them).
		bj, err1 := yaml.YAMLToJSON(base)
		dj, err2 := yaml.YAMLToJSON(dropIn)
		if err1 != nil || err2 != nil || hasNull(bj, false) || hasNull(dj, true) {
			return
		}
		mergedJSON, err := jsonpatch.MergePatch(bj, dj)
		if err != nil {
			return
		}
		var want kubeletConfig
		if strict, err := kjson.UnmarshalStrict(mergedJSON, &want); err != nil || len(strict) > 0 {
			t.Fatalf("we merged, but the kubelet's way does not decode: %v %v\n%s", err, strict, mergedJSON)
		}
		if diff := cmp.Diff(want, *res.Object); diff != "" {
			t.Fatalf("differs from jsonpatch.MergePatch (-jsonpatch +ours):\n%s", diff)
		}
	})
}

// hasNull reports whether JSON data has a null (only inside lists when
// inListsOnly).
func hasNull(data []byte, inListsOnly bool) bool {
	var v any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v); err != nil {
		return true
	}
	var walk func(v any, inList bool) bool
	walk = func(v any, inList bool) bool {
		switch v := v.(type) {
		case nil:
			return inList || !inListsOnly
		case map[string]any:
			for _, e := range v {
				if walk(e, inList) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e, true) {
					return true
				}
			}
		}
		return false
	}
	return walk(v, false)
}

func FuzzInstanceMerge(f *testing.F) {
	seeds := fuzzSeeds(f)
	for i, s := range seeds {
		f.Add(seeds[0], s)
		f.Add(s, seeds[(i+2)%len(seeds)])
	}
	p := newPipeline(f, Profile[kubeletConfig](nopKubelet()), Options{})
	lists := newPipeline(f, Profile[listConfig](nopProfile[listConfig]{gvk: listGVK}), Options{})
	f.Add([]byte("apiVersion: test.dynconfig.io/v1\nkind: ListConfig\nitems: [{name: a}, {name: b, ports: [1, 2]}]\ntags: [x, y]\n"),
		[]byte("apiVersion: test.dynconfig.io/v1\nkind: ListConfig\nitems: [{name: b, ports: [3]}, {name: a, $patch: delete}, {name: c}]\ntags: [z]\n"))
	f.Fuzz(func(t *testing.T, base, instance []byte) {
		res, err := p.Merge(Layers{
			Base:     &Document{Name: "base.yaml", Data: base},
			Instance: &Document{Name: "instance.yaml", Data: instance},
		})
		checkResult(t, res, err)

		lres, err := lists.Merge(Layers{
			Base:     &Document{Name: "base.yaml", Data: base},
			Instance: &Document{Name: "instance.yaml", Data: instance},
		})
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || me.empty() {
				t.Fatalf("error %v (%T) is not a non-empty *Error", err, err)
			}
			return
		}
		var c listConfig
		if strict, err := kjson.UnmarshalStrict(lres.MergedJSON(), &c); err != nil || len(strict) > 0 {
			t.Fatalf("merged JSON does not decode strictly: %v %v", err, strict)
		}
		if diff := cmp.Diff(c, *lres.Object); diff != "" {
			t.Fatalf("object differs from its merged JSON (-decoded +merge):\n%s", diff)
		}
	})
}
