package provision

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/internal/jsonfields"
	"github.com/dynconfig/dynconfig/merge"
)

// The details of the problems findNulls reports.
const (
	nullMapValue    = "null is not a value: remove the key to leave it out (an empty map is {})"
	nullListElement = "null is not a value: remove the element (an empty list is [])"
)

// parseTree reads a YAML or JSON document into an untyped tree
// (map[string]any, []any, json.Number, string, bool, nil), as package merge
// reads it: JSON first when it looks like JSON, else YAML with
// sigs.k8s.io/yaml's conversion of keys. It returns nil for a document merge
// would refuse anyway (merge reports why).
func parseTree(data []byte) map[string]any {
	j := bytes.TrimSpace(data)
	if len(j) == 0 || j[0] != '{' || !json.Valid(j) {
		var err error
		if j, err = yaml.YAMLToJSON(data); err != nil {
			return nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil
	}
	return tree
}

// findNulls returns a problem for every null that stands for a map value
// or a list element in tree, a KubeletConfiguration document: only a
// field's whole value may be null ("not set"). Keys are visited in sorted
// order. Values of the wrong type and unknown fields are skipped: merge
// reports those.
func findNulls(tree map[string]any) []merge.Problem {
	var out []merge.Problem
	walkNulls(tree, kubeletType, nil, &out)
	return out
}

var kubeletType = reflect.TypeFor[kubeletv1beta1.KubeletConfiguration]()

func walkNulls(v any, t reflect.Type, path *field.Path, out *[]merge.Problem) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if customJSON(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonfields.Of(t)
		for _, k := range sortedKeys(obj) {
			f, ok := fields[k]
			if !ok || obj[k] == nil {
				continue // unknown (merge's to report), or null: not set
			}
			walkNulls(obj[k], f, childPath(path, k), out)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range sortedKeys(obj) {
			p := path.Key(k)
			if obj[k] == nil {
				*out = append(*out, merge.Problem{Type: merge.ProblemInvalidValue, Path: p.String(), Detail: nullMapValue})
				continue
			}
			walkNulls(obj[k], t.Elem(), p, out)
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range list {
			p := path.Index(i)
			if e == nil {
				*out = append(*out, merge.Problem{Type: merge.ProblemInvalidValue, Path: p.String(), Detail: nullListElement})
				continue
			}
			walkNulls(e, t.Elem(), p, out)
		}
	}
}

func childPath(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

// customJSON says whether t decodes itself (metav1.Duration,
// resource.Quantity...): its JSON form is not its Go structure.
func customJSON(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(reflect.TypeFor[json.Unmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nullsError reports the null problems of the document name together with
// the decode problems merge found in it, if any. merge's policy and
// validation errors are left out: they are about the document with the
// nulls dropped, which is not what the user wrote, and policy violations
// are reported only for a document that decodes.
func nullsError(mergeErr error, name string, nulls []merge.Problem) error {
	var me *merge.Error
	if errors.As(mergeErr, &me) {
		for _, d := range me.Decode {
			if d.Document == name {
				d.Problems = append(d.Problems, nulls...)
				me.Policy, me.Validation = nil, nil
				return me
			}
		}
	}
	return &merge.Error{Decode: []*merge.DecodeError{{Document: name, Problems: nulls}}}
}

// explicitlyEmpty says whether the user's document has an empty object or
// list at segs (field names and map keys).
func explicitlyEmpty(tree map[string]any, segs []string) bool {
	var cur any = tree
	for _, s := range segs {
		obj, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = obj[s]; !ok {
			return false
		}
	}
	switch v := cur.(type) {
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// valueNulls returns the nulls in a platform value that stand for a map
// value or a list element, with paths that start with f.Path. A value of
// the wrong type, or a path KubeletConfiguration does not have, gives none:
// merge reports those.
func valueNulls(f Field) []merge.Problem {
	if f.Value == nil {
		return nil
	}
	t := kubeletType
	for _, seg := range splitPath(f.Path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.Kind() == reflect.Struct && !customJSON(t):
			ft, ok := jsonfields.Of(t)[seg]
			if !ok {
				return nil
			}
			t = ft
		case t.Kind() == reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
	}
	data, err := json.Marshal(f.Value)
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	var out []merge.Problem
	walkNulls(v, t, field.NewPath(f.Path), &out)
	return out
}
