package status

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func testSource(uid, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "cm-" + uid, UID: types.UID("uid-" + uid),
		ResourceVersion: rv, KubeletConfigKey: "kubelet",
	}}
}

func TestConfigStatusAnnotationFor(t *testing.T) {
	for component, want := range map[string]string{
		"":           "dynconfig.io/config-status",
		"kubelet":    "dynconfig.io/config-status",
		"kube-proxy": "dynconfig.io/config-status.kube-proxy",
	} {
		if got := ConfigStatusAnnotationFor(component); got != want {
			t.Errorf("ConfigStatusAnnotationFor(%q) = %q, want %q", component, got, want)
		}
	}
}

func TestParseConfigStatusRoundTrip(t *testing.T) {
	end := metav1.NewTime(t0.Add(10*time.Minute + 300*time.Millisecond))
	in := &ConfigStatus{
		Assigned: testSource("a", "7"), Active: testSource("a", "7"), LastKnownGood: testSource("b", "3"),
		Phase: PhaseTrial, TrialEnds: &end,
	}
	v, err := in.MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseConfigStatus(v)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Equal(out) {
		t.Fatalf("round trip: %s became %+v", v, out)
	}
	other := *out
	other.Phase = PhasePromoted
	if in.Equal(&other) {
		t.Fatal("statuses with different phases compare equal")
	}
	if (*ConfigStatus)(nil).Equal(in) || !(*ConfigStatus)(nil).Equal(nil) {
		t.Fatal("nil handling of Equal")
	}
}

func TestParseConfigStatusRejects(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{``, "decoding the config status: EOF"},
		{`{"phase":"Trial"`, "decoding the config status: unexpected EOF"},
		{`{"phase":"Trial","colour":"red"}`, `decoding the config status: json: unknown field "colour"`},
		{`{"phase":"Trial"} {}`, "decoding the config status: trailing data after the JSON object"},
		{`{"phase":"Trial"}}`, "decoding the config status: trailing data after the JSON object"},
		{`{}`, "config status: phase: required (one of Local, Trial, Promoted, RolledBack, DeadEnd)"},
		{`{"phase":"trial"}`, `config status: phase: unknown phase "trial" (want one of Local, Trial, Promoted, RolledBack, DeadEnd)`},
		{`{"phase":"Trial","active":"x"}`, "decoding the config status: json: cannot unmarshal string into Go struct field ConfigStatus.active of type v1.NodeConfigSource"},
		{`[]`, "decoding the config status: json: cannot unmarshal array into Go value of type status.ConfigStatus"},
	} {
		_, err := ParseConfigStatus(tc.in)
		if err == nil || err.Error() != tc.err {
			t.Errorf("ParseConfigStatus(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestReadConfigStatus(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		"dynconfig.io/config-status":            `{"phase":"Promoted"}`,
		"dynconfig.io/config-status.kube-proxy": `{"phase":"Bogus"}`,
	}}}
	s, err := ReadConfigStatus(node, "kubelet")
	if err != nil || s == nil || s.Phase != PhasePromoted {
		t.Fatalf("kubelet: %+v, %v", s, err)
	}
	if s, err := ReadConfigStatus(node, "other"); s != nil || err != nil {
		t.Fatalf("absent: %+v, %v; want nil, nil", s, err)
	}
	_, err = ReadConfigStatus(node, "kube-proxy")
	want := `node "n1" annotation dynconfig.io/config-status.kube-proxy: config status: phase: unknown phase "Bogus"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want prefix %q", err, want)
	}
}

// TestNodeReporterPublishesConfigStatus: the ConfigStatus lands in the
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
	cs := &ConfigStatus{Assigned: testSource("a", "1"), Phase: PhaseRolledBack, Error: "failed to validate current (UID: uid-a)"}
	rep := Report{Status: corev1.ConditionFalse, Reason: cs.Error, Message: "using last-known-good (default)", Config: cs}
	if err := r.ReportConfigOK(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadConfigStatus(got, "kube-proxy")
	if err != nil || !read.Equal(cs) {
		t.Fatalf("published %+v (%v), want %+v", read, err, cs)
	}
	if got.Annotations["dynconfig.io/config-status"] != `{"phase":"Promoted"}` {
		t.Fatalf("the kubelet's status changed: %v", got.Annotations)
	}
	if c := FindType(got.Status.Conditions, "KubeProxyConfigOK"); c == nil || c.Reason != cs.Error {
		t.Fatalf("condition %+v", c)
	}
	if c := FindType(got.Status.Conditions, ConditionType); c != nil {
		t.Fatalf("a kube-proxy reporter wrote %s: %+v", ConditionType, c)
	}
}

func TestNewNodeReporterRejectsBadComponent(t *testing.T) {
	_, err := NewNodeReporter(NodeReporterOptions{Client: fake.NewClientset(), NodeName: testNode, Component: "Kube_Proxy"})
	want := `status: NodeReporterOptions.Component: component name "Kube_Proxy": a lowercase RFC 1123 label`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want prefix %q", err, want)
	}
}

func FuzzParseConfigStatus(f *testing.F) {
	for _, s := range []string{`{"phase":"Trial"}`, `{"phase":"Local","error":"x"}`,
		`{"assigned":{"configMap":{"namespace":"a","name":"b","uid":"u","kubeletConfigKey":"k"}},"phase":"Promoted","trialEnds":"2026-01-01T00:00:00Z"}`,
		``, `{`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseConfigStatus(in)
		if err != nil {
			return
		}
		v, err := s.MarshalAnnotation()
		if err != nil {
			t.Fatalf("re-encoding %q: %v", in, err)
		}
		again, err := ParseConfigStatus(v)
		if err != nil || !again.Equal(s) {
			t.Fatalf("%q: re-encoded %q reads back as %+v, %v", in, v, again, err)
		}
	})
}
