package merge

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
)

type textKey string

func (k *textKey) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty key")
	}
	*k = textKey(strings.ToLower(string(b)))
	return nil
}

type embInner struct {
	A      string `json:"a"`
	B      string `json:"b"`
	Shadow string `json:"shadow"`
}

// EmbInner2 is exported so that a pointer to it can be embedded and set.
type EmbInner2 struct {
	A string `json:"a"`
	C string
}

type embInner3 struct {
	D string `json:"d"`
}

// embedding exercises encoding/json's field rules: promotion through
// embedded structs (by value, by pointer, unexported), name conflicts
// (shallower wins, ambiguous names vanish), json:"-" and "-,", untagged
// names, and the key and value kinds that are not plain strings.
type embedding struct {
	embInner
	*EmbInner2
	embInner3
	Shadow  string           `json:"shadow"`
	Named   embInner         `json:"named"`
	Skip    string           `json:"-"`
	Dash    string           `json:"-,"`
	NoTag   int              `json:",omitempty"`
	Renamed string           `json:"ren,omitempty"`
	M       map[int]string   `json:"m,omitempty"`
	TM      map[textKey]int  `json:"tm,omitempty"`
	Bytes   []byte           `json:"bytes,omitempty"`
	Arr     [2]int           `json:"arr"`
	F32     float32          `json:"f32"`
	U8      uint8            `json:"u8"`
	Any     any              `json:"any"`
	PP      **int            `json:"pp"`
	Slice   []*embInner3     `json:"slice"`
	Nested  map[string][]int `json:"nested"`
	unexp   int
}

var embGVK = schema.GroupVersionKind{Group: "test.dynconfig.io", Version: "v1", Kind: "Embedding"}

// TestSchemaMatchesEncodingJSON decodes the same document with merge and with
// the Kubernetes JSON decoder (encoding/json rules, case-sensitive).
func TestSchemaMatchesEncodingJSON(t *testing.T) {
	p := newPipeline(t, Profile[embedding](nopProfile[embedding]{gvk: embGVK}), Options{})
	data := `{"apiVersion":"test.dynconfig.io/v1","kind":"Embedding",
		"b":"x","d":"y","C":"c","shadow":"s","named":{"a":"n","shadow":"ns"},"-":"dash","NoTag":3,"ren":"r",
		"m":{"1":"one","-2":"minus two"},"tm":{"KEY":1},"bytes":"aGk=","arr":[1,2],"f32":1.5,"u8":200,
		"any":{"x":[1,"a",null,1.5,{"k":true}]},"pp":5,"slice":[{"d":"e"},null],"nested":{"k":[1,2]}}`
	res, err := p.Merge(Layers{Base: doc("e.json", data)})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	var want embedding
	if strict, err := kjson.UnmarshalStrict([]byte(data), &want, kjson.DisallowUnknownFields); err != nil {
		t.Fatal(err)
	} else {
		// apiVersion and kind are not fields of embedding.
		if len(strict) != 2 {
			t.Fatalf("strict errors: %v", strict)
		}
	}
	if diff := cmp.Diff(want, *res.Object, cmp.AllowUnexported(embedding{})); diff != "" {
		t.Errorf("decoded (-encoding/json +merge):\n%s", diff)
	}

	bad := `{"apiVersion":"test.dynconfig.io/v1","kind":"Embedding","a":"ambiguous","Skip":"x","unexp":1,"u8":300,"tm":{"":1},"m":{"x":"y"},"arr":[1,2,3],"f32":1e39,"shadow":1}`
	_, err = p.Merge(Layers{Base: doc("bad.json", bad)})
	want2 := strings.Join([]string{
		`bad.json: unknown field "a"`,
		`bad.json: unknown field "Skip"`,
		`bad.json: unknown field "unexp"`,
		`bad.json: u8: number 300 overflows uint8`,
		`bad.json: tm[]: invalid map key "" for merge.textKey: empty key`,
		`bad.json: m[x]: invalid map key "x" for int: strconv.ParseInt: parsing "x": invalid syntax`,
		`bad.json: f32: number 1e39 overflows float32`,
		`bad.json: shadow: expected string, got number 1 (quote the value to make it a string)`,
	}, "\n")
	if err == nil || err.Error() != want2 {
		t.Errorf("got:\n%v\nwant:\n%s", err, want2)
	}
}

type hiddenPtr struct {
	*embInner3
	Name string `json:"name"`
}

func TestUnsettableEmbeddedPointer(t *testing.T) {
	p := newPipeline(t, Profile[hiddenPtr](nopProfile[hiddenPtr]{gvk: embGVK}), Options{})
	data := `{"apiVersion":"test.dynconfig.io/v1","kind":"Embedding","name":"x","d":"y"}`
	_, err := p.Merge(Layers{Base: doc("h.json", data)})
	want := `h.json: d: cannot set a field promoted through an embedded pointer to the unexported struct merge.embInner3`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	var v hiddenPtr
	if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(data), &v); err == nil {
		t.Error("encoding/json accepted it: then so should we")
	}
}
