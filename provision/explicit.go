package provision

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/internal/jsonfields"
	"github.com/dynconfig/dynconfig/internal/kubeletdoc"
	"github.com/dynconfig/dynconfig/merge"
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
// or a list element in tree, a KubeletConfiguration document (the rule of
// kubeletdoc.Nulls: only a field's whole value may be null, "not set").
// Values of the wrong type and unknown fields are skipped: merge reports
// those.
func findNulls(tree map[string]any) []merge.Problem {
	return problems(kubeletdoc.Nulls(tree, kubeletdoc.Type, nil))
}

// problems reports nulls as merge reports an invalid value.
func problems(nulls []kubeletdoc.Null) []merge.Problem {
	var out []merge.Problem
	for _, n := range nulls {
		out = append(out, merge.Problem{Type: merge.ProblemInvalidValue, Path: n.Path.String(), Detail: n.Detail})
	}
	return out
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
	t := kubeletdoc.Type
	for _, seg := range splitPath(f.Path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.Kind() == reflect.Struct && !kubeletdoc.CustomJSON(t):
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
	return problems(kubeletdoc.Nulls(v, t, field.NewPath(f.Path)))
}
