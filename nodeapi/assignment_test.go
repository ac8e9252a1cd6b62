package nodeapi

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
// must not panic, and what it accepts must survive a JSON round trip.
func FuzzDecodeAssignment(f *testing.F) {
	for _, seed := range []string{
		``, `null`, ` `, `{}`, `[]`, `"x"`, `{"configMap":null}`,
		`{"configMap":{"namespace":"kube-system","name":"kubelet","uid":"u","kubeletConfigKey":"kubelet","resourceVersion":"5"}}`,
		`{"configMap":{"namespace":"a","namespace":"b"}}`, `{"ConfigMap":{}}`, `{"configMap":{"extra":1}}`,
		`{"configMap":{"uid":5}}`, `{} {}`, `{"configMap":`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
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
