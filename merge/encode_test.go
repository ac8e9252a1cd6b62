package merge

import (
	"errors"
	"math/rand"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// encodeBothWays encodes obj with encodeValue and with encoding/json plus
// the parser (fromGo, the old way and the fallback), and fails when the
// trees differ in anything appendJSON shows (keys, their order, values).
func encodeBothWays[T any](t *testing.T, obj *T, root *typeInfo) (fast bool) {
	t.Helper()
	var a arena
	want, wantErr := fromGo(&a, 0, obj)
	got, err := encodeValue(&a, 0, reflect.ValueOf(obj).Elem(), root)
	if errors.Is(err, errEncodeFallback) {
		return false
	}
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("encodeValue error %v, encoding/json error %v", err, wantErr)
	}
	if err != nil {
		return true
	}
	if g, w := string(appendJSON(nil, got)), string(appendJSON(nil, want)); g != w {
		t.Fatalf("encodeValue differs from encoding/json:\n got %s\nwant %s", g, w)
	}
	return true
}

// TestEncodeValueMatchesEncodingJSON: the tree the drop-ins merge into
// (the defaulted base) is the one encoding/json would give, on generated
// kubelet configurations before and after defaulting.
func TestEncodeValueMatchesEncodingJSON(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	g := &gen{r: rand.New(rand.NewSource(22)), fieldProb: 0.4}
	n := 300
	if testing.Short() {
		n = 60
	}
	fastCount := 0
	for i := 0; i < n; i++ {
		doc := g.document(t, p.root, [2]string{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"})
		res, err := p.Merge(Layers{Base: &Document{Name: "gen.yaml", Data: doc}})
		if err != nil {
			continue // the generator makes some invalid values
		}
		if encodeBothWays(t, res.Object, p.root) {
			fastCount++
		}
		kubeletTestProfile{}.Default(res.Object)
		if encodeBothWays(t, res.Object, p.root) {
			fastCount++
		}
	}
	if fastCount == 0 {
		t.Fatal("encodeValue never handled a kubelet configuration itself")
	}
}

// TestEncodeValueTypes: embedding, conflicts, odd kinds: exact or a
// fallback, never a different tree.
func TestEncodeValueTypes(t *testing.T) {
	root, err := buildSchema(reflect.TypeFor[embedding]())
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	pone := &one
	cases := []embedding{
		{},
		{Shadow: "s", Dash: "d", NoTag: 3, Renamed: "r", Nested: map[string][]int{"k": {1, 2}, "a": nil}, PP: &pone,
			Slice: []*embInner3{nil, {}}, Any: map[string]any{"x": []any{1, "a", nil}}, Bytes: []byte("hi"), U8: 200},
		{M: map[int]string{1: "one"}, TM: map[textKey]int{"k": 1}, F32: 1.5, EmbInner2: &EmbInner2{}},
	}
	for i := range cases {
		encodeBothWays(t, &cases[i], root)
	}
}

// encEmbedding is embedding without the kinds encodeValue leaves to
// encoding/json, so that the promoted fields' order is checked on the fast path.
type encEmbedding struct {
	embInner
	*EmbInner2
	embInner3
	Shadow string           `json:"shadow"`
	Named  embInner         `json:"named"`
	NoTag  int              `json:",omitempty"`
	Bytes  []byte           `json:"bytes,omitempty"`
	Any    any              `json:"any"`
	PP     **int            `json:"pp"`
	Slice  []*embInner3     `json:"slice"`
	Nested map[string][]int `json:"nested"`
	Ptr    *EmbInner2       `json:"ptr,omitempty"`
}

func TestEncodeValueEmbedding(t *testing.T) {
	root, err := buildSchema(reflect.TypeFor[encEmbedding]())
	if err != nil {
		t.Fatal(err)
	}
	one := 1
	pone := &one
	cases := []encEmbedding{
		{},
		{embInner: embInner{A: "a", B: "b", Shadow: "hidden"}, EmbInner2: &EmbInner2{A: "a2", C: "c"}, embInner3: embInner3{D: "d"},
			Shadow: "s", NoTag: 3, Nested: map[string][]int{"k": {1, 2}, "a": nil, "b": {}}, PP: &pone,
			Slice: []*embInner3{nil, {}}, Any: map[string]any{"x": []any{1, "a", nil}}, Bytes: []byte("hi<>"), Ptr: &EmbInner2{}},
	}
	for i := range cases {
		if !encodeBothWays(t, &cases[i], root) {
			t.Errorf("case %d: encodeValue fell back to encoding/json", i)
		}
	}
}

// TestDurationWithoutEncodingJSON: metav1.Duration is encoded and decoded
// without encoding/json; the results are its own methods' results.
func TestDurationWithoutEncodingJSON(t *testing.T) {
	root, err := buildSchema(reflect.TypeFor[metav1.Duration]())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		d := metav1.Duration{Duration: time.Duration(r.Int63n(1<<50) - 1<<49)}
		if i%3 == 0 {
			d.Duration = time.Duration(r.Int63())
		}
		var a arena
		n, err := encodeValue(&a, 0, reflect.ValueOf(&d).Elem(), root)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := d.MarshalJSON()
		if got := appendJSON(nil, n); string(got) != string(want) {
			t.Fatalf("%v: encoded %s, MarshalJSON %s", d.Duration, got, want)
		}
	}
	for _, s := range []string{"10s", "1h2m3.5s", "-5m", "0", "", "10x", "1e3s", "5", " 5s", "1.5h", "9999999999h", "\u00b5s", "3µs", "1h\n"} {
		var a arena
		n := a.new(nString, 0)
		n.str = s
		got, gotErr := decodeOpaque(n, root)
		var want metav1.Duration
		wantErr := want.UnmarshalJSON(appendJSON(nil, n))
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("%q: error %v, UnmarshalJSON error %v", s, gotErr, wantErr)
		}
		if gotErr == nil && got.(*metav1.Duration).Duration != want.Duration {
			t.Fatalf("%q: %v, UnmarshalJSON %v", s, got, want)
		}
	}
}

