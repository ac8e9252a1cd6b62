package nodeapi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestConditionTypeFor(t *testing.T) {
	for in, want := range map[string]corev1.NodeConditionType{
		"":                "ConfigOK",
		"kubelet":         "ConfigOK",
		"kube-proxy":      "KubeProxyConfigOK",
		"kube-proxy-like": "KubeProxyLikeConfigOK",
		"node-problem-d2": "NodeProblemD2ConfigOK",
		"cilium":          "CiliumConfigOK",
	} {
		if got := ConditionTypeFor(in); got != want {
			t.Errorf("ConditionTypeFor(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"Kube-Proxy", "kube_proxy", "-x", strings.Repeat("a", 50)} {
		if err := ValidateComponentName(bad); err == nil {
			t.Errorf("ValidateComponentName(%q) = nil, want an error", bad)
		}
	}
	if err := ValidateComponentName("kube-proxy"); err != nil {
		t.Error(err)
	}
}

func TestAssignmentAnnotationFor(t *testing.T) {
	for in, want := range map[string]string{
		"":           "dynconfig.io/config-source",
		"kubelet":    "dynconfig.io/config-source",
		"kube-proxy": "dynconfig.io/config-source.kube-proxy",
		"a234567890123456789012345678901234567890123456789": "dynconfig.io/config-source.a234567890123456789012345678901234567890123456789",
	} {
		got := AssignmentAnnotationFor(in)
		if got != want {
			t.Errorf("AssignmentAnnotationFor(%q) = %q, want %q", in, got, want)
		}
		if msgs := validation.IsQualifiedName(got); len(msgs) > 0 {
			t.Errorf("AssignmentAnnotationFor(%q) = %q is not a valid annotation key: %v", in, got, msgs)
		}
	}
}
