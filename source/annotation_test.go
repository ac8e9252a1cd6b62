package source

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestAnnotationKeyFor(t *testing.T) {
	for in, want := range map[string]string{
		"":           "dynconfig.io/config-source",
		"kubelet":    "dynconfig.io/config-source",
		"kube-proxy": "dynconfig.io/config-source.kube-proxy",
		"a234567890123456789012345678901234567890123456789": "dynconfig.io/config-source.a234567890123456789012345678901234567890123456789",
	} {
		got := AnnotationKeyFor(in)
		if got != want {
			t.Errorf("AnnotationKeyFor(%q) = %q, want %q", in, got, want)
		}
		if msgs := validation.IsQualifiedName(got); len(msgs) > 0 {
			t.Errorf("AnnotationKeyFor(%q) = %q is not a valid annotation key: %v", in, got, msgs)
		}
	}
}