// TestProvenanceWithoutCopy: the provenance walks over the merged tree with
// markUnset's marks give what they give over the copy setByLayers makes (as
// Merge did before), on generated bases with drop-ins.
func TestProvenanceWithoutCopy(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](defaultsOnly{}), Options{})
	g := &gen{r: rand.New(rand.NewSource(5)), fieldProb: 0.3}
	gvk := [2]string{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"}
	compared := 0
	for i := 0; i < 150; i++ {
		l := Layers{Base: &Document{Name: "base.yaml", Data: g.document(t, p.root, gvk)}}
		gp := &gen{r: g.r, fieldProb: 0.05, nulls: true}
		for j := 0; j < 1+i%3; j++ {
			l.DropIns = append(l.DropIns, Document{Name: "d.conf", Data: gp.document(t, p.root, gvk)})
		}
		res, err := p.Merge(l)
		if err != nil {
			continue
		}
		names := []string{DefaultsLayer, "base.yaml", "d.conf", "d.conf", "d.conf"}
		copied := setByLayers(res.merged)
		if copied == nil {
			continue
		}
		want := map[string]string{}
		old := provenanceWalk{names: names, out: want, paths: &pathInterner{}}
		old.tree(copied, p.root, nil)
		old.defaults(reflect.ValueOf(res.Object).Elem(), p.root, copied, nil)
		got := map[string]string{}
		markUnset(res.merged)
		pw := provenanceWalk{names: names, out: got, paths: &pathInterner{}, onlySet: true}
		pw.tree(res.merged, p.root, nil)
		pw.defaults(reflect.ValueOf(res.Object).Elem(), p.root, res.merged, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: provenance differs:\n got %v\nwant %v", i, got, want)
		}
		compared++
	}
	if compared < 50 {
		t.Fatalf("only %d merges compared", compared)
	}
}

// defaultsOnly is kubeletTestProfile without validation.
type defaultsOnly struct{ kubeletTestProfile }

func (defaultsOnly) Validate(*kubeletConfig) field.ErrorList { return nil }
