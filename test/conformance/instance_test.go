package conformance

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kjson "sigs.k8s.io/json"

	"github.com/dynconfig/dynconfig/merge"
)

// instanceCases is how many base + instance pairs TestKubeletInstanceMerge
// generates per run (a tenth with -short).
const instanceCases = 3000

// instanceDifference is one row of the table "Differences from
// strategicpatch" in merge/doc.go: a case where our instance merge
// deliberately gives another result than
// strategicpatch.StrategicMergePatch. rewrite turns an instance document into
// the one that makes strategicpatch give our result (base is the base
// document, for rules that depend on it); it reports whether it changed
// anything. A nil rewrite is a row that cannot arise with the kubelet's type.
type instanceDifference struct {
	name    string
	rewrite func(base, inst map[string]any) bool
	// rejected is part of our error for the rows where we reject an input
	// that strategicpatch takes (rewrite is nil then).
	rejected string
}

// instanceDifferences is the table of merge/doc.go, in its order.
var instanceDifferences = []instanceDifference{
	{"maps of lists", rewriteMapsOfLists, ""},
	{"$patch: replace on an unset field", rewriteReplaceOnUnset, ""},
	{"null in a $patch: replace object", rewriteNullsInReplaced, ""},
	{"null in a list element", rewriteNullsInLists, ""},
	{"$patch: delete", rewriteDelete, ""},
	{"$patch in a list element", nil, "directive $patch is not allowed inside a list that is replaced as a whole"},
	{"custom JSON decoding", nil, ""},
}

