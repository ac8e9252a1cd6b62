package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// newFakeWithConfigMap is newFake with a ConfigMap "cfg" in "ns".
func newFakeWithConfigMap(t *testing.T, immutable bool) *dynamicfake.FakeDynamicClient {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", UID: "cfg-uid"}, Data: map[string]string{"kubelet": "{}"}}
	if immutable {
		cm.Immutable = ptr.To(true)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		t.Fatal(err)
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource(): "ConfigRolloutList", configMapsGVR: "ConfigMapList"},
		&unstructured.Unstructured{Object: m})
}

func configMapImmutable(t *testing.T, fake *dynamicfake.FakeDynamicClient) bool {
	t.Helper()
	u, err := fake.Resource(configMapsGVR).Namespace("ns").Get(context.Background(), "cfg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedBool(u.Object, "immutable")
	return v
}

// TestStartOnAMutableConfigMap: start refuses a mutable ConfigMap (the
// controller would keep the rollout Pending) and says how to fix it;
// --make-immutable makes it so, then creates the rollout.
func TestStartOnAMutableConfigMap(t *testing.T) {
	fake := newFakeWithConfigMap(t, false)
	out, err := runCLI(t, fake, nil, "rollout", "start", "r1", "--configmap", "cfg")
	if err == nil || !strings.Contains(err.Error(), "ConfigMap ns/cfg is not immutable") || !strings.Contains(err.Error(), "--make-immutable") {
		t.Fatalf("err %v\n%s", err, out)
	}
	if _, err := fake.Resource(v1alpha1.GroupVersionResource()).Namespace("ns").Get(context.Background(), "r1", metav1.GetOptions{}); err == nil {
		t.Fatal("the rollout was created")
	}
	if configMapImmutable(t, fake) {
		t.Fatal("made immutable without --make-immutable")
	}
	out, err = runCLI(t, fake, nil, "rollout", "start", "r1", "--configmap", "cfg", "--make-immutable")
	if err != nil {
		t.Fatalf("start --make-immutable: %v\n%s", err, out)
	}
	if !configMapImmutable(t, fake) || !strings.Contains(out, "configmap ns/cfg made immutable") || !strings.Contains(out, "configrollout ns/r1 created") {
		t.Fatalf("immutable %v, output %q", configMapImmutable(t, fake), out)
	}
	// Already immutable: nothing to do, nothing said.
	out, err = runCLI(t, fake, nil, "rollout", "start", "r2", "--configmap", "cfg", "--make-immutable")
	if err != nil || strings.Contains(out, "made immutable") {
		t.Fatalf("err %v, output %q", err, out)
	}
}

func TestStartFleetFlags(t *testing.T) {
	fake := newFakeWithConfigMap(t, true)
	out, err := runCLI(t, fake, nil, "rollout", "start", "r1", "--configmap", "cfg", "--allow-known-bad",
		"--window", "Sat,Sun 22:00-04:00 Europe/Berlin", "--window", "12:00-13:00")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ro := getRollout(t, fake, "r1")
	want := []v1alpha1.MaintenanceWindow{
		{Days: []v1alpha1.Weekday{"Sat", "Sun"}, Start: "22:00", End: "04:00", TimeZone: "Europe/Berlin"},
		{Start: "12:00", End: "13:00"},
	}
	if diff := cmp.Diff(want, ro.Spec.Windows); diff != "" || !ro.Spec.AllowKnownBad {
		t.Errorf("windows (-want +got):\n%s\nallowKnownBad %v", diff, ro.Spec.AllowKnownBad)
	}
	for _, w := range []string{"22:00", "Sat 22:00-25:00", "Sunday 01:00-02:00", "01:00-02:00 Mars/Olympus", "a b 01:00-02:00", "01:00-02:00 UTC extra"} {
		_, err := runCLI(t, fake, nil, "rollout", "start", "r9", "--configmap", "cfg", "--window", w)
		if _, usage := err.(*UsageError); err == nil || !usage || !strings.Contains(err.Error(), "--window") {
			t.Errorf("--window %q: %v", w, err)
		}
	}
}

func statusNode(t *testing.T, name string, component string, st *nodeapi.ConfigStatus) *corev1.Node {
	t.Helper()
	v, err := st.MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{nodeapi.StatusAnnotationFor(component): v}}}
}

func TestKnownBad(t *testing.T) {
	bad := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "cfgs", Name: "kubelet-v2", UID: "u2", ResourceVersion: "7", KubeletConfigKey: "kubelet"}}
	proxy := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "cfgs", Name: "proxy-v3", UID: "u3", ResourceVersion: "9", KubeletConfigKey: "config.conf"}}
	nodes := []*corev1.Node{
		statusNode(t, "n1", "kubelet", &nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack, Assigned: bad, Error: "failed"}),
		statusNode(t, "n2", "kubelet", &nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: bad, Active: bad}),
		statusNode(t, "n3", "kube-proxy", &nodeapi.ConfigStatus{Phase: nodeapi.PhaseDeadEnd, Assigned: proxy}),
		statusNode(t, "n4", "kubelet", &nodeapi.ConfigStatus{Phase: nodeapi.PhaseSyncFailed, Assigned: bad}),
		{ObjectMeta: metav1.ObjectMeta{Name: "n5", Annotations: map[string]string{nodeapi.StatusAnnotation: "{"}}},
	}
	halted := func(name, reason string, uid, rv string) v1alpha1.ConfigRollout {
		return v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "cfgs", Name: name}, Spec: v1alpha1.ConfigRolloutSpec{ConfigMapName: "kubelet-v2"},
			Status: v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseHalted, ConfigMap: &v1alpha1.ConfigMapRef{UID: types.UID(uid), ResourceVersion: rv},
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionHalted, Status: metav1.ConditionTrue, Reason: reason}}}}
	}
	undone := halted("undone", "TooManyFailures", "u2", "7")
	undone.Status.Phase = v1alpha1.PhaseReverted
	completed := halted("completed", "NotHalted", "u2", "7")
	completed.Status.Phase, completed.Status.Conditions[0].Status = v1alpha1.PhaseCompleted, metav1.ConditionFalse
	rollouts := []v1alpha1.ConfigRollout{halted("first", "TooManyFailures", "u2", "7"), halted("edited", "ConfigMapChanged", "u2", "7"), undone, completed}
	got := KnownBad(nodes, rollouts)
	want := []KnownBadConfig{
		{Namespace: "cfgs", Name: "kubelet-v2", UID: "u2", ResourceVersion: "7", Rollouts: []string{"cfgs/first: TooManyFailures", "cfgs/undone: TooManyFailures"}, Nodes: []string{"n1 (kubelet RolledBack)"}},
		{Namespace: "cfgs", Name: "proxy-v3", UID: "u3", ResourceVersion: "9", Nodes: []string{"n3 (kube-proxy DeadEnd)"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	text := RenderKnownBad(got)
	for _, s := range []string{"Known-bad configs", "ConfigMap cfgs/kubelet-v2 uid u2 resourceVersion 7: halted cfgs/first: TooManyFailures, cfgs/undone: TooManyFailures; 1 nodes report it bad: n1 (kubelet RolledBack)", "n3 (kube-proxy DeadEnd)"} {
		if !strings.Contains(text, s) {
			t.Errorf("%q does not say %q", text, s)
		}
	}
	if RenderKnownBad(nil) != "" {
		t.Error("an empty section is printed")
	}
}
