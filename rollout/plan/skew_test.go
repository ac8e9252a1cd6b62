package plan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// readStatus is what the controller hands Plan for a status annotation
// value (rollout/controller readStatus): the status, or why it is
// unreadable.
func readStatus(n *Node, value string) {
	n.Status, n.StatusError = nil, ""
	s, err := nodeapi.ParseConfigStatus(value)
	if err != nil {
		n.StatusError = err.Error()
		return
	}
	n.Status = s
}

// TestNewerAgentPhaseWaits (issue 29): a status a newer agent wrote, with a
// field and a phase this version does not know, is read (not an unreadable
// status) and means "wait": the node stays in trial, nothing fails before
// its progress deadline, and the promotion the agent reports next (with its
// new field still there) counts. At the deadline the node fails as any
// node in trial does, naming the phase.
func TestNewerAgentPhaseWaits(t *testing.T) {
	const newer = `{"assigned":{"configMap":{"namespace":"ns","name":"new","uid":"cm-uid-1","resourceVersion":"10","kubeletConfigKey":"kubelet"}},` +
		`"phase":"Preflight","preflight":{"verdict":"pass"}}`
	w := newWorld(t, 2, percentStep("100%"))
	w.plan()
	n := w.node("node-000")
	readStatus(n, newer)
	if n.StatusError != "" {
		t.Fatalf("a newer agent's status is unreadable: %s", n.StatusError)
	}
	w.now = w.now.Add(DefaultProgressDeadline - time.Second)
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if state, reason := w.stateOf("node-000"); state != v1alpha1.NodeTrial || w.hasEvent("NodeFailed") {
		t.Fatalf("node-000 %s (%q), events %+v; want Trial, waiting", state, reason, w.last.Events)
	}
	readStatus(n, `{"assigned":{"configMap":{"namespace":"ns","name":"new","uid":"cm-uid-1","resourceVersion":"10","kubeletConfigKey":"kubelet"}},`+
		`"active":{"configMap":{"namespace":"ns","name":"new","uid":"cm-uid-1","resourceVersion":"10","kubeletConfigKey":"kubelet"}},"phase":"Promoted","preflight":{"verdict":"pass"}}`)
	w.plan()
	if state, _ := w.stateOf("node-000"); state != v1alpha1.NodePromoted {
		t.Fatalf("node-000 %s after a newer agent's promotion, want Promoted", state)
	}

	// One that stays in a phase this version does not know fails at its
	// deadline, as one in Trial does, and the reason names the phase.
	w = newWorld(t, 1, percentStep("100%"))
	w.r.Spec.MaxFailures = 1
	w.plan()
	readStatus(w.node("node-000"), newer)
	w.now = w.now.Add(DefaultProgressDeadline + time.Second)
	w.plan()
	if state, reason := w.stateOf("node-000"); state != v1alpha1.NodeFailed || !strings.Contains(reason, "the node reports phase Preflight") {
		t.Fatalf("node-000 %s (%q), want Failed at the deadline naming phase Preflight", state, reason)
	}
}