// TestKubeletInstanceMerge: on generated base and instance documents of the
// kubelet's type (nulls, $patch: replace and $patch: delete anywhere an
// object is, maps of lists, int64 values beyond 2^53), the instance layer of
// merge.Pipeline gives, field for field, what
// strategicpatch.StrategicMergePatch gives on the typed KubeletConfiguration
// (the KEP "Instance-Specific ComponentConfig"'s way), except for the
// differences merge/doc.go lists. Where the two differ, the listed
// differences' rewrites are applied to the instance and strategicpatch must
// then give exactly our result; a difference that no row explains fails the
// test. Both sides are compared before defaulting, after strict decoding into
// the v1beta1 type.
func TestKubeletInstanceMerge(t *testing.T) {
	ours, err := merge.New[kubeletv1beta1.KubeletConfiguration](mergeOnly{}, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	same, bothReject, explained := 0, 0, map[string]int{}
	forEachCase(t, 4_000_000, instanceCases, func(t *testing.T, seed int64, r *rand.Rand) {
		g := &jsonGen{r: r}
		base := g.document(0.08, false)
		inst := g.document(0.05, true)
		overlap(g, base, inst)
		baseJSON, instJSON := mustJSON(t, base), mustJSON(t, inst)
		report := func(format string, args ...any) {
			t.Errorf("seed %d: "+format+"\nbase: %s\ninstance: %s", append(append([]any{seed}, args...), baseJSON, instJSON)...)
		}

		res, err := ours.Merge(merge.Layers{
			Base:     &merge.Document{Name: "kubelet.yaml", Data: baseJSON},
			Instance: &merge.Document{Name: "instance.yaml", Data: instJSON},
		})
		upstream, upErr := strategicpatch.StrategicMergePatch(baseJSON, instJSON, &kubeletv1beta1.KubeletConfiguration{})
		if err != nil {
			// Both must reject: strategicpatch fails, or its result is not
			// a configuration the kubelet decodes.
			if upErr == nil {
				if _, decErr := decodeKubeletStrict(upstream); decErr == nil {
					for _, d := range instanceDifferences {
						if d.rejected != "" && strings.Contains(err.Error(), d.rejected) {
							explained[d.name]++
							return
						}
					}
					report("Merge: %v; strategicpatch succeeds:\n%s", err, upstream)
					return
				}
			}
			bothReject++
			return
		}
		got := decodeKubelet(t, res.MergedJSON())

		if upErr == nil {
			if want, err := decodeKubeletStrict(upstream); err == nil && cmp.Equal(want, got) {
				same++
				return
			}
		}
		var applied []string
		for _, d := range instanceDifferences {
			if d.rewrite != nil && d.rewrite(base, inst) {
				applied = append(applied, d.name)
			}
		}
		rewritten := mustJSON(t, inst)
		upstream, err = strategicpatch.StrategicMergePatch(mustJSON(t, base), rewritten, &kubeletv1beta1.KubeletConfiguration{})
		if err != nil {
			report("strategicpatch fails (%v), also with the listed differences applied (%v): %v", upErr, applied, err)
			return
		}
		want, err := decodeKubeletStrict(upstream)
		if err != nil {
			report("strategicpatch's result does not decode, also with the listed differences applied (%v): %v\n%s", applied, err, upstream)
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			report("ours differs from strategicpatch in a way merge/doc.go does not list (-strategicpatch with %v +ours):\n%s", applied, diff)
			return
		}
		if len(applied) == 0 {
			report("strategicpatch differs (%v) and no listed difference applies", upErr)
			return
		}
		for _, a := range applied {
			explained[a]++
		}
	})
	t.Logf("%d cases equal to strategicpatch, %d rejected by both; explained by the table: %v", same, bothReject, explained)
	if n := same + sumValues(explained); n >= 1000 {
		for _, d := range instanceDifferences {
			if (d.rewrite != nil || d.rejected != "") && explained[d.name] == 0 {
				t.Errorf("difference %q never arose in %d cases: the generator needs fixing", d.name, n)
			}
		}
		if same < n/2 {
			t.Errorf("only %d of %d cases equal to strategicpatch without rewrites: the generator needs fixing", same, n)
		}
	}
}

// TestInstanceDifferencesDocumented: the rows of the table "Differences from
// strategicpatch" in merge/doc.go are the ones TestKubeletInstanceMerge
// knows, in the same order.
func TestInstanceDifferencesDocumented(t *testing.T) {
	src, err := os.ReadFile("../../merge/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	inTable := false
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(line, "//"), " ")
		switch {
		case strings.HasPrefix(line, "# "):
			inTable = line == "# Differences from strategicpatch"
		case inTable && strings.HasPrefix(line, "\t| ") && !strings.HasPrefix(line, "\t| difference") && !strings.HasPrefix(line, "\t|--"):
			rows = append(rows, strings.TrimSpace(strings.Split(strings.TrimPrefix(line, "\t|"), "|")[0]))
		}
	}
	var want []string
	for _, d := range instanceDifferences {
		want = append(want, d.name)
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("the table in merge/doc.go and the test disagree (-test +doc):\n%s", diff)
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeKubelet(t *testing.T, data []byte) *kubeletv1beta1.KubeletConfiguration {
	t.Helper()
	kc, err := decodeKubeletStrict(data)
	if err != nil {
		t.Fatalf("decoding our merged JSON: %v\n%s", err, data)
	}
	return kc
}

// decodeKubeletStrict decodes as the kubelet's codec does: case-sensitive,
// integers kept, unknown or duplicate fields an error.
func decodeKubeletStrict(data []byte) (*kubeletv1beta1.KubeletConfiguration, error) {
	kc := &kubeletv1beta1.KubeletConfiguration{}
	strict, err := kjson.UnmarshalStrict(data, kc, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("strict decoding: %v", strict)
	}
	return kc, nil
}

// --- rewrites: the table's rows as changes to the instance ---------------

const patchKey = "$patch"

// walkObjects calls fn on every object of inst with the base's value at the
// same path (nil where the base has none), parents before children.
func walkObjects(base any, inst map[string]any, fn func(base any, obj map[string]any)) {
	fn(base, inst)
	bm, _ := base.(map[string]any)
	for _, k := range sortedKeys(inst) {
		if sub, ok := inst[k].(map[string]any); ok {
			var b any
			if bm != nil {
				b = bm[k]
			}
			walkObjects(b, sub, fn)
		}
	}
}

// rewriteMapsOfLists: staticPodURLHeader (a map of lists) merges by key
// with us; strategicpatch fails when both documents have it. The rewrite
// gives strategicpatch the merged map as a replacement.
func rewriteMapsOfLists(base, inst map[string]any) bool {
	const f = "staticPodURLHeader"
	bm, ok1 := base[f].(map[string]any)
	im, ok2 := inst[f].(map[string]any)
	if !ok1 || !ok2 || im[patchKey] != nil {
		return false
	}
	merged := map[string]any{}
	for k, v := range bm {
		merged[k] = v
	}
	for k, v := range im {
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = v
		}
	}
	merged[patchKey] = "replace"
	inst[f] = merged
	return true
}

// rewriteReplaceOnUnset: an object with $patch: replace where the base has
// no object sets the field with us; strategicpatch drops it. Without the
// directive strategicpatch sets it.
func rewriteReplaceOnUnset(base, inst map[string]any) bool {
	changed := false
	walkObjects(base, inst, func(b any, obj map[string]any) {
		for _, k := range sortedKeys(obj) {
			sub, ok := obj[k].(map[string]any)
			if !ok || sub[patchKey] != "replace" {
				continue
			}
			bm, _ := b.(map[string]any)
			if _, has := bm[k].(map[string]any); !has {
				delete(sub, patchKey)
				changed = true
			}
		}
	})
	return changed
}

// rewriteNullsInReplaced: a null inside an object with $patch: replace
// means "not set" with us; strategicpatch keeps it as a value (a map key
// with an empty value once decoded).
func rewriteNullsInReplaced(_, inst map[string]any) bool {
	changed := false
	walkObjects(nil, inst, func(_ any, obj map[string]any) {
		if obj[patchKey] == "replace" {
			changed = dropNulls(obj) || changed
		}
	})
	return changed
}

// rewriteNullsInLists: a list is replaced as a whole and its elements are
// complete values, in which null means "not set", as in a complete document
// and as jsonpatch.MergePatch (drop-ins) prunes them. strategicpatch drops
// those nulls only where the base lacks the list; where the base has it, it
// keeps them as values (a map key with an empty value once decoded). The
// rewrite drops them there.
func rewriteNullsInLists(base, inst map[string]any) bool {
	changed := false
	walkObjects(base, inst, func(b any, obj map[string]any) {
		bm, ok := b.(map[string]any)
		if !ok {
			return
		}
		for _, k := range sortedKeys(obj) {
			l, isList := obj[k].([]any)
			if _, has := bm[k].([]any); !isList || !has || !hasNull(l) {
				continue
			}
			changed = dropNulls(l) || changed
		}
	})
	return changed
}

func hasNull(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if e == nil || hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}

// dropNulls removes the null members of the objects in v, recursively.
func dropNulls(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				changed = true
				continue
			}
			changed = dropNulls(e) || changed
		}
	case []any:
		for _, e := range v {
			changed = dropNulls(e) || changed
		}
	}
	return changed
}

