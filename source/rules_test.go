package source

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ref(ns, name, uid, key string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: ns, Name: name, UID: types(uid), KubeletConfigKey: key}}
}

func cmap(ns, name, uid, rv string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types(uid), ResourceVersion: rv}, Data: data}
}

func TestResolve(t *testing.T) {
	good := cmap("ns", "n", "u", "42", map[string]string{"kubelet": "{}", "other": "{}"})
	for _, tc := range []struct {
		name    string
		src     *corev1.NodeConfigSource
		cm      *corev1.ConfigMap
		want    *corev1.NodeConfigSource
		wantErr string
	}{
		{"empty", nil, nil, nil, ""},
		{"default key", ref("ns", "n", "u", ""), good, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "42", KubeletConfigKey: "kubelet"}}, ""},
		{"explicit key", ref("ns", "n", "u", "other"), good, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "n", UID: "u", ResourceVersion: "42", KubeletConfigKey: "other"}}, ""},
		{"absent", ref("ns", "n", "u", ""), nil, nil, "ConfigMap ns/n does not exist"},
		{"wrong uid", ref("ns", "n", "x", ""), good, nil, "invalid NodeConfigSource.ConfigMap, uid x and ns/n do not refer to the same object (its uid is u)"},
		{"missing key", ref("ns", "n", "u", "nope"), good, nil, `ConfigMap ns/n (UID: u) has no key "nope"`},
		{"invalid", &corev1.NodeConfigSource{}, good, nil, "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{"other object", ref("ns", "n", "u", ""), cmap("ns", "m", "u", "1", nil), nil, "ConfigMap ns/n resolved to ns/m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.src, tc.cm, "kubelet")
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resolved (-want +got):\n%s", diff)
			}
		})
	}
	// Resolve never mutates the caller's assignment.
	src := ref("ns", "n", "u", "")
	if _, err := Resolve(src, good, "kubelet"); err != nil {
		t.Fatal(err)
	}
	if src.ConfigMap.ResourceVersion != "" || src.ConfigMap.KubeletConfigKey != "" {
		t.Errorf("Resolve mutated its input: %+v", src.ConfigMap)
	}
}