// TestRevertRestoresPreviousClaim (issue 29): rollout A completed on a
// node; rollout B took the node over, halted and reverted it to A's
// config. The node gets A's claim back with A's assignment, so that an
// undo of A still puts the node back. Before, B's revert removed the claim
// ("kubelet-crash->kubelet-v1 (no claim)") and A's undo missed the node.
func TestRevertRestoresPreviousClaim(t *testing.T) {
	a := newWorld(t, 1, percentStep("100%"))
	a.runToEnd(10)
	a.wantPhase(v1alpha1.PhaseCompleted)
	n := a.node("node-000")
	aAssignment, aClaim := *n.Assignment, *n.Claim

	b := newWorld(t, 0, percentStep("100%"))
	b.r.Name, b.r.UID, b.r.Spec.ConfigMapName = "ro-b", "ro-b-uid", "crash"
	b.r.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	b.cm = &ConfigMap{UID: "crash-uid", ResourceVersion: "20", HasKey: true, Immutable: true}
	b.nodes = a.nodes
	b.rv = 100
	b.now = t0.Add(time.Hour)
	b.others = []Other{{Namespace: "ns", Name: "ro", UID: "ro-uid", Created: t0, Phase: v1alpha1.PhaseCompleted, Started: true,
		Nodes: map[string]bool{"node-000": true}, ConfigMap: &v1alpha1.ConfigMapRef{UID: cmUID, ResourceVersion: "10"}}}
	b.plan()
	if got := b.assigning(); len(got) != 1 {
		t.Fatalf("B assigned %v, want node-000 (A ended)", got)
	}
	bc := b.claim(n)
	if bc == nil || bc.PreviousClaim == nil || bc.PreviousClaim.UID != "ro-uid" {
		t.Fatalf("B's claim %+v does not carry A's", bc)
	}
	crash := Assignment(b.r, "crash-uid")
	n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack, Assigned: crash, Active: newSource(), LastKnownGood: newSource(), Error: "crash loop"}
	b.now = b.now.Add(time.Minute)
	b.plan()
	b.wantPhase(v1alpha1.PhaseHalted)
	if got := b.reverting(); len(got) != 1 {
		t.Fatalf("B reverted %v, want node-000", got)
	}
	if n.Assignment == nil || *n.Assignment != aAssignment {
		t.Fatalf("node-000 reverted to %v, want A's %s", describeAnnotation(n.Assignment), aAssignment)
	}
	if n.Claim == nil {
		t.Fatalf("node-000: %s (no claim) after B's revert, want A's claim back", describeAnnotation(n.Assignment))
	}
	if *n.Claim != aClaim {
		t.Fatalf("node-000 claim %s after B's revert, want A's %s", *n.Claim, aClaim)
	}
	b.plan() // B no longer holds the node: nothing left to revert
	if len(b.last.Patches) != 0 || b.r.Status.Reverting != 0 {
		t.Fatalf("B still reverting: %+v, %d", b.last.Patches, b.r.Status.Reverting)
	}

	// Undo A: the node goes back to what it had before A (no assignment).
	a.others = []Other{{Namespace: "ns", Name: "ro-b", UID: "ro-b-uid", Created: b.r.CreationTimestamp.Time, Phase: v1alpha1.PhaseHalted, Started: true,
		Nodes: map[string]bool{"node-000": true}, ConfigMap: &v1alpha1.ConfigMapRef{UID: "crash-uid", ResourceVersion: "20"}}}
	a.rv = 200
	a.r.Spec.Undo = true
	a.plan()
	if got := a.reverting(); len(got) != 1 || n.Assignment != nil || n.Claim != nil {
		t.Fatalf("undo of A reverted %v; node-000 now %s, claim %v; want node-000 back on no assignment, no claim", got, describeAnnotation(n.Assignment), n.Claim)
	}
}

// TestRevertDropsClaimOfGoneRollout: a replaced claim whose rollout was
// deleted since is not restored (nothing would ever take it off), and a
// rollout deleted after it ended, which leaves its assignment, restores no
// claim either.
func TestRevertDropsClaimOfGoneRollout(t *testing.T) {
	w := newWorld(t, 0)
	prev := &nodeapi.Claim{Namespace: "ns", Name: "gone", UID: "gone-uid", AssignedAt: metav1.NewTime(t0), PreviousClaim: &nodeapi.Claim{Namespace: "ns", Name: "kept", UID: "kept-uid", AssignedAt: metav1.NewTime(t0)}}
	w.others = []Other{{Namespace: "ns", Name: "kept", UID: "kept-uid", Phase: v1alpha1.PhaseCompleted, Started: true}}
	p := &planner{in: w.input(), r: w.r}
	if got := p.restorable(prev); got == nil || got.UID != "kept-uid" {
		t.Fatalf("restorable = %+v, want the claim of the rollout that still exists", got)
	}
	w.others = nil
	p = &planner{in: w.input(), r: w.r}
	if got := p.restorable(prev); got != nil {
		t.Fatalf("restorable = %+v, want none", got)
	}
}
