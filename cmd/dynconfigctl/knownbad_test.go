package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestStatusKnownBad: --known-bad lists, under the table, the configs
// nodes report bad and the ConfigRollouts halted on a config.
func TestStatusKnownBad(t *testing.T) {
	nodes := statusFleet(t)
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n)
	}
	scheme := runtime.NewScheme() // unstructured objects only
	ro := &v1alpha1.ConfigRollout{TypeMeta: metav1.TypeMeta{APIVersion: "dynconfig.io/v1alpha1", Kind: "ConfigRollout"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "cfgs", Name: "v9"}, Spec: v1alpha1.ConfigRolloutSpec{ConfigMapName: "kubelet-v9"},
		Status: v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseHalted, ConfigMap: &v1alpha1.ConfigMapRef{UID: "uid-9", ResourceVersion: "90"},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionHalted, Status: metav1.ConditionTrue, Reason: "TooManyFailures"}}}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource(): "ConfigRolloutList"}, &unstructured.Unstructured{Object: m})
	o := statusOptions{pageSize: 500, knownBad: true, rollouts: dyn}
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, &out, fake.NewClientset(objs...), o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Known-bad configs",
		"ConfigMap cfgs/kubelet-v9 uid uid-9 resourceVersion 90: halted cfgs/v9: TooManyFailures",
		"1 nodes report it bad: n2 (kubelet RolledBack)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not say %q:\n%s", want, out.String())
		}
	}
	// Without the flag, the table alone.
	out.Reset()
	o.knownBad = false
	if err := runStatus(context.Background(), &out, &out, fake.NewClientset(objs...), o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Known-bad") {
		t.Errorf("section without --known-bad:\n%s", out.String())
	}
}
