package merge

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// TestKEPExample is the worked example of the KEP "Instance-Specific
// ComponentConfig": shared + instance -> merged. The KEP prints the merged
// feature gate as TaintBasedEviction, but its input says TaintBasedEvictions;
// a merge never renames keys, so the golden file keeps the input's spelling.
func TestKEPExample(t *testing.T) {
	shared := readFile(t, filepath.Join("testdata", "kep", "shared.yaml"))
	instance := readFile(t, filepath.Join("testdata", "kep", "instance.yaml"))
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	res, err := p.Merge(Layers{
		Base:     &Document{Name: "kubelet.yaml", Data: shared},
		Instance: &Document{Name: "kubelet-instance.yaml", Data: instance},
	})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	merged, err := yaml.JSONToYAML(res.MergedJSON())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("kep", "merged.golden.yaml"), merged)

	if got := res.Object.FeatureGates; !got["TaintBasedEvictions"] || len(got) != 2 {
		t.Errorf("featureGates = %v, want DynamicKubeletConfig and TaintBasedEvictions (input spelling)", got)
	}
	if _, misspelt := res.Object.FeatureGates["TaintBasedEviction"]; misspelt {
		t.Error("featureGates has the KEP's printed spelling TaintBasedEviction, which is in no input")
	}

	// The KEP's own code: strategicpatch over the JSON forms, typed struct.
	sharedJSON, _ := yaml.YAMLToJSON(shared)
	instanceJSON, _ := yaml.YAMLToJSON(instance)
	upstream, err := strategicpatch.StrategicMergePatch(sharedJSON, instanceJSON, &kubeletConfig{})
	if err != nil {
		t.Fatalf("StrategicMergePatch: %v", err)
	}
	var want, got map[string]any
	if err := json.Unmarshal(upstream, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.MergedJSON(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged JSON differs from strategicpatch's (-upstream +ours):\n%s", diff)
	}
}

