package kubeproxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-proxy/config/v1alpha1"
)

func TestIdentity(t *testing.T) {
	p := Profile{}
	want := schema.GroupVersionKind{Group: "kubeproxy.config.k8s.io", Version: "v1alpha1", Kind: "KubeProxyConfiguration"}
	if diff := cmp.Diff(want, p.GroupVersionKind()); diff != "" {
		t.Errorf("GroupVersionKind (-want +got):\n%s", diff)
	}
	// The GVK must be one the upstream scheme knows for this Go type.
	if got := v1alpha1.SchemeGroupVersion; got != p.GroupVersionKind().GroupVersion() {
		t.Errorf("GroupVersion %v, upstream registers %v", p.GroupVersionKind().GroupVersion(), got)
	}
	if got, want := p.PayloadKey(), "config.conf"; got != want {
		t.Errorf("PayloadKey = %q, want %q (kubeadm's kube-proxy ConfigMap key)", got, want)
	}
}