// rewriteDelete: $patch: delete removes the field with us; strategicpatch
// leaves an empty object (for a pointer field: set, with zero values). null
// is what removes a field in strategicpatch.
func rewriteDelete(_, inst map[string]any) bool {
	changed := false
	walkObjects(nil, inst, func(_ any, obj map[string]any) {
		for _, k := range sortedKeys(obj) {
			if sub, ok := obj[k].(map[string]any); ok && sub[patchKey] == "delete" {
				obj[k] = nil
				changed = true
			}
		}
	})
	return changed
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// --- generator --------------------------------------------------------------

// jsonGen generates JSON documents of the kubelet's v1beta1 type by
// reflection: a few fields set, small key pools so that documents overlap,
// and in instance documents nulls and $patch directives.
type jsonGen struct {
	r     *rand.Rand
	patch bool
}

var genMapKeys = []string{"a", "memory.available", "nodefs.available", "X-Header", "cpu"}

func (g *jsonGen) chance(p float64) bool { return g.r.Float64() < p }

func (g *jsonGen) document(fieldProb float64, patch bool) map[string]any {
	g.patch = patch
	m, _ := g.value(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), fieldProb, 0).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	delete(m, patchKey)
	m["apiVersion"], m["kind"] = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
	return m
}

// custom returns a value for a type with its own JSON form.
func (g *jsonGen) custom(t reflect.Type) (any, bool) {
	switch t.PkgPath() + "." + t.Name() {
	case "k8s.io/apimachinery/pkg/apis/meta/v1.Duration":
		return fmt.Sprintf("%ds", g.r.Intn(600)), true
	case "k8s.io/apimachinery/pkg/apis/meta/v1.Time":
		return "2024-01-02T03:04:05Z", true
	case "k8s.io/apimachinery/pkg/api/resource.Quantity", "k8s.io/apimachinery/pkg/api/resource.QuantityValue":
		return []string{"100Mi", "1Gi", "250m", "0"}[g.r.Intn(4)], true
	case "k8s.io/component-base/logs/api/v1.TimeOrMetaDuration":
		return fmt.Sprintf("%dms", 1+g.r.Intn(9000)), true
	}
	return nil, false
}

