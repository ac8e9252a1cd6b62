package kubeproxy

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/components"
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

func TestTrial(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		want    components.Trial
		wantErr bool
	}{
		{"no annotations: shared defaults", nil, components.DefaultTrial(), false},
		{"both set", map[string]string{
			components.TrialDurationAnnotation:      "90s",
			components.CrashLoopThresholdAnnotation: "0",
		}, components.Trial{Duration: 90 * time.Second, CrashLoopThreshold: 0}, false},
		{"threshold only", map[string]string{components.CrashLoopThresholdAnnotation: "10"},
			components.Trial{Duration: components.DefaultTrialDuration, CrashLoopThreshold: 10}, false},
		{"threshold out of range", map[string]string{components.CrashLoopThresholdAnnotation: "11"}, components.Trial{}, true},
		{"bad duration", map[string]string{components.TrialDurationAnnotation: "soon"}, components.Trial{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Profile{}.Trial(tt.ann)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Trial error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				var ae *components.AnnotationError
				if !errors.As(err, &ae) {
					t.Errorf("error %v is not a *components.AnnotationError", err)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Trial (-want +got):\n%s", diff)
			}
		})
	}
}
