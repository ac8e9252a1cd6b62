package nodeapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testRequest() *PreflightRequest {
	return &PreflightRequest{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Candidate: testSource("a", "7")}
}

func TestPreflightAnnotationFor(t *testing.T) {
	for component, want := range map[string]string{
		"": "dynconfig.io/config-source-preflight", "kubelet": "dynconfig.io/config-source-preflight",
		"kube-proxy": "dynconfig.io/config-source-preflight.kube-proxy",
	} {
		if got := PreflightAnnotationFor(component); got != want {
			t.Errorf("PreflightAnnotationFor(%q) = %q, want %q", component, got, want)
		}
		// The admission policy guards every dynconfig.io/config-source*
		// annotation from nodes: the request must be one of them.
		if !strings.HasPrefix(PreflightAnnotationFor(component), AssignmentAnnotation) {
			t.Errorf("%s is not guarded by the assignment policy", PreflightAnnotationFor(component))
		}
	}
}

func TestPreflightRequestRoundTrip(t *testing.T) {
	v, err := EncodePreflightRequest(testRequest())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePreflightRequest(v)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(testRequest(), got); diff != "" {
		t.Fatalf("round trip of %s (-want +got):\n%s", v, diff)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{PreflightAnnotationFor("kube-proxy"): v}}}
	if r, err := ReadPreflightRequest(n, "kube-proxy"); err != nil || r.Holder() != "ops/roll-1" {
		t.Fatalf("ReadPreflightRequest = %+v, %v", r, err)
	}
	if r, err := ReadPreflightRequest(n, "kubelet"); r != nil || err != nil {
		t.Fatalf("another component's request read as %+v, %v", r, err)
	}
}

// TestDecodePreflightRequest: the skew rule's leniency (a field a newer
// controller adds is ignored), and the refusals, each naming its field.
func TestDecodePreflightRequest(t *testing.T) {
	cand := `"candidate":{"configMap":{"namespace":"ops","name":"c","uid":"u","resourceVersion":"4","kubeletConfigKey":"kubelet"}}`
	for _, tc := range []struct {
		name, value, wantErr string
		none                 bool
	}{
		{name: "blank", value: " ", none: true},
		{name: "null", value: "null", none: true},
		{name: "a future field", value: `{"namespace":"ops","name":"r","uid":"u",` + cand + `,"deadline":"2026-11-26T10:00:00Z"}`},
		{name: "formatVersion 1", value: `{"formatVersion":1,"namespace":"ops","name":"r","uid":"u",` + cand + `}`},
		{name: "a newer format", value: `{"formatVersion":2,"namespace":"ops","name":"r","uid":"u",` + cand + `}`, wantErr: "formatVersion 2"},
		{name: "no candidate", value: `{"namespace":"ops","name":"r","uid":"u"}`, wantErr: "candidate: required"},
		{name: "no resourceVersion", value: `{"namespace":"ops","name":"r","uid":"u","candidate":{"configMap":{"namespace":"ops","name":"c","uid":"u","kubeletConfigKey":"k"}}}`, wantErr: "resourceVersion: required"},
		{name: "no uid", value: `{"namespace":"ops","name":"r",` + cand + `}`, wantErr: "uid: required"},
		{name: "a duplicate key", value: `{"namespace":"ops","namespace":"x","name":"r","uid":"u",` + cand + `}`, wantErr: "duplicate"},
		{name: "another case", value: `{"Namespace":"ops","name":"r","uid":"u",` + cand + `}`, wantErr: "namespace"},
		{name: "trailing data", value: `{"namespace":"ops","name":"r","uid":"u",` + cand + `}{}`, wantErr: "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodePreflightRequest(tc.value)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DecodePreflightRequest(%s) = %+v, %v; want an error with %q", tc.value, r, err, tc.wantErr)
				}
				if strings.Contains(tc.wantErr, "formatVersion") && !errors.Is(err, ErrNewerFormat) {
					t.Errorf("a newer format does not wrap ErrNewerFormat: %v", err)
				}
			case err != nil:
				t.Fatalf("DecodePreflightRequest(%s): %v", tc.value, err)
			case tc.none != (r == nil):
				t.Fatalf("DecodePreflightRequest(%s) = %+v, want none: %v", tc.value, r, tc.none)
			}
		})
	}
}

