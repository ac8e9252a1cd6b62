package nodeapi

import (
	"errors"
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
	const want = "Local, Trial, Promoted, RolledBack, DeadEnd, SyncFailed, NotApplied"
	for _, tc := range []struct{ in, err string }{
		{``, "decoding the config status: unexpected end of JSON input"},
		{`{"phase":"Trial"`, "decoding the config status: unexpected end of JSON input"},
		{`{"phase":"Trial"} {}`, "decoding the config status: invalid character '{' after top-level value"},
		{`{"phase":"Trial"}}`, "decoding the config status: invalid character '}' after top-level value"},
		{`{}`, "config status: phase: required (one of " + want + ")"},
		{`null`, "config status: phase: required (one of " + want + ")"},
		// Names match case-sensitively: "Phase" is an unknown field.
		{`{"Phase":"Trial"}`, "config status: phase: required (one of " + want + ")"},
		// encoding/json, which decoded statuses before, took the last of
		// two keys; now no decoder of this package takes either.
		{`{"phase":"Trial","phase":"RolledBack"}`, `decoding the config status: duplicate field "phase"`},
		{`{"phase":"Trial","error":"a","error":"b"}`, `decoding the config status: duplicate field "error"`},
		{`{"phase":"Trial ing"}`, `config status: phase "Trial ing": not a phase (1 to 63 ASCII letters and digits; this version knows ` + want + ")"},
		{`{"phase":"Trial","active":"x"}`, "decoding the config status: json: cannot unmarshal string into Go struct field statusEnvelope.ConfigStatus.active of type v1.NodeConfigSource"},
		{`{"phase":"Trial","active":{}}`, "config status: active: invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{`[]`, "decoding the config status: json: cannot unmarshal array into Go value of type nodeapi.statusEnvelope"},
		{`{"phase":"Trial","formatVersion":-1}`, "config status: formatVersion: must not be negative, got -1"},
		{`{"phase":"Trial","formatVersion":2}`, "config status: formatVersion 2: written by a newer dynconfig in a format this version does not read (it reads 1)"},
	} {
		_, err := ParseConfigStatus(tc.in)
		if err == nil || err.Error() != tc.err {
			t.Errorf("ParseConfigStatus(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
	if _, err := ParseConfigStatus(`{"phase":"Trial","formatVersion":3}`); !errors.Is(err, ErrNewerFormat) {
		t.Errorf("a newer formatVersion: %v, want ErrNewerFormat", err)
	}
}

// TestParseConfigStatusReadsNewerWriters: what a newer component may add
// under the skew rule (doc.go) decodes: unknown fields are ignored, and a
// phase this version does not know is kept and means "wait".
func TestParseConfigStatusReadsNewerWriters(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ConfigStatus
	}{
		{`{"phase":"Promoted","preflight":{"verdict":"pass"},"drain":null}`, ConfigStatus{Phase: PhasePromoted}},
		{`{"phase":"Draining","error":"evicting 3 pods"}`, ConfigStatus{Phase: "Draining", Error: "evicting 3 pods"}},
		{`{"phase":"Trial","formatVersion":1}`, ConfigStatus{Phase: PhaseTrial}},
		{`{"phase":"Local","formatVersion":0}`, ConfigStatus{Phase: PhaseLocal}},
	} {
		got, err := ParseConfigStatus(tc.in)
		if err != nil {
			t.Errorf("ParseConfigStatus(%s): %v", tc.in, err)
			continue
		}
		if !got.Equal(&tc.want) {
			t.Errorf("ParseConfigStatus(%s) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	for _, p := range []ConfigPhase{"Draining", "Preflight", "trial"} {
		if p.Known() || p.Bad() {
			t.Errorf("phase %s: Known %v, Bad %v; want neither", p, p.Known(), p.Bad())
		}
	}
	for _, p := range phases {
		if !p.Known() || !phaseForm(p) {
			t.Errorf("phase %s is not known or has not the form of a phase", p)
		}
	}
}

// TestMarshalAnnotationWritesKnownPhases: a writer writes only the phases
// it knows, and never a formatVersion (readers before the skew rule refuse
// unknown fields).
func TestMarshalAnnotationWritesKnownPhases(t *testing.T) {
	for _, p := range []ConfigPhase{"", "Draining"} {
		if v, err := (&ConfigStatus{Phase: p}).MarshalAnnotation(); err == nil {
			t.Errorf("phase %q encoded as %s, want an error", p, v)
		}
	}
	v, err := (&ConfigStatus{Phase: PhaseLocal}).MarshalAnnotation()
	if err != nil || v != `{"phase":"Local"}` {
		t.Errorf("MarshalAnnotation = %s, %v", v, err)
	}
}

func TestReadConfigStatus(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		"dynconfig.io/config-status":            `{"phase":"Promoted"}`,
		"dynconfig.io/config-status.kube-proxy": `{"phase":"Bo gus"}`,
	}}}
	s, err := ReadConfigStatus(node, "kubelet")
	if err != nil || s == nil || s.Phase != PhasePromoted {
		t.Fatalf("kubelet: %+v, %v", s, err)
	}
	if s, err := ReadConfigStatus(node, "other"); s != nil || err != nil {
		t.Fatalf("absent: %+v, %v; want nil, nil", s, err)
	}
	_, err = ReadConfigStatus(node, "kube-proxy")
	want := `node "n1" annotation dynconfig.io/config-status.kube-proxy: config status: phase "Bo gus": not a phase`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want prefix %q", err, want)
	}
}

// FuzzParseConfigStatus feeds status annotation values to the decoder: it
// must not panic, its message is bounded, what it accepts encodes (when
// the phase is one this version knows) and decodes back the same, and a
// field added to an accepted object (what a newer writer may do) changes
// nothing.
func FuzzParseConfigStatus(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `{"phase":"Trial"}`, `{"phase":"Draining","future":{"a":[1,2]}}`,
		`{"phase":"Trial","phase":"Local"}`, `{"Phase":"Trial"}`, `{"phase":"Trial","formatVersion":2}`,
		`{"assigned":{"configMap":{"namespace":"kube-system","name":"k","uid":"u","kubeletConfigKey":"kubelet"}},"phase":"RolledBack","error":"x"}`,
		`{"phase":"Trial","trialEnds":"2026-11-26T10:30:00.5Z"}`, `{"phase":"Trial","trialEnds":"bad"}`, `{"phase":`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseConfigStatus(string(data))
		if err != nil {
			if len(err.Error()) > 2048 {
				t.Fatalf("ParseConfigStatus of %d bytes: a %d-byte message", len(data), len(err.Error()))
			}
			return
		}
		if rest, ok := objectBody(data); ok && !strings.Contains(string(data), "zzFuture") {
			more, err := ParseConfigStatus(`{"zzFuture":{"x":[1]},` + rest)
			if err != nil || !s.Equal(more) {
				t.Fatalf("an added field changes the reading of %q: %+v, %v", data, more, err)
			}
		}
		if !s.Phase.Known() {
			return
		}
		v, err := s.MarshalAnnotation()
		if err != nil {
			t.Fatalf("encode a decoded status %+v (from %q): %v", s, data, err)
		}
		back, err := ParseConfigStatus(v)
		if err != nil || !s.Equal(back) {
			t.Fatalf("round trip of %q through %s: %+v, %v", data, v, back, err)
		}
	})
}

