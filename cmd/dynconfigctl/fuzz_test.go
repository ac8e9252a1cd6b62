package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// FuzzStatusOfAnnotations: the assignment and status annotations are bytes
// from the API server that anyone allowed to patch a Node wrote (their
// decoders are fuzzed in nodeapi). status shows a row for any value, and
// every error names the node and the annotation.
func FuzzStatusOfAnnotations(f *testing.F) {
	for _, s := range []string{
		"", "null", " ", "{}", "[]", `"x"`, "0", "\xff",
		`{"configMap":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a","kubeletConfigKey":"kubelet"}}`,
		`{"configMap":{"namespace":"kube-system","name":"kubelet-a","UID":"uid-a"}}`,
		`{"configMap":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a","uid":"uid-b"}}`,
		`{"configMap":{"namespace":"kube-system","name":"kubelet-a"}}`,
		`{"configMap":null}`, `{"configMap":{}} {}`, `{"configMap":{"namespace":"a\nb","name":"c","uid":"d"}}`,
		`{"phase":"SyncFailed"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{
			nodeapi.AssignmentAnnotation: v, "dynconfig.io/config-status": v,
		}}}
		row, errs := statusOf(n, "kubelet")
		if cols := row.columns(true); len(cols) != 9 {
			t.Fatalf("%d columns for %q", len(cols), v)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e.Error(), `node "n" annotation dynconfig.io/config-`) {
				t.Fatalf("error does not name the node and annotation: %v", e)
			}
		}
	})
}

// FuzzValidateDocument: validate reads files anyone may hand it. It never
// panics, and every line of an error names the document.
func FuzzValidateDocument(f *testing.F) {
	for _, s := range []string{
		"", "a: [", "- a", "hello", validKubelet, validProxy, validKubelet + "---\n" + validKubelet,
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxpods: 1\nkubeAPIQPS: -1\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nKind: KubeletConfiguration\n",
		`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","mode":"x"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		_, err := validateFile(strings.NewReader(doc), stdinName)
		if err == nil {
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "<stdin>: ") {
				t.Fatalf("error line does not name the document: %q", line)
			}
		}
	})
}
