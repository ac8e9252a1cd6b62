package kubeadm

import (
	"encoding"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// zeroLeaf is a numeric, bool or duration field of KubeletConfiguration,
// at any depth of nested structs, with the JSON form of its zero value.
type zeroLeaf struct {
	path []string // JSON names from the top
	zero any      // 0, false or "0s"
}

// zeroLeaves lists every numeric, bool and duration field reachable through
// structs and pointers to structs (not through maps and lists, whose
// elements a patch writes whole).
func zeroLeaves(t reflect.Type, path []string, out *[]zeroLeaf) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" {
			continue // TypeMeta
		}
		p := append(append([]string(nil), path...), name)
		switch {
		case ft == reflect.TypeFor[metav1.Duration]():
			*out = append(*out, zeroLeaf{p, "0s"})
		case ft.Kind() == reflect.Bool:
			*out = append(*out, zeroLeaf{p, false})
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Float64:
			*out = append(*out, zeroLeaf{p, 0})
		case ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(reflect.TypeFor[json.Unmarshaler]()) &&
			!reflect.PointerTo(ft).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()):
			zeroLeaves(ft, p, out)
		}
	}
}

// TestRenderDocumentExplicitZeros sets every numeric, bool and duration
// field of KubeletConfiguration to its zero value, one at a time, in a
// document: the patch must carry the zero, and applied over kubeadm's
// generated configuration (where rotateCertificates, healthzPort and
// authentication.webhook.enabled are not zero) the kubelet's configuration
// must hold it. What the kubelet then makes of it is the kubelet's rule, as
// for any value: it reads maxPods: 0 as its default of 110, for example,
// just as it reads its own file. Nothing is dropped.
func TestRenderDocumentExplicitZeros(t *testing.T) {
	var leaves []zeroLeaf
	zeroLeaves(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), nil, &leaves)
	if len(leaves) < 60 {
		t.Fatalf("found %d numeric, bool and duration fields; the walk is broken", len(leaves))
	}
	base, err := os.ReadFile(defaultsFixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		where := strings.Join(l.path, ".")
		t.Run(where, func(t *testing.T) {
			doc := map[string]any{}
			cur := doc
			for _, p := range l.path[:len(l.path)-1] {
				next := map[string]any{}
				cur[p] = next
				cur = next
			}
			cur[l.path[len(l.path)-1]] = l.zero
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range []Options{{}, {PatchType: Merge}} {
				p, err := RenderDocument(data, opts)
				if err != nil {
					t.Fatalf("RenderDocument(%s): %v", data, err)
				}
				var patch map[string]any
				if err := yaml.Unmarshal(p.Content, &patch); err != nil {
					t.Fatal(err)
				}
				var got any = patch
				for _, s := range l.path {
					m, _ := got.(map[string]any)
					got = m[s]
				}
				if got == nil || (l.zero == 0 && got != float64(0)) || (l.zero != 0 && got != l.zero) {
					t.Fatalf("patch holds %#v at %s, want %#v:\n%s", got, where, l.zero, p.Content)
				}
				cfg := applyLikeKubeadm(t, base, p)
				v := reflect.ValueOf(cfg).Elem()
				for _, s := range l.path {
					for v.Kind() == reflect.Pointer {
						if v.IsNil() {
							t.Fatalf("%s: %s is nil in the patched configuration", p.Name, where)
						}
						v = v.Elem()
					}
					v = v.FieldByIndex(fieldByJSON(t, v.Type(), s).Index)
				}
				if v.Kind() == reflect.Pointer {
					if v.IsNil() {
						t.Fatalf("%s: %s is nil (unset) in the patched configuration, want a zero", p.Name, where)
					}
					v = v.Elem()
				}
				if !v.IsZero() {
					t.Errorf("%s: %s = %v in the patched configuration, want the zero", p.Name, where, v.Interface())
				}
			}
		})
	}
}

func fieldByJSON(t *testing.T, typ reflect.Type, name string) reflect.StructField {
	t.Helper()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
			return f
		}
	}
	t.Fatalf("%s has no field %q", typ, name)
	return reflect.StructField{}
}

// TestRenderTypedZeros checks the typed entry point's limit as documented:
// a zero in a pointer field is set and rendered; one in a non-pointer field
// is unset and is not.
func TestRenderTypedZeros(t *testing.T) {
	c := &kubeletv1beta1.KubeletConfiguration{CPUCFSQuota: ptr.To(false), EventRecordQPS: ptr.To[int32](0), MaxPods: 0, RotateCertificates: false}
	c.Authentication.Webhook.Enabled = ptr.To(false)
	p, err := Render(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  webhook:\n    enabled: false\ncpuCFSQuota: false\neventRecordQPS: 0\n"
	if got := string(p.Content); got != want {
		t.Errorf("patch:\n%s\nwant:\n%s", got, want)
	}
}
