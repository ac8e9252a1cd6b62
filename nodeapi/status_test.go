package nodeapi

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
)

func TestStatusAnnotationFor(t *testing.T) {
	for component, want := range map[string]string{
		"":           "dynconfig.io/config-status",
		"kubelet":    "dynconfig.io/config-status",
		"kube-proxy": "dynconfig.io/config-status.kube-proxy",
	} {
		if got := StatusAnnotationFor(component); got != want {
			t.Errorf("StatusAnnotationFor(%q) = %q, want %q", component, got, want)
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
		{`{}`, "config status: phase: required (one of Local, Trial, Promoted, RolledBack, DeadEnd, SyncFailed)"},
		{`{"phase":"trial"}`, `config status: phase: unknown phase "trial" (want one of Local, Trial, Promoted, RolledBack, DeadEnd, SyncFailed)`},
		{`{"phase":"Trial","active":"x"}`, "decoding the config status: json: cannot unmarshal string into Go struct field ConfigStatus.active of type v1.NodeConfigSource"},
		{`[]`, "decoding the config status: json: cannot unmarshal array into Go value of type nodeapi.ConfigStatus"},
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
