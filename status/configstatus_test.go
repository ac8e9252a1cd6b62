package status

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/nodeapi"
)

func testSource(uid, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "cm-" + uid, UID: types.UID("uid-" + uid),
		ResourceVersion: rv, KubeletConfigKey: "kubelet",
	}}
}

// TestNodeReporterPublishesConfigStatus: the nodeapi.ConfigStatus lands in the
// component's own annotation with the condition, and leaves another
// component's annotation and condition alone.
func TestNodeReporterPublishesConfigStatus(t *testing.T) {
	node := testNodeObject(otherConditions()...)
	node.Annotations = map[string]string{"dynconfig.io/config-status": `{"phase":"Promoted"}`}
	client := fake.NewClientset(node)
	r, err := NewNodeReporter(NodeReporterOptions{Client: client, NodeName: testNode, Component: "kube-proxy",
		Clock: clocktesting.NewFakePassiveClock(t0), Backoff: noWait})
	if err != nil {
		t.Fatal(err)
	}
	cs := &nodeapi.ConfigStatus{Assigned: testSource("a", "1"), Phase: nodeapi.PhaseRolledBack, Error: "failed to validate current (UID: uid-a)"}
	rep := Report{Status: corev1.ConditionFalse, Reason: cs.Error, Message: "using last-known-good (default)", Config: cs}
	if err := r.ReportConfigOK(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read, err := nodeapi.ReadConfigStatus(got, "kube-proxy")
	if err != nil || !read.Equal(cs) {
		t.Fatalf("published %+v (%v), want %+v", read, err, cs)
	}
	if got.Annotations["dynconfig.io/config-status"] != `{"phase":"Promoted"}` {
		t.Fatalf("the kubelet's status changed: %v", got.Annotations)
	}
	if c := FindType(got.Status.Conditions, "KubeProxyConfigOK"); c == nil || c.Reason != cs.Error {
		t.Fatalf("condition %+v", c)
	}
	if c := FindType(got.Status.Conditions, nodeapi.ConditionType); c != nil {
		t.Fatalf("a kube-proxy reporter wrote %s: %+v", nodeapi.ConditionType, c)
	}
}

func TestNewNodeReporterRejectsBadComponent(t *testing.T) {
	_, err := NewNodeReporter(NodeReporterOptions{Client: fake.NewClientset(), NodeName: testNode, Component: "Kube_Proxy"})
	want := `status: NodeReporterOptions.Component: component name "Kube_Proxy": a lowercase RFC 1123 label`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want prefix %q", err, want)
	}
}
