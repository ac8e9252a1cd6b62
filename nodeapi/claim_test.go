package nodeapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testClaim() *Claim {
	return &Claim{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: testSource("a", "7"), AssignedAt: metav1.NewTime(t0), Step: 2}
}

func TestClaimAnnotationFor(t *testing.T) {
	for component, want := range map[string]string{
		"": "dynconfig.io/config-source-rollout", "kubelet": "dynconfig.io/config-source-rollout", "kube-proxy": "dynconfig.io/config-source-rollout.kube-proxy",
	} {
		if got := ClaimAnnotationFor(component); got != want {
			t.Errorf("ClaimAnnotationFor(%q) = %q, want %q", component, got, want)
		}
	}
}

func TestClaimRoundTrip(t *testing.T) {
	for _, c := range []*Claim{testClaim(), {Namespace: "ops", Name: "r", UID: "u", AssignedAt: metav1.NewTime(t0), Failed: "kubelet reports RolledBack"}} {
		v, err := EncodeClaim(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeClaim(v)
		if err != nil {
			t.Fatalf("decode %s: %v", v, err)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Fatalf("round trip of %s (-want +got):\n%s", v, diff)
		}
	}
}

func TestEncodeClaimCutsLongReasons(t *testing.T) {
	c := testClaim()
	c.Failed = strings.Repeat("é", MaxClaimReason)
	v, err := EncodeClaim(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeClaim(v)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got.Failed) > MaxClaimReason || !strings.HasSuffix(got.Failed, "...") {
		t.Fatalf("reason not cut to %d bytes: %d bytes", MaxClaimReason, len(got.Failed))
	}
}

func TestDecodeClaimRefuses(t *testing.T) {
	for _, v := range []string{
		`{}`, `[]`, `"x"`, `{"namespace":"ops"}`,
		`{"namespace":"ops","name":"r","uid":"u"}`,                                                   // no assignedAt
		`{"namespace":"ops","name":"r","assignedAt":"2026-11-26T10:00:00Z"}`,                         // no uid
		`{"namespace":"Ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`,               // not a DNS label
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","x":1}`,         // unknown field
		`{"namespace":"ops","Name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`,               // wrong case
		`{"namespace":"ops","name":"r","name":"s","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`,    // duplicate
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z"} {}`,            // trailing
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","step":-1}`,     // negative step
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","previous":{}}`, // invalid previous
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","previous":{"configMap":{"name":"x","namespace":"y"}}}`,
	} {
		c, err := DecodeClaim(v)
		if err == nil {
			t.Errorf("DecodeClaim(%s) = %+v, want an error", v, c)
		} else if !strings.Contains(err.Error(), "invalid rollout claim") {
			t.Errorf("DecodeClaim(%s): error %q does not say what it decoded", v, err)
		}
	}
	for _, v := range []string{``, `  `, `null`} {
		if c, err := DecodeClaim(v); c != nil || err != nil {
			t.Errorf("DecodeClaim(%q) = %+v, %v; want no claim", v, c, err)
		}
	}
}

func TestReadClaimNamesTheNode(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"dynconfig.io/config-source-rollout.kube-proxy": "{"}}}
	if _, err := ReadClaim(n, "kube-proxy"); err == nil || !strings.Contains(err.Error(), "Node n1") || !strings.Contains(err.Error(), "dynconfig.io/config-source-rollout.kube-proxy") {
		t.Fatalf("ReadClaim error %v does not name the node and the annotation", err)
	}
	if c, err := ReadClaim(n, "kubelet"); c != nil || err != nil {
		t.Fatalf("ReadClaim of an absent annotation = %+v, %v", c, err)
	}
}

// FuzzDecodeClaim feeds claim annotation values to the strict decoder: it
// must not panic, and what it accepts must encode and decode back the same.
func FuzzDecodeClaim(f *testing.F) {
	good, _ := EncodeClaim(testClaim())
	for _, seed := range []string{
		``, `null`, `{}`, good, `{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","failed":"x"}`,
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"bad"}`, `{"namespace":`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeClaim(string(data))
		if err != nil && len(err.Error()) > 2048 {
			t.Fatalf("DecodeClaim of %d bytes: a %d-byte message", len(data), len(err.Error()))
		}
		if err != nil || c == nil {
			return
		}
		v, err := EncodeClaim(c)
		if err != nil {
			t.Fatalf("encode a decoded claim %+v (from %q): %v", c, data, err)
		}
		back, err := DecodeClaim(v)
		if err != nil {
			t.Fatalf("decode %s (re-encoded from %q): %v", v, data, err)
		}
		if diff := cmp.Diff(c, back); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", data, diff)
		}
	})
}