// objectBody returns what follows the "{" of a JSON object with at least
// one member, so that a member can be put first.
func objectBody(data []byte) (string, bool) {
	s := strings.TrimSpace(string(data))
	if !strings.HasPrefix(s, "{") {
		return "", false
	}
	rest := strings.TrimLeft(s[1:], " \t\r\n")
	return rest, strings.HasPrefix(rest, `"`)
}

// BenchmarkParseConfigStatus decodes a status as the rollout controller
// does for every Node whose annotation changed: a trial with three sources.
func BenchmarkParseConfigStatus(b *testing.B) {
	end := metav1.NewTime(t0)
	v, err := (&ConfigStatus{Assigned: testSource("a", "7"), Active: testSource("a", "7"), LastKnownGood: testSource("b", "3"), Phase: PhaseTrial, TrialEnds: &end}).MarshalAnnotation()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseConfigStatus(v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNotAppliedIsNoVerdict: a node that could not apply its config here
// (PhaseNotApplied) reports no verdict on the config: the phase is known,
// not bad, and round-trips through the annotation.
func TestNotAppliedIsNoVerdict(t *testing.T) {
	p := PhaseNotApplied
	if !p.Known() || p.Bad() {
		t.Fatalf("phase %s: Known %v, Bad %v; want known and not bad", p, p.Known(), p.Bad())
	}
	in := &ConfigStatus{Phase: p, Error: "draining timed out"}
	v, err := in.MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseConfigStatus(v)
	if err != nil || !out.Equal(in) {
		t.Fatalf("ParseConfigStatus(%s) = %+v, %v; want %+v", v, out, err, in)
	}
}
