package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  *corev1.NodeConfigSource
		want string
	}{
		{"empty", nil, ""},
		{"correct", ref("ns", "n", "u", ""), ""},
		{"all nil", &corev1.NodeConfigSource{}, "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{"missing uid", ref("ns", "n", "", ""), "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid"},
		{"missing namespace", ref("", "n", "u", ""), "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: namespace"},
		{"missing all", ref("", "", "", ""), "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid, namespace, name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.src)
			got := ""
			if err != nil {
				got = err.Error()
				var ie *InvalidError
				if !errors.As(err, &ie) {
					t.Errorf("error %T is not *InvalidError", err)
				}
			}
			if got != tc.want {
				t.Errorf("Validate = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzDecodeAssignment feeds annotation values to the strict decoder: it
// must not panic, and what it accepts must survive a JSON round trip. The
// validation of ParseAssignment must not panic either, its message is
// bounded whatever the input's size, and what it accepts has the API
// server's forms (a name of at most 253 bytes, ...) and encodes back.
func FuzzDecodeAssignment(f *testing.F) {
	for _, seed := range []string{
		``, `null`, ` `, `{}`, `[]`, `"x"`, `{"configMap":null}`,
		`{"configMap":{"namespace":"kube-system","name":"kubelet","uid":"u","kubeletConfigKey":"kubelet","resourceVersion":"5"}}`,
		`{"configMap":{"namespace":"a","namespace":"b"}}`, `{"ConfigMap":{}}`, `{"configMap":{"extra":1}}`,
		`{"configMap":{"uid":5}}`, `{} {}`, `{"configMap":`, "\xff",
		`{"configMap":{"namespace":"Kube","name":"a/b","uid":"..","kubeletConfigKey":"a b"}}`,
		`{"configMap":{"namespace":"ns","name":"` + strings.Repeat("x", 300) + `","uid":"u\u0000"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := ParseAssignment(string(data)); err != nil {
			if len(err.Error()) > 2048 {
				t.Fatalf("ParseAssignment of %d bytes: a %d-byte message", len(data), len(err.Error()))
			}
		} else if p != nil {
			cm := p.ConfigMap
			if len(cm.Name) > 253 || len(cm.Namespace) > 63 || len(cm.UID) > MaxUIDLength || len(cm.ResourceVersion) > MaxResourceVersionLength || len(cm.KubeletConfigKey) > 253 {
				t.Fatalf("ParseAssignment accepted an unbounded field: %+v", cm)
			}
			v, err := EncodeAssignment(p)
			if err != nil {
				t.Fatalf("EncodeAssignment of an accepted %+v: %v", cm, err)
			}
			if back, err := ParseAssignment(v); err != nil || !cmp.Equal(back, p) {
				t.Fatalf("ParseAssignment(EncodeAssignment(%+v)) = %+v, %v", cm, back, err)
			}
		}
		src, err := DecodeAssignment(string(data))
		if err != nil || src == nil {
			return
		}
		out, err := json.Marshal(src)
		if err != nil {
			t.Fatalf("marshal %+v: %v", src, err)
		}
		back, err := DecodeAssignment(string(out))
		if err != nil {
			t.Fatalf("decoding %s (re-encoded from %q): %v", out, data, err)
		}
		if diff := cmp.Diff(src, back); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", data, diff)
		}
	})
}

func BenchmarkDecodeAssignment(b *testing.B) {
	data := []byte(`{"configMap":{"namespace":"kube-system","name":"kubelet-config","uid":"0b9b4c4e-8a3e-4f0e-9d6f-2f3c8f1e2a7d","kubeletConfigKey":"kubelet"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeAssignment(string(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// Hostile input: each field of an assignment is validated as the API
// server validates the object it names, and a message never repeats more
// than a bounded prefix of a value (a ConfigMap name of hundreds of KiB
// fits in an annotation, and the message goes into every component's
// condition and into CLI errors).
func TestValidateFieldForms(t *testing.T) {
	huge := strings.Repeat("a", 300<<10)
	for _, tc := range []struct {
		name string
		src  *corev1.NodeConfigSource
		want string // a substring of the error; "" for valid
	}{
		{"a UUID and a real key", ref("kube-system", "kubelet-config", "0b9b4c4e-8a3e-4f0e-9d6f-2f3c8f1e2a7d", "kubelet"), ""},
		{"name of 253 bytes", ref("ns", strings.Repeat("a", 253), "u", ""), ""},
		{"name of 254 bytes", ref("ns", strings.Repeat("a", 254), "u", ""), "name \"aaaa"},
		{"name of 300 KiB", ref("ns", huge, "u", ""), "... (307200 bytes): must be no more than 253 characters"},
		{"name with upper case", ref("ns", "Kubelet", "u", ""), `name "Kubelet": a lowercase RFC 1123 subdomain`},
		{"name with a slash", ref("ns", "a/b", "u", ""), `name "a/b"`},
		{"namespace of 64 bytes", ref(strings.Repeat("n", 64), "n", "u", ""), "must be no more than 63 characters"},
		{"namespace with a dot", ref("kube.system", "n", "u", ""), `namespace "kube.system": must not contain dots`},
		{"uid of 300 KiB", ref("ns", "n", huge, ""), "uid \"aaaa"},
		{"uid with a slash", ref("ns", "n", "../../etc", ""), `uid "../../etc": must consist of letters, digits`},
		{"uid with a newline", ref("ns", "n", "u\nv", ""), `uid "u\nv"`},
		{"uid ..", ref("ns", "n", "..", ""), `must not be "." or ".."`},
		{"key with a slash", ref("ns", "n", "u", "a/b"), `kubeletConfigKey "a/b"`},
		{"key of 300 KiB", ref("ns", "n", "u", huge), "kubeletConfigKey \"aaaa"},
		{"resourceVersion of 300 KiB", &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "ns", Name: "n", UID: "u", ResourceVersion: huge}}, "resourceVersion \"aaaa"},
		{"every field", ref("NS", huge, huge, huge), "name "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.src)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v; want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want an error containing %q", err, tc.want)
			}
			if len(err.Error()) > 2048 {
				t.Errorf("the message is %d bytes: it repeats the input unbounded", len(err.Error()))
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Errorf("error %T is not *InvalidError", err)
			}
		})
	}
	// Through the annotation: the same, and a decode error that repeats a
	// huge field name is bounded too.
	for _, v := range []string{
		`{"configMap":{"namespace":"ns","name":"` + huge + `","uid":"u"}}`,
		`{"configMap":{"namespace":"ns","name":"n","uid":"u","` + huge + `":1}}`,
	} {
		_, err := ParseAssignment(v)
		if err == nil || len(err.Error()) > 2048 {
			t.Errorf("ParseAssignment of a %d-byte value: %d-byte error", len(v), len(fmt.Sprint(err)))
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{AssignmentAnnotation: v}}}
		if _, _, err := ReadAssignment(node, AssignmentAnnotation); err == nil || len(err.Error()) > 2048 {
			t.Errorf("ReadAssignment of a %d-byte value: %d-byte error", len(v), len(fmt.Sprint(err)))
		}
	}
}

// Every message of this package that repeats an annotation value is
// bounded, whatever the value's size (an annotation holds up to 256 KiB):
// assignments, rollout claims, config statuses and component names.
func TestMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("Z", 300<<10)
	for name, err := range map[string]error{
		"assignment name": func() error {
			_, err := ParseAssignment(`{"configMap":{"namespace":"ns","name":"` + huge + `","uid":"u"}}`)
			return err
		}(),
		"assignment unknown field": func() error {
			_, err := ParseAssignment(`{"configMap":{"` + huge + `":1}}`)
			return err
		}(),
		"claim name": func() error {
			_, err := DecodeClaim(`{"namespace":"ops","name":"` + huge + `","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`)
			return err
		}(),
		"claim unknown field": func() error {
			_, err := DecodeClaim(`{"` + huge + `":1}`)
			return err
		}(),
		"status phase": func() error {
			_, err := ParseConfigStatus(`{"phase":"` + huge + `"}`)
			return err
		}(),
		"status unknown field": func() error {
			_, err := ParseConfigStatus(`{"` + huge + `":1}`)
			return err
		}(),
		"component name": ValidateComponentName(huge),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if len(err.Error()) > 2048 {
			t.Errorf("%s: a %d-byte message repeats the input", name, len(err.Error()))
		}
	}
}
