package nodeapi

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// goldenEntry is one line of testdata/golden.jsonl: a value an earlier
// commit's encoder wrote (testdata/golden.sh rebuilds the file from git).
type goldenEntry struct {
	Commit, Writer, Name, Value string
}

// goldenBase is the commit the skew rule starts from (golden.sh's base):
// the encoders of this version write byte for byte what it wrote, so that
// its strict readers still read them.
const goldenBase = "0a61e247c2a8f5c8c1531078218c80658d05f2bb"

// The inputs golden.sh gave every commit's encoders.
var (
	goldenA = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "kubelet-v2", UID: "uid-v2", ResourceVersion: "42", KubeletConfigKey: "kubelet"}}
	goldenB = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "kubelet-v1", UID: "uid-v1", ResourceVersion: "7", KubeletConfigKey: "kubelet"}}
	goldenT = metav1.NewTime(time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC))
)

func goldenWant() map[string]any {
	return map[string]any{
		"assignment/full":    goldenA,
		"assignment/planned": &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ops", Name: "kubelet-v2", UID: "uid-v2", KubeletConfigKey: "kubelet"}},
		"status/local":       &ConfigStatus{Phase: PhaseLocal},
		"status/trial":       &ConfigStatus{Assigned: goldenA, Active: goldenA, LastKnownGood: goldenB, Phase: PhaseTrial, TrialEnds: &goldenT},
		"status/promoted":    &ConfigStatus{Assigned: goldenA, Active: goldenA, LastKnownGood: goldenA, Phase: PhasePromoted},
		"status/rolledback":  &ConfigStatus{Assigned: goldenA, Active: goldenB, LastKnownGood: goldenB, Error: "failed to validate config: maxPods: must be positive", Phase: PhaseRolledBack},
		"status/deadend":     &ConfigStatus{Assigned: goldenA, Error: "the last-known-good config crash-loops too", Phase: PhaseDeadEnd},
		"status/syncfailed":  &ConfigStatus{Assigned: goldenA, Active: goldenB, LastKnownGood: goldenB, Error: "failed to sync: the API server did not answer", Phase: PhaseSyncFailed},
		"claim/moved":        &Claim{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: goldenB, AssignedAt: goldenT, Step: 2},
		"claim/local":        &Claim{Namespace: "ops", Name: "roll-1", UID: "ro-uid", AssignedAt: goldenT},
		"claim/failed":       &Claim{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: goldenB, AssignedAt: goldenT, Step: 1, Failed: "kubelet reports RolledBack: failed to validate config"},
		"preflight/request":  &PreflightRequest{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Candidate: goldenA},
		"status/preflight-overridden": &ConfigStatus{Assigned: goldenB, Active: goldenB, LastKnownGood: goldenB, Phase: PhasePromoted,
			Preflight: &PreflightResult{Candidate: goldenA, Verdict: PreflightOverridden, Fields: []string{"maxPods (by /etc/kubernetes/kubelet.conf.d/zz-local.conf)"}}},
		"status/preflight-fail": &ConfigStatus{Phase: PhaseLocal, Preflight: &PreflightResult{Candidate: goldenA, Verdict: PreflightFail, Message: "maxPods: must be positive"}},
		"claim/gates": &Claim{Namespace: "ops", Name: "roll-1", UID: "ro-uid", Previous: goldenB, AssignedAt: goldenT, Step: 1, HoldUntil: goldenTime(25 * time.Minute),
			Gates: &GateMemory{SoakStarted: goldenTime(10 * time.Minute), Pods: BaselineOf([]types.UID{"uid-f1"}, []types.UID{"uid-r1", "uid-r2"})}},
	}
}

// goldenTime is goldenT + d.
func goldenTime(d time.Duration) *metav1.Time {
	t := metav1.NewTime(goldenT.Add(d))
	return &t
}

// sinceGates are the values written with the health gates' memory
// (Claim.Gates): this version writes them byte for byte as the commit
// that added it did, so that the pod keys of a baseline one controller
// wrote are the keys another reads.
var sinceGates = map[string]bool{"claim/gates": true}

