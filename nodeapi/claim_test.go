package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
		`{"namespace":"ops","Name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`,               // wrong case: no name
		`{"namespace":"ops","name":"r","name":"s","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`,    // duplicate
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z"} {}`,            // trailing
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","step":-1}`,     // negative step
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","previous":{}}`, // invalid previous
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","previous":{"configMap":{"name":"x","namespace":"y"}}}`,
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","previousClaim":{"namespace":"ops"}}`, // invalid previous claim
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","formatVersion":-1}`,
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

// TestDecodeClaimReadsNewerWriters: what a newer controller may add under
// the skew rule (doc.go) decodes, unknown fields ignored; a newer
// formatVersion is ErrNewerFormat.
func TestDecodeClaimReadsNewerWriters(t *testing.T) {
	want := &Claim{Namespace: "ops", Name: "r", UID: "u", AssignedAt: metav1.NewTime(t0)}
	for _, v := range []string{
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","x":1}`,
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","verdicts":{"soakStart":"2026-11-26T10:05:00Z"},"formatVersion":1}`,
	} {
		got, err := DecodeClaim(v)
		if err != nil {
			t.Errorf("DecodeClaim(%s): %v", v, err)
		} else if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("DecodeClaim(%s) (-want +got):\n%s", v, diff)
		}
	}
	// A field a newer controller adds to the gate memory is ignored too.
	v := `{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","gates":{"soakStarted":"2026-11-26T10:05:00Z","webhookErrors":{"w":2}}}`
	got, err := DecodeClaim(v)
	soak := metav1.NewTime(t0.Add(5 * time.Minute))
	if diff := cmp.Diff(&Claim{Namespace: "ops", Name: "r", UID: "u", AssignedAt: metav1.NewTime(t0), Gates: &GateMemory{SoakStarted: &soak}}, got); err != nil || diff != "" {
		t.Errorf("DecodeClaim(%s): %v (-want +got):\n%s", v, err, diff)
	}
	_, err = DecodeClaim(`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","formatVersion":2}`)
	if !errors.Is(err, ErrNewerFormat) || err.Error() != "rollout claim: formatVersion 2: written by a newer dynconfig in a format this version does not read (it reads 1)" {
		t.Errorf("a newer formatVersion: %v", err)
	}
}

// TestClaimPreviousClaims: a claim carries the claims it replaced, at most
// MaxPreviousClaims deep (the oldest dropped), with every reason cut.
func TestClaimPreviousClaims(t *testing.T) {
	chain := func(n int) *Claim {
		var c *Claim
		for i := range n {
			c = &Claim{Namespace: "ops", Name: fmt.Sprintf("r%d", i), UID: types.UID(fmt.Sprintf("u%d", i)), AssignedAt: metav1.NewTime(t0),
				Previous: testSource(fmt.Sprint(i), "1"), Failed: strings.Repeat("x", 2*MaxClaimReason), PreviousClaim: c}
		}
		return c
	}
	long := chain(MaxPreviousClaims + 3)
	v, err := EncodeClaim(long)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeClaim(v)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for c := got; c != nil; c = c.PreviousClaim {
		names = append(names, c.Name)
		if len(c.Failed) > MaxClaimReason {
			t.Errorf("claim %s: reason of %d bytes", c.Name, len(c.Failed))
		}
	}
	if diff := cmp.Diff([]string{"r5", "r4", "r3", "r2"}, names); diff != "" {
		t.Errorf("chain (-want +got):\n%s", diff)
	}
	if long.PreviousClaim.PreviousClaim.PreviousClaim.PreviousClaim == nil || len(long.Failed) != 2*MaxClaimReason {
		t.Error("EncodeClaim modified its argument")
	}
	// A longer chain someone else wrote is cut on reading.
	data, err := json.Marshal(chain(MaxPreviousClaims + 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeClaim(strings.ReplaceAll(string(data), strings.Repeat("x", 2*MaxClaimReason), "x")); err != nil || got.PreviousClaim.PreviousClaim.PreviousClaim == nil || got.PreviousClaim.PreviousClaim.PreviousClaim.PreviousClaim != nil {
		t.Errorf("a chain of %d decoded as %+v, %v", MaxPreviousClaims+2, got, err)
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
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","future":[1],"formatVersion":1}`,
		`{"namespace":"ops","name":"r","name":"s","uid":"u","assignedAt":"2026-11-26T10:00:00Z"}`,
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","previousClaim":{"namespace":"ops","name":"q","uid":"v","assignedAt":"2026-11-25T10:00:00Z",` +
			`"previousClaim":{"namespace":"ops","name":"p","uid":"w","assignedAt":"2026-11-24T10:00:00Z"}}}`,
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","gates":{"soakStarted":"2026-11-26T10:05:00Z","pods":{"failed":"47DEQpj8","ready":""}},` +
			`"previousClaim":{"namespace":"ops","name":"q","uid":"v","assignedAt":"2026-11-25T10:00:00Z","gates":{"pods":{"ready":"AAAAAAAA"}}}}`,
		`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","gates":{"pods":{"ready":"47DEQpj"}}}`,
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
		if rest, ok := objectBody(data); ok && !strings.Contains(string(data), "zzFuture") {
			more, err := DecodeClaim(`{"zzFuture":{"x":[1]},` + rest)
			if diff := cmp.Diff(c, more); err != nil || diff != "" {
				t.Fatalf("an added field changes the reading of %q: %v\n%s", data, err, diff)
			}
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
