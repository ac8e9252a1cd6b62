// Package kubeletdoc holds the rules that every reader of a user's
// KubeletConfiguration document shares: the provisioning validation
// (package provision) and the renderers (render/kubeadm,
// render/bottlerocket). A document there holds only the fields its author
// sets, so what a null means, and how a document is decoded strictly, must
// be one rule wherever it is read.
package kubeletdoc

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/internal/jsonfields"
)

// What a null that stands for a map value or a list element is told. As a
// field's whole value, null means "not set", as in every Kubernetes
// decoder; inside a map or a list it would decode to an empty value or
// vanish, and neither is what the document says.
const (
	NullMapValue    = "null is not a value: remove the key to leave it out (an empty map is {})"
	NullListElement = "null is not a value: remove the element (an empty list is [])"
)

// Type is the Go type of every document this package reads.
var Type = reflect.TypeFor[kubeletv1beta1.KubeletConfiguration]()

// DecodeStrict decodes doc, a KubeletConfiguration document in YAML or
// JSON, strictly: duplicate and unknown fields and values of the wrong
// type are errors. apiVersion and kind, when present, must be
// kubelet.config.k8s.io/v1beta1 KubeletConfiguration. It returns the
// configuration and the document as JSON. Its errors name no document:
// callers prefix their own.
func DecodeStrict(doc []byte) (*kubeletv1beta1.KubeletConfiguration, []byte, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, nil, err
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		return nil, nil, errors.New("not a YAML or JSON object")
	}
	cfg := new(kubeletv1beta1.KubeletConfiguration)
	strict, err := sigsjson.UnmarshalStrict(j, cfg)
	if err != nil {
		return nil, nil, err
	}
	if len(strict) > 0 {
		return nil, nil, errors.Join(strict...)
	}
	gv := kubeletv1beta1.SchemeGroupVersion.String()
	if cfg.APIVersion != "" && cfg.APIVersion != gv {
		return nil, nil, fmt.Errorf("apiVersion %q, want %q", cfg.APIVersion, gv)
	}
	if cfg.Kind != "" && cfg.Kind != "KubeletConfiguration" {
		return nil, nil, fmt.Errorf("kind %q, want %q", cfg.Kind, "KubeletConfiguration")
	}
	return cfg, j, nil
}

// Null is a null that stands for a map value or a list element.
type Null struct {
	// Path is where it stands, such as evictionHard[memory.available].
	Path *field.Path
	// Detail is NullMapValue or NullListElement.
	Detail string
}

// Nulls returns every null that stands for a map value or a list element
// in v, an untyped tree (map[string]any, []any, scalars, nil) of a value of
// Go type t at path (nil: the whole document), with keys visited in sorted
// order. A null field is "not set" and is left alone. Values of the wrong
// type and unknown fields are skipped: a strict decoder reports those.
func Nulls(v any, t reflect.Type, path *field.Path) []Null {
	var out []Null
	walk(v, t, path, false, &out)
	return out
}

// DropNulls is Nulls for a tree that is to be written out as a patch, where
// a null field would delete a value instead of leaving it unset: it also
// deletes the null fields of objects, and the objects that held only null
// fields. Objects and lists written empty stay.
func DropNulls(v any, t reflect.Type, path *field.Path) []Null {
	var out []Null
	walk(v, t, path, true, &out)
	return out
}

// walk is Nulls and, with drop, DropNulls; it reports whether drop emptied
// v, an object, for the caller to delete.
func walk(v any, t reflect.Type, path *field.Path, drop bool, out *[]Null) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if CustomJSON(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok || len(obj) == 0 {
			return false // an object written empty stays
		}
		fields := jsonfields.Of(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if obj[k] == nil {
				if drop {
					delete(obj, k)
				}
				continue // not set
			}
			if ft, ok := fields[k]; ok && walk(obj[k], ft, childPath(path, k), drop, out) {
				delete(obj, k)
			}
		}
		return drop && len(obj) == 0
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			p := path.Key(k)
			if obj[k] == nil {
				*out = append(*out, Null{Path: p, Detail: NullMapValue})
				continue
			}
			walk(obj[k], t.Elem(), p, drop, out)
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return false
		}
		for i, e := range list {
			p := path.Index(i)
			if e == nil {
				*out = append(*out, Null{Path: p, Detail: NullListElement})
				continue
			}
			walk(e, t.Elem(), p, drop, out)
		}
	}
	return false
}

// CustomJSON says whether t has a JSON form of its own (metav1.Duration,
// resource.Quantity...), which is not its Go structure.
func CustomJSON(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(reflect.TypeFor[json.Unmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) ||
		pt.Implements(reflect.TypeFor[json.Marshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextMarshaler]())
}

func childPath(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}