func readGolden(t *testing.T) []goldenEntry {
	t.Helper()
	f, err := os.Open("testdata/golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e goldenEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("testdata/golden.jsonl line %d: %v", len(out)+1, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeGolden decodes a value with this version's decoder of its kind.
func decodeGolden(name, value string) (any, error) {
	switch kind, _, _ := strings.Cut(name, "/"); kind {
	case "assignment":
		return ParseAssignment(value)
	case "status":
		return ParseConfigStatus(value)
	case "preflight":
		return DecodePreflightRequest(value)
	default:
		return DecodeClaim(value)
	}
}

// encodeGolden encodes a value with this version's encoder of its kind.
func encodeGolden(v any) (string, error) {
	switch v := v.(type) {
	case *corev1.NodeConfigSource:
		return EncodeAssignment(v)
	case *ConfigStatus:
		return v.MarshalAnnotation()
	case *PreflightRequest:
		return EncodePreflightRequest(v)
	default:
		return EncodeClaim(v.(*Claim))
	}
}

// TestGoldenValues: every value an earlier commit's encoders wrote
// (testdata/golden.jsonl, built from git history by golden.sh) decodes to
// what was encoded, and this version's encoders write what the base commit
// wrote, byte for byte.
func TestGoldenValues(t *testing.T) {
	want := goldenWant()
	seen := map[string]bool{}
	commits := map[string]bool{}
	for _, e := range readGolden(t) {
		w, ok := want[e.Name]
		if !ok {
			t.Errorf("%s %s: no expected value for %q", e.Commit[:7], e.Writer, e.Name)
			continue
		}
		seen[e.Name], commits[e.Commit] = true, true
		got, err := decodeGolden(e.Name, e.Value)
		if err != nil {
			t.Errorf("%s of %s (%s): %s does not decode: %v", e.Name, e.Commit[:7], e.Writer, e.Value, err)
			continue
		}
		if s, ok := w.(*ConfigStatus); ok {
			if !s.Equal(got.(*ConfigStatus)) {
				t.Errorf("%s of %s (%s): decoded %+v, want %+v", e.Name, e.Commit[:7], e.Writer, got, w)
			}
		} else if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s of %s (%s) (-want +got):\n%s", e.Name, e.Commit[:7], e.Writer, diff)
		}
		if e.Commit == goldenBase || sinceGates[e.Name] {
			if v, err := encodeGolden(w); err != nil || v != e.Value {
				t.Errorf("%s: this version encodes %s (%v), the base commit's %s wrote %s", e.Name, v, err, e.Writer, e.Value)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("testdata/golden.jsonl has no value %s", name)
		}
	}
	if len(commits) < 6 {
		t.Errorf("testdata/golden.jsonl holds values of %d commits, want every commit golden.sh builds (7)", len(commits))
	}
}

// TestFutureValues: a value a newer version may write under the skew rule
// (a field this version does not know, a phase it does not know) decodes,
// and its phase means "wait": not bad, not promoted.
func TestFutureValues(t *testing.T) {
	s, err := ParseConfigStatus(`{"assigned":{"configMap":{"namespace":"kube-system","name":"kubelet-v2","uid":"uid-v2","resourceVersion":"42","kubeletConfigKey":"kubelet"}},` +
		`"phase":"Preflight","preflight":{"verdict":"overridden","fields":["maxPods"]},"drain":{"pods":3},"trialEnds":"2026-11-26T10:30:00Z"}`)
	if err != nil {
		t.Fatal(err)
	}
	if s.Phase != "Preflight" || s.Phase.Known() || s.Phase.Bad() || s.Phase == PhasePromoted || !sameRef(s.Assigned, goldenA) {
		t.Errorf("future status decoded as %+v (known %v, bad %v), want phase Preflight, waiting", s, s.Phase.Known(), s.Phase.Bad())
	}
	if s.Preflight == nil || s.Preflight.Answers(goldenA) {
		t.Errorf("future status's preflight %+v: a verdict this version does not know (and no candidate) must be kept and answer nothing", s.Preflight)
	}
	c, err := DecodeClaim(`{"namespace":"ops","name":"roll-1","uid":"ro-uid","assignedAt":"2026-11-26T10:30:00Z","step":2,"verdicts":{"webhookErrors":{"w":2}}}`)
	if err != nil || c.Holder() != "ops/roll-1" || c.Step != 2 {
		t.Errorf("future claim: %+v, %v", c, err)
	}
}

func sameRef(a, b *corev1.NodeConfigSource) bool {
	return a != nil && b != nil && *a.ConfigMap == *b.ConfigMap
}
