package nodeapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodKeyOf pins the pod key: controllers of different versions read
// each other's baselines, so it must never change.
func TestPodKeyOf(t *testing.T) {
	if got, want := PodKeyOf(""), PodKey(0xe3b0c44298fc); got != want {
		t.Errorf("PodKeyOf(\"\") = %#x, want %#x (the first 6 bytes of the SHA-256 of nothing)", got, want)
	}
	if got, want := PodKeyOf("6f2a1d3c-0b7e-4c4f-9a51-2d8e6b1f0c93"), PodKeyOf("6f2a1d3c-0b7e-4c4f-9a51-2d8e6b1f0c94"); got == want {
		t.Errorf("two UIDs share key %#x", got)
	}
	if b := BaselineOf(nil, []types.UID{""}); b.Ready != "47DEQpj8" {
		t.Errorf("BaselineOf of the empty UID spells %q, want 47DEQpj8 (the first 6 bytes of its SHA-256)", b.Ready)
	}
}

// podUIDs returns n UIDs in the form the API server gives them.
func podUIDs(prefix string, n int) []types.UID {
	out := make([]types.UID, n)
	for i := range out {
		out[i] = types.UID(fmt.Sprintf("%08x-0b7e-4c4f-9a51-%012x", i, len(prefix)*1000+i))
	}
	return out
}

// TestPodBaselineRoundTrip: a baseline written into a claim reads back as
// the same sets of keys; 110 Ready pods (the kubelet's default maxPods)
// cost 880 bytes of baseline and under 930 bytes of claim.
func TestPodBaselineRoundTrip(t *testing.T) {
	failed, ready := podUIDs("f", 2), podUIDs("ready", 110)
	c := testClaim()
	soak := metav1.NewTime(t0.Add(90e9))
	c.Gates = &GateMemory{SoakStarted: &soak, Pods: BaselineOf(failed, ready)}
	v, err := EncodeClaim(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeClaim(v)
	if err != nil {
		t.Fatalf("decode %s: %v", v, err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	f, r, err := got.Gates.Pods.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 2 || len(r) != 110 {
		t.Fatalf("%d failed and %d ready keys, want 2 and 110", len(f), len(r))
	}
	for _, u := range ready {
		if !r[PodKeyOf(u)] || f[PodKeyOf(u)] {
			t.Fatalf("pod %s: ready %v, failed %v; want ready only", u, r[PodKeyOf(u)], f[PodKeyOf(u)])
		}
	}
	if n := len(got.Gates.Pods.Ready); n != 880 {
		t.Errorf("110 Ready pods: %d bytes, want 880", n)
	}
	plain, _ := EncodeClaim(testClaim())
	gates, _ := json.Marshal(got.Gates)
	t.Logf("claim without gates %d bytes, with a soak start and a baseline of 2 failed and 110 Ready pods %d bytes (gates %d bytes)", len(plain), len(v), len(gates))
	if len(v)-len(plain) > 1000 {
		t.Errorf("the gate memory of 112 pods adds %d bytes to the claim, want under 1000", len(v)-len(plain))
	}
}

// TestBaselineOfIsBounded: a list keeps at most MaxBaselinePods keys, and
// a decoder refuses more.
func TestBaselineOfIsBounded(t *testing.T) {
	b := BaselineOf(nil, podUIDs("x", MaxBaselinePods+10))
	_, r, err := b.Keys()
	if err != nil || len(r) != MaxBaselinePods {
		t.Fatalf("%d keys (%v), want %d", len(r), err, MaxBaselinePods)
	}
	over := b.Ready + strings.Repeat("A", 8)
	if _, _, err := (&PodBaseline{Ready: over}).Keys(); err == nil || !strings.Contains(err.Error(), "ready: 1025 pod keys, at most 1024") {
		t.Errorf("a list over the bound: %v", err)
	}
}

// TestGateMemoryValidate: a damaged baseline or soak start is an invalid
// claim whose error names the field.
func TestGateMemoryValidate(t *testing.T) {
	for v, want := range map[string]string{
		`"gates":{"pods":{"ready":"not base64!"}}`:       "gates: pods: ready: not unpadded base64",
		`"gates":{"pods":{"failed":"AAAA"}}`:             "gates: pods: failed: 3 bytes, not a whole number of 6-byte pod keys",
		`"gates":{"pods":{"ready":"47DEQpj8="}}`:         "gates: pods: ready: not unpadded base64",
		`"gates":{"soakStarted":"0001-01-01T00:00:00Z"}`: "gates: soakStarted: a zero time",
	} {
		_, err := DecodeClaim(`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z",` + v + `}`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("claim with %s: error %v, want it to say %q", v, err, want)
		}
	}
	// An empty baseline (no pods) is a baseline, not none.
	c, err := DecodeClaim(`{"namespace":"ops","name":"r","uid":"u","assignedAt":"2026-11-26T10:00:00Z","gates":{"pods":{}}}`)
	if err != nil || c.Gates == nil || c.Gates.Pods == nil {
		t.Fatalf("an empty baseline: %+v, %v", c, err)
	}
	if v, _ := EncodeClaim(c); !strings.Contains(v, `"gates":{"pods":{}}`) {
		t.Errorf("an empty baseline encodes as %s, want it kept", v)
	}
}

// TestPreviousClaimHasNoGates: a claim kept as PreviousClaim drops its gate
// memory (its rollout ended), so that a take-over does not carry another
// rollout's baseline.
func TestPreviousClaimHasNoGates(t *testing.T) {
	prev := testClaim()
	prev.Gates = &GateMemory{Pods: BaselineOf(nil, podUIDs("p", 110))}
	c := testClaim()
	c.Name, c.UID = "roll-2", "ro-uid-2"
	c.Gates = &GateMemory{Pods: BaselineOf(nil, podUIDs("q", 3))}
	c.PreviousClaim = prev
	v, err := EncodeClaim(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeClaim(v)
	if err != nil {
		t.Fatal(err)
	}
	if got.PreviousClaim == nil || got.PreviousClaim.Gates != nil || got.Gates == nil || got.Gates.Pods.Ready != c.Gates.Pods.Ready {
		t.Fatalf("decoded %+v (previous %+v), want the gates of the claim only", got, got.PreviousClaim)
	}
	if prev.Gates == nil {
		t.Fatal("EncodeClaim modified the claim it was given")
	}
	if strings.Count(v, `"gates"`) != 1 {
		t.Errorf("encoded %s: want one gates field", v)
	}
}

// BenchmarkBaselineOf110: the baseline of a node at the kubelet's default
// maxPods (110 Ready pods), as the controller takes it before each
// assignment, and its reading back (Keys) as a new leader does once.
func BenchmarkBaselineOf110(b *testing.B) {
	ready := podUIDs("ready", 110)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			BaselineOf(nil, ready)
		}
	})
	pb := BaselineOf(nil, ready)
	b.Run("keys", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := pb.Keys(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
