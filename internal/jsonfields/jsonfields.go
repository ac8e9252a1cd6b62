// Package jsonfields maps a struct type's JSON field names to their Go
// types, as encoding/json sees them: the json tag's name (or the Go name),
// "-" skipped, unexported fields skipped, and the fields of embedded structs
// without a name (such as metav1.TypeMeta) inlined. provision and
// render/kubeadm walk user documents against the typed config with it.
package jsonfields

import (
	"reflect"
	"strings"
	"sync"
)

var cache sync.Map // reflect.Type -> map[string]reflect.Type

// Of returns the JSON field names of the struct type t and their types. The
// map is shared between callers: read it, never change it.
func Of(t reflect.Type) map[string]reflect.Type {
	if m, ok := cache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	add(t, m)
	cache.Store(t, m)
	return m
}

func add(t reflect.Type, m map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				add(ft, m)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
}