func (g *jsonGen) value(t reflect.Type, fieldProb float64, depth int) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v, ok := g.custom(t); ok {
		return v
	}
	switch t.Kind() {
	case reflect.Bool:
		return g.chance(0.5)
	case reflect.String:
		return []string{"x", "y", "10.0.0.1", "", "/var/lib/kubelet"}[g.r.Intn(5)]
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return g.r.Intn(2000) - 1000
	case reflect.Int, reflect.Int64:
		if g.chance(0.2) {
			return int64(1)<<53 + 1 + g.r.Int63n(1<<40) // not exact as a float64
		}
		return g.r.Intn(2000) - 1000
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint, reflect.Uint64:
		return g.r.Intn(200)
	case reflect.Float32, reflect.Float64:
		return float64(g.r.Intn(1000)) / 8
	case reflect.Slice:
		if depth > 4 {
			return []any{}
		}
		out := []any{}
		for range g.r.Intn(3) {
			out = append(out, g.value(t.Elem(), 0.5, depth+1))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range genMapKeys {
			if !g.chance(0.35) {
				continue
			}
			if g.patch && g.chance(0.2) {
				out[k] = nil
				continue
			}
			out[k] = g.value(t.Elem(), 0.5, depth+1)
		}
		g.directive(out)
		return out
	case reflect.Struct:
		out := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous || name == "" || name == "-" || name == "apiVersion" || name == "kind" || !g.chance(fieldProb) {
				continue
			}
			if g.patch && g.chance(0.15) {
				out[name] = nil
				continue
			}
			out[name] = g.value(f.Type, 0.5, depth+1)
		}
		g.directive(out)
		return out
	}
	return nil
}

// directive adds $patch to some objects of instance documents (not inside
// lists, which the kubelet's type always replaces as a whole).
func (g *jsonGen) directive(obj map[string]any) {
	if !g.patch {
		return
	}
	switch x := g.r.Float64(); {
	case x < 0.08:
		obj[patchKey] = "replace"
	case x < 0.12:
		clear(obj)
		obj[patchKey] = "delete"
	}
}

// overlap copies some of the base's objects into the instance as patches of
// themselves, so that the instance often touches what the base set.
func overlap(g *jsonGen, base, inst map[string]any) {
	for _, k := range sortedKeys(base) {
		bm, ok := base[k].(map[string]any)
		if !ok || k == "apiVersion" || k == "kind" || !g.chance(0.5) {
			continue
		}
		if _, set := inst[k]; set {
			continue
		}
		p := map[string]any{}
		for _, kk := range sortedKeys(bm) {
			switch g.r.Intn(4) {
			case 0:
				p[kk] = nil
			case 1:
				p[kk] = bm[kk]
			}
		}
		g.directive(p)
		inst[k] = p
	}
	// Lists the base has, again in the instance with nulls in their
	// elements' objects.
	for _, k := range sortedKeys(base) {
		l, ok := base[k].([]any)
		if _, set := inst[k]; !ok || set || !g.chance(0.5) {
			continue
		}
		var b []byte
		if b, ok = jsonRoundTrip(l); ok {
			var c []any
			if json.Unmarshal(b, &c) == nil && nullFirstScalar(c) {
				inst[k] = c
			}
		}
	}
}

func jsonRoundTrip(v any) ([]byte, bool) {
	b, err := json.Marshal(v)
	return b, err == nil
}

// nullFirstScalar sets the first scalar member (by key) of every object in v
// to null, and reports whether it set any.
func nullFirstScalar(v any) bool {
	set := false
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			switch v[k].(type) {
			case map[string]any, []any:
				set = nullFirstScalar(v[k]) || set
			case nil:
			default:
				if !set {
					v[k] = nil
					set = true
				}
			}
		}
	case []any:
		for _, e := range v {
			set = nullFirstScalar(e) || set
		}
	}
	return set
}
