package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// TestBlankAndNullAssignmentsMeanNone (issue 24): the node reads a blank or
// null assignment annotation as "no assignment"; so does the planner. Before,
// a blank value made the node Skipped and counted failed (the rollout
// halted at maxFailures 0), and null was recorded as previous source {},
// which undo wrote back and the node refused.
func TestBlankAndNullAssignmentsMeanNone(t *testing.T) {
	for _, v := range []string{"", "  ", "\n", "null", " null\n"} {
		t.Run(strings.TrimSpace(v)+"/"+string(rune('0'+len(v))), func(t *testing.T) {
			w := newWorld(t, 1, percentStep("100%"))
			value := v
			w.node("node-000").Assignment = &value
			w.plan()
			w.wantPhase(v1alpha1.PhaseProgressing)
			if c := w.claim(w.node("node-000")); c == nil || c.Previous != nil {
				t.Fatalf("claim %+v, want one with no previous source", c)
			}
			if got := w.assigning(); len(got) != 1 {
				t.Fatalf("assigned %v, want node-000", got)
			}
			w.r.Spec.Undo = true
			w.r.Generation++
			w.plan()
			if got := w.reverting(); len(got) != 1 || w.last.Patches[0].Value != nil {
				t.Fatalf("undo patches %+v, want the annotation removed", w.last.Patches)
			}
		})
	}
}

// TestInvalidAssignmentsAreLeftAlone (issue 24): a value the node refuses
// (wrong-case fields, a missing uid, no subfield, trailing data) is not a
// previous source the rollout could restore: the node is skipped, never
// patched. Before, the planner decoded leniently and "restored" such values
// as valid assignments.
func TestInvalidAssignmentsAreLeftAlone(t *testing.T) {
	for _, v := range []string{
		`{"ConfigMap":{"namespace":"ns","name":"old","uid":"old-uid"}}`,
		`{"configMap":{"Namespace":"ns","name":"old","uid":"old-uid"}}`,
		`{"configMap":{"namespace":"ns","name":"old"}}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":""}}`,
		`{"configMap":{"namespace":"ns","uid":"u"}}`,
		`{}`,
		`{"configMap":null}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":"u","uid":"v"}}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":"u","colour":"red"}}`,
		`{"configMap":{"namespace":"ns","name":"old","uid":"u"}} {}`,
		`[]`, `"x"`, `0`, `true`, `{not json`,
	} {
		t.Run(v, func(t *testing.T) {
			if _, err := nodeapi.ParseAssignment(v); err == nil {
				t.Fatalf("the node accepts %s; the case is wrong", v)
			}
			w := newWorld(t, 2, percentStep("100%"))
			w.r.Spec.MaxFailures = 1
			value := v
			w.node("node-000").Assignment = &value
			w.plan()
			state, reason := w.stateOf("node-000")
			if state != v1alpha1.NodeFailed || w.patches["node-000"] != 0 || *w.node("node-000").Assignment != v {
				t.Fatalf("state %s, patches %v: want node-000 failed and its assignment untouched", state, w.patches)
			}
			if !strings.Contains(reason, "which is invalid") || strings.Count(reason, "invalid NodeConfigSource") > 1 {
				t.Fatalf("reason %q", reason)
			}
			// Undo leaves its assignment alone too, and takes the claim off.
			w.r.Spec.Undo = true
			w.plan()
			if n := w.node("node-000"); *n.Assignment != v || n.Claim != nil {
				t.Fatalf("after undo node-000 carries %q, claim %v", *n.Assignment, n.Claim)
			}
		})
	}
}

// TestSyncFailedIsNotAFailure (issue 24): a node that could not find out
// what to run (phase SyncFailed) is "not yet", not failed, until its
// progress deadline; before, a node's transient read error at startup
// halted and reverted the whole rollout.
func TestSyncFailedIsNotAFailure(t *testing.T) {
	w := newWorld(t, 3, percentStep("100%"))
	w.plan()
	n := w.node("node-000")
	n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseSyncFailed, Assigned: newSource(), Active: nil,
		Error: "failed to sync, desired config unclear, cause: the server is currently unable to handle the request"}
	w.now = w.now.Add(time.Minute)
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if state, _ := w.stateOf("node-000"); state != v1alpha1.NodeTrial {
		t.Fatalf("node-000 %s, want Trial", state)
	}
	// The node reads its assignment again and runs the config.
	w.promote("node-000")
	w.plan()
	if state, _ := w.stateOf("node-000"); state != v1alpha1.NodePromoted {
		t.Fatalf("node-000 %s, want Promoted", state)
	}

	// One that stays unclear fails at its deadline, saying why.
	w = newWorld(t, 1, percentStep("100%"))
	w.r.Spec.MaxFailures = 1
	w.plan()
	w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseSyncFailed, Assigned: newSource(), Error: "failed to sync"}
	w.now = w.now.Add(DefaultProgressDeadline + time.Second)
	w.plan()
	if state, reason := w.stateOf("node-000"); state != v1alpha1.NodeFailed || !strings.Contains(reason, "phase SyncFailed") {
		t.Fatalf("node-000 %s (%q), want Failed at the deadline with phase SyncFailed", state, reason)
	}
}

// TestUnknownComponentNeedsPayloadKey (issue 24): one table of default
// payload keys; a component without one needs spec.payloadKey. Before, the
// planner defaulted the key to the component's name, and a rollout of
// node-greeter (key greeter.yaml) waited Pending forever for key
// "node-greeter".
func TestUnknownComponentNeedsPayloadKey(t *testing.T) {
	w := newWorld(t, 1, percentStep("100%"))
	w.r.Spec.Component = "node-greeter"
	w.plan()
	w.wantPhase(v1alpha1.PhasePending)
	if !w.hasEvent("PayloadKeyRequired") || !strings.Contains(w.r.Status.Message, "spec.payloadKey is required") {
		t.Fatalf("message %q, events %+v", w.r.Status.Message, w.last.Events)
	}
	w.r.Spec.PayloadKey = "greeter.yaml"
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	src, err := nodeapi.ParseAssignment(*w.node("node-000").Assignment)
	if err != nil || src.ConfigMap.KubeletConfigKey != "greeter.yaml" {
		t.Fatalf("assigned %v (%v), want key greeter.yaml", src, err)
	}
}