// TestPreflightInStatus: a status with an answer round-trips; the encoder
// cuts long lists and messages; an answer a writer could not have written
// (no candidate, an unknown verdict) is refused by the encoder, and is no
// answer to a reader.
func TestPreflightInStatus(t *testing.T) {
	cand := testSource("a", "7")
	s := &ConfigStatus{Phase: PhasePromoted, Active: testSource("b", "3"), LastKnownGood: testSource("b", "3"), Assigned: testSource("b", "3"),
		Preflight: &PreflightResult{Candidate: cand, Verdict: PreflightOverridden, Fields: []string{"maxPods (by /etc/kubernetes/kubelet.conf.d/zz.conf)"}}}
	v, err := s.MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfigStatus(v)
	if err != nil || !s.Equal(back) {
		t.Fatalf("round trip through %s: %+v, %v", v, back, err)
	}
	if !back.Preflight.Answers(cand) || back.Preflight.Answers(testSource("a", "8")) || back.Preflight.Answers(testSource("c", "7")) {
		t.Errorf("Answers: want true for the candidate only")
	}
	if got, want := back.Preflight.Describe(), "Overridden: maxPods (by /etc/kubernetes/kubelet.conf.d/zz.conf)"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}

	long := *s
	var fields []string
	for i := range 40 {
		fields = append(fields, fmt.Sprintf("featureGates[G%02d] (by zz.conf)", i))
	}
	long.Preflight = &PreflightResult{Candidate: cand, Verdict: PreflightFail, Fields: fields, Message: strings.Repeat("é", MaxClaimReason)}
	v, err = long.MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParseConfigStatus(v)
	if err != nil {
		t.Fatalf("a cut answer does not decode: %v", err)
	}
	p := back.Preflight
	if len(p.Fields) != MaxPreflightFields || p.Fields[MaxPreflightFields-1] != "and 25 more" || len(p.Message) > MaxClaimReason {
		t.Errorf("cut answer: %d fields (last %q), %d-byte message", len(p.Fields), p.Fields[len(p.Fields)-1], len(p.Message))
	}
	if len(fields) != 40 {
		t.Errorf("the encoder changed its input")
	}

	for _, bad := range []*PreflightResult{{Verdict: PreflightPass}, {Candidate: cand, Verdict: "Maybe"}} {
		c := *s
		c.Preflight = bad
		if v, err := c.MarshalAnnotation(); err == nil {
			t.Errorf("encoded an answer no writer writes: %s", v)
		}
	}
	future, err := ParseConfigStatus(`{"phase":"Local","preflight":{"candidate":{"configMap":{"namespace":"kube-system","name":"cm-a","uid":"uid-a","resourceVersion":"7","kubeletConfigKey":"kubelet"}},"verdict":"Maybe","future":1}}`)
	if err != nil {
		t.Fatal(err)
	}
	if future.Preflight.Answers(cand) {
		t.Errorf("an unknown verdict counts as an answer")
	}
	if _, err := ParseConfigStatus(`{"phase":"Local","preflight":{"verdict":"no, never"}}`); err == nil || !strings.Contains(err.Error(), "preflight: verdict") {
		t.Errorf("a malformed verdict: %v, want an error naming preflight: verdict", err)
	}
}

// FuzzDecodePreflightRequest feeds request annotation values to the
// decoder: no panic, a bounded message, what it accepts encodes and
// decodes back the same, and an added field changes nothing.
func FuzzDecodePreflightRequest(f *testing.F) {
	good, _ := EncodePreflightRequest(testRequest())
	for _, seed := range []string{``, `null`, `{}`, good, `{"namespace":`, "\xff", `{"formatVersion":3}`,
		`{"namespace":"ops","name":"r","uid":"u","candidate":{"configMap":{"namespace":"ops","name":"c","uid":"u","resourceVersion":"4"}},"x":[1]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodePreflightRequest(string(data))
		if err != nil && len(err.Error()) > 2048 {
			t.Fatalf("DecodePreflightRequest of %d bytes: a %d-byte message", len(data), len(err.Error()))
		}
		if err != nil || r == nil {
			return
		}
		if rest, ok := objectBody(data); ok && !strings.Contains(string(data), "zzFuture") {
			more, err := DecodePreflightRequest(`{"zzFuture":{"x":[1]},` + rest)
			if diff := cmp.Diff(r, more); err != nil || diff != "" {
				t.Fatalf("an added field changes the reading of %q: %v\n%s", data, err, diff)
			}
		}
		v, err := EncodePreflightRequest(r)
		if err != nil {
			t.Fatalf("encode a decoded request %+v (from %q): %v", r, data, err)
		}
		back, err := DecodePreflightRequest(v)
		if diff := cmp.Diff(r, back); err != nil || diff != "" {
			t.Fatalf("round trip of %q: %v\n%s", data, err, diff)
		}
	})
}
