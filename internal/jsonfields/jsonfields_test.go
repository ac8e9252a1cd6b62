package jsonfields

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type Inner struct {
	Kind string `json:"kind,omitempty"`
}

type outer struct {
	Inner
	MaxPods int32 `json:"maxPods"`
	NoTag   string
	Skipped string `json:"-"`
	hidden  string // an unexported field is never a JSON field
	Shadow  string `json:"kind"`
}

func TestOf(t *testing.T) {
	got := Of(reflect.TypeFor[outer]())
	want := map[string]reflect.Type{
		"kind":    reflect.TypeFor[string](),
		"maxPods": reflect.TypeFor[int32](),
		"NoTag":   reflect.TypeFor[string](),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b reflect.Type) bool { return a == b })); diff != "" {
		t.Errorf("Of (-want +got):\n%s", diff)
	}
	_ = outer{}.hidden
}