// TestInstanceSemantics: the instance layer, one rule a row.
func TestInstanceSemantics(t *testing.T) {
	shared := kubeletHeader + `
clusterDNS: [10.96.0.10]
featureGates:
  A: true
  B: false
authentication:
  webhook:
    enabled: true
    cacheTTL: 2m
  x509:
    clientCAFile: /ca.crt
staticPodURLHeader:
  X-A: [a1, a2]
  X-B: [b1]
tracing:
  endpoint: localhost:4317
`
	tests := []struct {
		name     string
		instance string
		want     func(c *kubeletConfig)
	}{
		{
			name:     "maps merge by key",
			instance: "featureGates:\n  B: true\n  C: true",
			want:     func(c *kubeletConfig) { c.FeatureGates = map[string]bool{"A": true, "B": true, "C": true} },
		},
		{
			name:     "lists are replaced",
			instance: "clusterDNS: [10.96.0.11, 10.96.0.12]",
			want:     func(c *kubeletConfig) { c.ClusterDNS = []string{"10.96.0.11", "10.96.0.12"} },
		},
		{
			name:     "null deletes",
			instance: "featureGates:\n  A: null\nclusterDNS: null",
			want:     func(c *kubeletConfig) { c.FeatureGates = map[string]bool{"B": false}; c.ClusterDNS = nil },
		},
		{
			name:     "structs merge by field",
			instance: "authentication:\n  webhook:\n    cacheTTL: 1m",
			want: func(c *kubeletConfig) {
				c.Authentication.Webhook.CacheTTL = metav1.Duration{Duration: time.Minute}
			},
		},
		{
			name:     "$patch: replace on a map",
			instance: "featureGates:\n  $patch: replace\n  Z: true",
			want:     func(c *kubeletConfig) { c.FeatureGates = map[string]bool{"Z": true} },
		},
		{
			name:     "$patch: replace on a struct",
			instance: "authentication:\n  $patch: replace\n  x509:\n    clientCAFile: /other.crt",
			want: func(c *kubeletConfig) {
				c.Authentication = kubeletAuth("/other.crt")
			},
		},
		{
			name:     "$patch: delete removes a pointer field",
			instance: "tracing:\n  $patch: delete",
			want:     func(c *kubeletConfig) { c.Tracing = nil },
		},
		{
			name:     "$patch: replace on an unset field sets it",
			instance: "evictionHard:\n  $patch: replace\n  memory.available: 1Gi",
			want:     func(c *kubeletConfig) { c.EvictionHard = map[string]string{"memory.available": "1Gi"} },
		},
		{
			name:     "maps of lists merge by key, lists replaced",
			instance: "staticPodURLHeader:\n  X-B: [b2, b3]\n  X-C: [c1]",
			want: func(c *kubeletConfig) {
				c.StaticPodURLHeader = map[string][]string{"X-A": {"a1", "a2"}, "X-B": {"b2", "b3"}, "X-C": {"c1"}}
			},
		},
		{
			name:     "$patch: replace at the root replaces the shared document",
			instance: "$patch: replace\nport: 1",
			want:     func(c *kubeletConfig) { *c = kubeletConfig{TypeMeta: c.TypeMeta, Port: 1} },
		},
	}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	sharedRes, err := p.Merge(Layers{Base: doc("shared.yaml", shared)})
	if err != nil {
		t.Fatalf("shared: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.Merge(Layers{Base: doc("shared.yaml", shared), Instance: doc("instance.yaml", kubeletHeader+tt.instance)})
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			want := *sharedRes.Object
			want.FeatureGates = clone(want.FeatureGates)
			want.StaticPodURLHeader = clone(want.StaticPodURLHeader)
			tt.want(&want)
			if diff := cmp.Diff(want, *res.Object); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
}

func kubeletAuth(ca string) (a kubeletConfigAuth) {
	a.X509.ClientCAFile = ca
	return a
}

// TestStrategicMergeUpstreamFailures shows the cases where the KEP's
// strategicpatch.StrategicMergePatch fails cryptically or drops input, and
// what merge does instead.
func TestStrategicMergeUpstreamFailures(t *testing.T) {
	tests := []struct {
		name          string
		shared        string
		instance      string
		upstreamError string // a substring of strategicpatch's error; "" if it succeeds
		upstream      func(c *kubeletConfig)
		oursError     string
		ours          func(c *kubeletConfig)
	}{
		{
			name:          "map of lists with a common key",
			shared:        "staticPodURLHeader:\n  X-A: [a1]",
			instance:      "staticPodURLHeader:\n  X-A: [a2]",
			upstreamError: "merging an object in json but data type is not struct, instead is: map",
			ours:          func(c *kubeletConfig) { c.StaticPodURLHeader = map[string][]string{"X-A": {"a2"}} },
		},
		{
			name:          "misspelt object field",
			shared:        "evictionHard:\n  memory.available: 1Gi",
			instance:      "evictonHard:\n  memory.available: 2Gi",
			upstream:      func(c *kubeletConfig) { c.EvictionHard = map[string]string{"memory.available": "1Gi"} },
			oursError:     `instance.yaml: unknown field "evictonHard"`,
			upstreamError: "",
		},
		{
			name:          "misspelt object field the shared document also has",
			shared:        "evictonHard:\n  memory.available: 1Gi",
			instance:      "evictonHard:\n  memory.available: 2Gi",
			upstreamError: `unable to find api field in struct KubeletConfiguration for the json field "evictonHard"`,
			oursError:     "shared.yaml: unknown field \"evictonHard\"\ninstance.yaml: unknown field \"evictonHard\"",
		},
		{
			name:     "$patch: delete leaves an empty object upstream",
			shared:   "tracing:\n  endpoint: localhost:4317",
			instance: "tracing:\n  $patch: delete",
			upstream: func(c *kubeletConfig) { c.Tracing = &tracingapi.TracingConfiguration{} },
			ours:     func(c *kubeletConfig) {},
		},
		{
			name:     "$patch: replace on an unset field is dropped upstream",
			shared:   "port: 1",
			instance: "featureGates:\n  $patch: replace\n  A: true",
			upstream: func(c *kubeletConfig) { c.Port = 1 },
			ours:     func(c *kubeletConfig) { c.Port = 1; c.FeatureGates = map[string]bool{"A": true} },
		},
	}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	tm := metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sharedJSON, _ := yaml.YAMLToJSON([]byte(kubeletHeader + tt.shared))
			instanceJSON, _ := yaml.YAMLToJSON([]byte(kubeletHeader + tt.instance))
			upstream, err := strategicpatch.StrategicMergePatch(sharedJSON, instanceJSON, &kubeletConfig{})
			switch {
			case tt.upstreamError != "":
				if err == nil || !strings.Contains(err.Error(), tt.upstreamError) {
					t.Errorf("strategicpatch error = %v, want it to contain %q", err, tt.upstreamError)
				}
			case err != nil:
				t.Errorf("strategicpatch: %v", err)
			case tt.upstream != nil:
				var got kubeletConfig
				if err := kjson.UnmarshalCaseSensitivePreserveInts(upstream, &got); err != nil {
					t.Fatal(err)
				}
				want := kubeletConfig{TypeMeta: tm}
				tt.upstream(&want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("strategicpatch result (-want +got):\n%s", diff)
				}
			}

			res, err := p.Merge(Layers{Base: doc("shared.yaml", kubeletHeader+tt.shared), Instance: doc("instance.yaml", kubeletHeader+tt.instance)})
			if tt.oursError != "" {
				if err == nil || err.Error() != tt.oursError {
					t.Errorf("Merge error = %v, want %q", err, tt.oursError)
				}
				return
			}
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			want := kubeletConfig{TypeMeta: tm}
			tt.ours(&want)
			if diff := cmp.Diff(want, *res.Object); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstanceDirectiveErrors(t *testing.T) {
	tests := []struct {
		name     string
		instance string
		want     string
	}{
		{"merge is not a $patch value", "featureGates:\n  $patch: merge", `instance.yaml: featureGates: $patch must be "replace" or "delete", got string "merge"`},
		{"non-string $patch", "authentication:\n  $patch: 5", `instance.yaml: authentication: $patch must be "replace" or "delete", got number 5`},
		{"delete at the root", "$patch: delete", `instance.yaml: $patch: delete is not allowed at the document root`},
		{"retainKeys", "authentication:\n  $retainKeys: [x509]", `instance.yaml: authentication: directive $retainKeys is not supported in configuration files; only $patch: replace and $patch: delete are`},
		{"setElementOrder", "$setElementOrder/clusterDNS: [a]", `instance.yaml: directive $setElementOrder/clusterDNS is not supported in configuration files; only $patch: replace and $patch: delete are`},
		{"directive in a replaced list", "registerWithTaints:\n- $patch: delete\n  key: a", `instance.yaml: registerWithTaints[0]: directive $patch is not allowed inside a list that is replaced as a whole (no patchStrategy merge)`},
	}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Merge(Layers{Base: doc("shared.yaml", kubeletHeader), Instance: doc("instance.yaml", kubeletHeader+tt.instance)})
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// deleteDirectivesToNull rewrites {"$patch": "delete"} objects as null: that
// is what merge's $patch: delete means (strategicpatch would leave {}).
func deleteDirectivesToNull(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 && v[directiveKey] == "delete" {
			return nil
		}
		for k, e := range v {
			v[k] = deleteDirectivesToNull(e)
		}
	case []any:
		for i, e := range v {
			v[i] = deleteDirectivesToNull(e)
		}
	}
	return v
}

// TestInstanceMatchesStrategicMergePatch is a property test: over generated
// shared and instance documents (with nulls and $patch directives), our
// instance merge decodes to the same object as the KEP's way,
// strategicpatch.StrategicMergePatch with the typed struct, whenever
// strategicpatch succeeds; when it fails, it is one of the failures merge
// exists to avoid, and merge succeeds.
func TestInstanceMatchesStrategicMergePatch(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	gvk := [2]string{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"}
	compared, upstreamFailed := 0, 0
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		g := &gen{r: r, fieldProb: 0.2}
		sharedV, _ := g.value(p.root, 0)
		shared := sharedV.(map[string]any)
		g.nulls, g.fieldProb = true, 0.1
		instV, _ := g.value(p.root, 0)
		inst := instV.(map[string]any)
		// Overlap: re-use some shared objects' keys in the instance.
		for k, v := range shared {
			if m, ok := v.(map[string]any); ok && r.Intn(2) == 0 {
				if _, set := inst[k]; !set {
					inst[k] = patchOf(g, m)
				}
			}
		}
		g.addDirectives(inst, shared)
		for _, m := range []map[string]any{shared, inst} {
			m["apiVersion"], m["kind"] = gvk[0], gvk[1]
		}
		sharedJSON, _ := json.Marshal(shared)
		instJSON, _ := json.Marshal(inst)

		res, err := p.Merge(Layers{Base: &Document{Name: "shared", Data: sharedJSON}, Instance: &Document{Name: "instance", Data: instJSON}})
		if err != nil {
			t.Fatalf("seed %d: Merge: %v\nshared: %s\ninstance: %s", seed, err, sharedJSON, instJSON)
		}

		upInst, _ := json.Marshal(deleteDirectivesToNull(inst))
		upstream, err := strategicpatch.StrategicMergePatch(sharedJSON, upInst, &kubeletConfig{})
		if err != nil {
			if !strings.Contains(err.Error(), "data type is not struct") {
				t.Fatalf("seed %d: strategicpatch failed unexpectedly: %v", seed, err)
			}
			upstreamFailed++
			continue
		}
		var want kubeletConfig
		if strict, err := kjson.UnmarshalStrict(upstream, &want); err != nil || len(strict) > 0 {
			t.Fatalf("seed %d: decoding strategicpatch's result: %v %v\n%s", seed, err, strict, upstream)
		}
		if diff := cmp.Diff(want, *res.Object); diff != "" {
			t.Fatalf("seed %d: ours differs from strategicpatch (-upstream +ours):\n%s\nshared: %s\ninstance: %s", seed, diff, sharedJSON, instJSON)
		}
		compared++
	}
	if compared < 250 {
		t.Errorf("only %d of 300 cases compared (%d upstream failures): the generator needs fixing", compared, upstreamFailed)
	}
}

// patchOf returns a patch touching some keys of m.
func patchOf(g *gen, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		switch g.r.Intn(4) {
		case 0:
			out[k] = nil
		case 1:
			if sub, ok := v.(map[string]any); ok {
				out[k] = patchOf(g, sub)
			}
		case 2:
			out[k] = deepCopy(v)
		}
	}
	return out
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// listConfig has lists with patchStrategy merge, which the kubelet type
// lacks, to test merge lists against strategicpatch.
type listConfig struct {
	metav1.TypeMeta `json:",inline"`
	Items           []listItem        `json:"items,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Tags            []string          `json:"tags,omitempty" patchStrategy:"merge"`
	Plain           []string          `json:"plain,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

type listItem struct {
	Name  string            `json:"name"`
	Value string            `json:"value,omitempty"`
	Ports []int32           `json:"ports,omitempty" patchStrategy:"merge"`
	Env   map[string]string `json:"env,omitempty"`
}

var listGVK = schema.GroupVersionKind{Group: "test.dynconfig.io", Version: "v1", Kind: "ListConfig"}

func TestMergeListsMatchStrategicMergePatch(t *testing.T) {
	p := newPipeline(t, Profile[listConfig](nopProfile[listConfig]{gvk: listGVK}), Options{})
	names := []string{"a", "b", "c", "d"}
	tags := []string{"t1", "t2", "t3", "t4"}
	// sharedNames holds the names of the shared document's items: a null in
	// a new element's map differs (strategicpatch appends new elements
	// verbatim, nulls included, where we apply them as deletions).
	sharedNames := map[any]bool{}
	item := func(r *rand.Rand, patch bool) map[string]any {
		it := map[string]any{"name": names[r.Intn(len(names))]}
		if r.Intn(2) == 0 {
			it["value"] = fmt.Sprint("v", r.Intn(3))
		}
		if r.Intn(3) == 0 {
			var ports []any
			for i := 0; i < r.Intn(3); i++ {
				ports = append(ports, 80+r.Intn(3))
			}
			it["ports"] = ports
		}
		if r.Intn(3) == 0 {
			env := map[string]any{"A": "1"}
			if patch && sharedNames[it["name"]] && r.Intn(2) == 0 {
				env["B"] = nil
			} else {
				env["B"] = "2"
			}
			it["env"] = env
		}
		if patch && sharedNames[it["name"]] && r.Intn(5) == 0 {
			it["value"] = nil
		}
		return it
	}
	list := func(r *rand.Rand, patch bool) map[string]any {
		m := map[string]any{"apiVersion": "test.dynconfig.io/v1", "kind": "ListConfig"}
		directive := -1
		if patch {
			directive = r.Intn(5)
		}
		deleteName := names[r.Intn(len(names))]
		if directive == 0 && sharedNames[deleteName] {
			// The element is deleted before the patch's own element with
			// that name is merged, which then counts as new.
			delete(sharedNames, deleteName)
			defer func() { sharedNames[deleteName] = true }()
		}
		if directive == 1 {
			// strategicpatch keeps the replacing elements verbatim, nulls
			// included; we apply them to nothing. Compare without nulls.
			saved := maps.Clone(sharedNames)
			clear(sharedNames)
			defer func() { maps.Copy(sharedNames, saved) }()
		}
		var items []any
		seen := map[any]bool{}
		for i := 0; i < r.Intn(4); i++ {
			it := item(r, patch)
			if seen[it["name"]] && !patch {
				continue // unique merge keys in the original
			}
			seen[it["name"]] = true
			items = append(items, it)
		}
		if patch {
			switch directive {
			case 0:
				items = append(items, map[string]any{"name": deleteName, directiveKey: "delete"})
			case 1:
				items = append(items, map[string]any{directiveKey: "replace"})
			}
		}
		if items != nil || r.Intn(2) == 0 {
			m["items"] = items
		}
		var ts []any
		for i := 0; i < r.Intn(4); i++ {
			tag := tags[r.Intn(len(tags))]
			if !patch && slices.Contains(ts, any(tag)) {
				// With duplicates in the original, strategicpatch's order
				// depends on the capacity of a slice it mutates while
				// deduplicating; ours is stable. Compare on sets.
				continue
			}
			ts = append(ts, tag)
		}
		if ts != nil {
			m["tags"] = ts
		}
		if r.Intn(2) == 0 {
			m["plain"] = []any{tags[r.Intn(len(tags))]}
		}
		if r.Intn(2) == 0 {
			m["labels"] = map[string]any{"x": "1", "y": "2"}
		}
		return m
	}
	for seed := int64(1); seed <= 500; seed++ {
		r := rand.New(rand.NewSource(seed))
		clear(sharedNames)
		shared := list(r, false)
		if items, ok := shared["items"].([]any); ok {
			for _, it := range items {
				sharedNames[it.(map[string]any)["name"]] = true
			}
		}
		inst := list(r, true)
		sharedJSON, _ := json.Marshal(shared)
		instJSON, _ := json.Marshal(inst)
		res, err := p.Merge(Layers{Base: &Document{Name: "shared", Data: sharedJSON}, Instance: &Document{Name: "instance", Data: instJSON}})
		if err != nil {
			t.Fatalf("seed %d: Merge: %v\nshared: %s\ninstance: %s", seed, err, sharedJSON, instJSON)
		}
		upstream, err := strategicpatch.StrategicMergePatch(sharedJSON, instJSON, &listConfig{})
		if err != nil {
			t.Fatalf("seed %d: strategicpatch: %v", seed, err)
		}
		var want listConfig
		if strict, err := kjson.UnmarshalStrict(upstream, &want); err != nil || len(strict) > 0 {
			t.Fatalf("seed %d: %v %v", seed, err, strict)
		}
		if diff := cmp.Diff(want, *res.Object); diff != "" {
			t.Fatalf("seed %d: ours differs from strategicpatch (-upstream +ours):\n%s\nshared: %s\ninstance: %s", seed, diff, sharedJSON, instJSON)
		}
	}
}

// objectMaps has maps of objects, which strategicpatch cannot merge.
type objectMaps struct {
	metav1.TypeMeta `json:",inline"`
	Pools           map[string]pool `json:"pools,omitempty"`
	Extra           map[string]any  `json:"extra,omitempty"`
}

type pool struct {
	Size   int               `json:"size,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

func TestStrategicMapsOfObjects(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "test.dynconfig.io", Version: "v1", Kind: "ObjectMaps"}
	header := "apiVersion: test.dynconfig.io/v1\nkind: ObjectMaps\n"
	// (Not y or n as keys: YAML 1.1 reads them as booleans.)
	shared := header + "pools:\n  a: {size: 1, labels: {x: '1'}}\n  b: {size: 2}\nextra:\n  k: {a: 1, nested: {deep: true}}\n"
	instance := header + "pools:\n  a: {labels: {z: '2'}}\nextra:\n  k: {b: 2, nested: {$patch: replace, other: 1}}\n"

	sharedJSON, _ := yaml.YAMLToJSON([]byte(shared))
	instanceJSON, _ := yaml.YAMLToJSON([]byte(instance))
	_, err := strategicpatch.StrategicMergePatch(sharedJSON, instanceJSON, &objectMaps{})
	if err == nil || !strings.Contains(err.Error(), "data type is not struct") {
		t.Errorf("strategicpatch: %v, want its map-of-objects failure", err)
	}

	p := newPipeline(t, Profile[objectMaps](nopProfile[objectMaps]{gvk: gvk}), Options{})
	res, err := p.Merge(Layers{Base: doc("shared.yaml", shared), Instance: doc("instance.yaml", instance)})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	want := objectMaps{
		TypeMeta: metav1.TypeMeta{APIVersion: "test.dynconfig.io/v1", Kind: "ObjectMaps"},
		Pools: map[string]pool{
			"a": {Size: 1, Labels: map[string]string{"x": "1", "z": "2"}},
			"b": {Size: 2},
		},
		Extra: map[string]any{"k": map[string]any{"a": int64(1), "b": int64(2), "nested": map[string]any{"other": int64(1)}}},
	}
	if diff := cmp.Diff(want, *res.Object); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}
