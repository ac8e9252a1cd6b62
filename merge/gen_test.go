package merge

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"
)

// gen builds random, well-typed configuration documents for property tests,
// walking the Go type the way a user writing YAML would: some fields set,
// small key pools so that layers overlap, and (in patches) some nulls.
type gen struct {
	r *rand.Rand
	// nulls allows null values in objects: deletions in patches, and "not
	// set" inside the elements of lists (which jsonpatch.MergePatch prunes,
	// as merge drops them).
	nulls bool
	// directives allows $patch: replace/delete on objects, for instance
	// documents; only where the original has the field (see strategic.go).
	directives bool
	// fieldProb is the chance that a struct field is set.
	fieldProb float64
}

var mapKeys = []string{"a", "b", "c.d", "memory.available", "X-Header"}

// opaqueValue returns a valid JSON value for types with custom decoding.
func (g *gen) opaqueValue(t reflect.Type) (any, bool) {
	switch t.String() {
	case "v1.Duration":
		return fmt.Sprintf("%ds", g.r.Intn(600)), true
	case "v1.TimeOrMetaDuration":
		if g.r.Intn(2) == 0 {
			return json.Number(fmt.Sprint(g.r.Intn(10) * 1000000000)), true
		}
		return fmt.Sprintf("%dms", g.r.Intn(9000)+1), true
	case "resource.Quantity", "resource.QuantityValue":
		return []string{"100Mi", "1Gi", "250m", "0"}[g.r.Intn(4)], true
	case "v1.Time":
		return "2024-01-02T03:04:05Z", true
	}
	return nil, false
}

// value returns a random JSON value for t, or ok=false when it cannot.
func (g *gen) value(t *typeInfo, depth int) (any, bool) {
	t = t.deref()
	switch t.kind {
	case tkBool:
		return g.r.Intn(2) == 0, true
	case tkString:
		return []string{"x", "y", "10.0.0.1", "", "with space"}[g.r.Intn(5)], true
	case tkInt:
		max := int64(1) << (t.bits - 2)
		if max > 100000 {
			max = 100000
		}
		return json.Number(fmt.Sprint(g.r.Int63n(2*max) - max)), true
	case tkUint:
		return json.Number(fmt.Sprint(g.r.Intn(200))), true
	case tkFloat:
		return json.Number(fmt.Sprint(float64(g.r.Intn(1000)) / 8)), true
	case tkOpaque:
		return g.opaqueValue(t.rtype)
	case tkAny:
		return "any", true
	case tkSlice:
		if depth > 4 {
			return nil, false
		}
		n := g.r.Intn(3)
		out := []any{}
		for i := 0; i < n; i++ {
			if v, ok := g.value(t.elem, depth+1); ok {
				out = append(out, v)
			}
		}
		return out, true
	case tkMap:
		if depth > 4 {
			return nil, false
		}
		out := map[string]any{}
		for _, k := range mapKeys {
			if g.r.Intn(3) != 0 {
				continue
			}
			if g.nulls && g.r.Intn(5) == 0 {
				out[k] = nil
				continue
			}
			if v, ok := g.value(t.elem, depth+1); ok {
				out[k] = v
			}
		}
		return out, true
	case tkStruct:
		if depth > 4 {
			return nil, false
		}
		out := map[string]any{}
		for _, f := range t.fieldList {
			if f.name == "apiVersion" || f.name == "kind" || g.r.Float64() > g.fieldProb {
				continue
			}
			if g.nulls && g.r.Intn(6) == 0 {
				out[f.name] = nil
				continue
			}
			if v, ok := g.value(f.typ, depth+1); ok {
				out[f.name] = v
			}
		}
		return out, true
	}
	return nil, false
}

// document returns a random document of the kubelet type as YAML.
func (g *gen) document(t testing.TB, root *typeInfo, gvk [2]string) []byte {
	t.Helper()
	v, _ := g.value(root, 0)
	m := v.(map[string]any)
	m["apiVersion"], m["kind"] = gvk[0], gvk[1]
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// addDirectives sprinkles $patch directives into patch objects whose field
// the original also has as an object.
func (g *gen) addDirectives(patch, orig map[string]any) {
	keys := make([]string, 0, len(patch))
	for k := range patch {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pm, ok := patch[k].(map[string]any)
		if !ok {
			continue
		}
		om, ok := orig[k].(map[string]any)
		if !ok {
			continue
		}
		switch g.r.Intn(6) {
		case 0:
			// strategicpatch keeps nulls of a replaced object as values;
			// we drop them. Keep the comparison about the directive.
			stripNulls(pm)
			pm[directiveKey] = "replace"
		case 1:
			patch[k] = map[string]any{directiveKey: "delete"}
		default:
			g.addDirectives(pm, om)
		}
	}
}

func stripNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			stripNulls(v)
		}
	}
}
