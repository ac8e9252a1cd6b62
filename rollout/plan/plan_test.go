package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func cmpDiff(a, b any) string { return cmp.Diff(a, b) }

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v        *intstr.IntOrString
		selected int
		want     int
	}{
		{"default", nil, 100, 1},
		{"count", ptr.To(intstr.FromInt32(5)), 100, 5},
		{"percent rounds down", ptr.To(intstr.FromString("15%")), 10, 1},
		{"percent", ptr.To(intstr.FromString("25%")), 100, 25},
		{"at least one", ptr.To(intstr.FromString("1%")), 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 0)
			w.r.Spec.MaxUnavailable = tc.v
			p := &planner{r: w.r}
			if got := p.maxUnavailable(tc.selected); got != tc.want {
				t.Errorf("maxUnavailable = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestGoodRollout: steps 1, 10%, 50%, 100% over 40 nodes, maxUnavailable 4:
// each step waits for the previous one's promotions, never more than 4 in
// trial, each node assigned once with its previous source recorded.
func TestGoodRollout(t *testing.T) {
	w := newWorld(t, 40, countStep(1), percentStep("10%"), percentStep("50%"), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(4))
	var steps []int32
	var rounds []int
	for range 100 {
		w.plan()
		if got := int(w.r.Status.InTrial); got > 4 {
			t.Fatalf("%d nodes in trial, maxUnavailable 4", got)
		}
		for _, p := range w.assigning() {
			if w.patches[p] > 1 {
				t.Fatalf("node %s patched %d times", p, w.patches[p])
			}
		}
		rounds = append(rounds, len(w.assigning()))
		steps = append(steps, w.r.Status.CurrentStep)
		if w.r.Status.Phase != v1alpha1.PhaseProgressing {
			break
		}
		w.promoteAll()
		w.now = w.now.Add(time.Second)
	}
	w.wantPhase(v1alpha1.PhaseCompleted)
	// 1; 4 (to 4 = 10% of 40); 4,4,4,4 (to 20); 4 x5 (to 40); then done.
	wantRounds := []int{1, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0}
	if diff := cmp.Diff(wantRounds, rounds); diff != "" {
		t.Errorf("nodes assigned per round (-want +got):\n%s", diff)
	}
	if w.r.Status.Promoted != 40 || w.r.Status.Assigned != 40 || w.r.Status.Failed != 0 || w.r.Status.Selected != 40 {
		t.Errorf("counts: %+v", w.r.Status)
	}
	for _, n := range w.nodes {
		if w.patches[n.Name] != 1 {
			t.Errorf("node %s: %d patches, want 1", n.Name, w.patches[n.Name])
		}
		odd := n.Name[len(n.Name)-1]%2 == 1
		c := w.claim(n)
		if c == nil || odd && !cmp.Equal(c.Previous, oldSource()) || !odd && c.Previous != nil {
			t.Errorf("node %s: claim %+v", n.Name, c)
		}
	}
	if c := w.claim(w.node("node-000")); c == nil || !c.AssignedAt.Time.Equal(t0) {
		t.Errorf("canary claim %+v, want node-000 (by name) assigned first", c)
	}
	if len(w.r.Status.Nodes) != 0 || len(w.r.Status.Steps) != 4 {
		t.Errorf("status: %d node records (want none), %d steps (want 4)", len(w.r.Status.Nodes), len(w.r.Status.Steps))
	}
	c := meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Completed" || c.ObservedGeneration != 1 {
		t.Errorf("Progressing condition %+v", c)
	}
}

// TestStepWaitsForPromotion: a node in trial holds the step.
func TestStepWaitsForPromotion(t *testing.T) {
	w := newWorld(t, 10, countStep(1), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(5))
	w.plan()
	if got := w.assigning(); !cmp.Equal(got, []string{"node-000"}) {
		t.Fatalf("canary round assigned %v", got)
	}
	for range 3 {
		w.now = w.now.Add(time.Minute)
		w.plan()
		if len(w.last.Patches) != 0 || w.r.Status.CurrentStep != 0 {
			t.Fatalf("assigned %v at step %d before the canary promoted", w.last.Patches, w.r.Status.CurrentStep)
		}
	}
	// Trial of the new config does not count.
	w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: newSource(), Active: newSource()}
	w.plan()
	if len(w.last.Patches) != 0 {
		t.Fatalf("assigned %v while the canary is in trial", w.last.Patches)
	}
	// A promoted status of the old config does not count either.
	w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: oldSource(), Active: oldSource()}
	w.plan()
	if len(w.last.Patches) != 0 {
		t.Fatalf("assigned %v on a stale promoted status", w.last.Patches)
	}
	w.promoteAll()
	w.plan()
	if got := len(w.assigning()); got != 5 || w.r.Status.CurrentStep != 1 || !w.hasEvent("StepCompleted") {
		t.Fatalf("after the canary promoted: %d assigned at step %d, events %v", got, w.r.Status.CurrentStep, w.last.Events)
	}
}

// TestCanaryFailureHaltsAndReverts: the canary fails; only it was touched and
// it is put back on its previous source.
func TestCanaryFailureHaltsAndReverts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		canary string
	}{
		{"previous none", "node-000"},
		{"previous ConfigMap", "node-001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 10, countStep(1), percentStep("100%"))
			if tc.canary == "node-001" {
				// Make node-001 first by name: drop node-000.
				w.nodes = w.nodes[1:]
			}
			w.plan()
			w.fail(tc.canary)
			w.plan()
			w.wantPhase(v1alpha1.PhaseHalted)
			if got := w.reverting(); !cmp.Equal(got, []string{tc.canary}) || len(w.assigning()) != 0 {
				t.Fatalf("patches %+v, want a revert of %s only", w.last.Patches, tc.canary)
			}
			n := w.node(tc.canary)
			if tc.canary == "node-000" && n.Assignment != nil {
				t.Errorf("revert left %s", *n.Assignment)
			}
			if tc.canary == "node-001" && !carries(n, oldSource()) {
				t.Errorf("revert set %v, want the old source", n.Assignment)
			}
			if !strings.Contains(w.r.Status.Message, "failed to validate current") {
				t.Errorf("message %q does not carry the component's reason", w.r.Status.Message)
			}
			c := meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionHalted)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "TooManyFailures" {
				t.Errorf("Halted condition %+v", c)
			}
			w.plan()
			if got := w.states(); !cmp.Equal(got, map[v1alpha1.NodeState][]string{v1alpha1.NodeReverted: {tc.canary}}) {
				t.Errorf("states %v", got)
			}
			if len(w.last.Patches) != 0 || w.r.Status.Failed != 1 {
				t.Errorf("after the revert: patches %v, failed %d", w.last.Patches, w.r.Status.Failed)
			}
			for _, n := range w.nodes {
				if n.Name != tc.canary && w.patches[n.Name] != 0 {
					t.Errorf("node %s was touched", n.Name)
				}
			}
		})
	}
}

// TestMaxFailures: maxFailures 2 halts on the third failure, not before,
// and reverts every node the rollout changed.
func TestMaxFailures(t *testing.T) {
	w := newWorld(t, 20, countStep(1), countStep(10))
	w.r.Spec.MaxFailures = 2
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(9))
	w.plan()
	w.promoteAll()
	w.plan()
	if got := len(w.assigning()); got != 9 {
		t.Fatalf("step 1 assigned %d, want 9", got)
	}
	w.fail("node-001")
	w.fail("node-002")
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if w.r.Status.Failed != 2 || len(w.assigning())+len(w.reverting()) != 0 || !cmp.Equal(w.marks(), []string{"node-001", "node-002"}) {
		t.Fatalf("2 failures: failed %d, patches %v, want only the failures written into the claims", w.r.Status.Failed, w.last.Patches)
	}
	w.fail("node-003")
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	if len(w.assigning()) != 0 || len(w.reverting()) != 10 {
		t.Fatalf("halt: %d assignments, %d reverts, want 0 and 10", len(w.assigning()), len(w.reverting()))
	}
	w.plan()
	if got := len(w.states()[v1alpha1.NodeReverted]); got != 10 || w.r.Status.Failed != 3 || w.r.Status.Assigned != 0 {
		t.Errorf("after the reverts: %d reverted, failed %d, assigned %d", got, w.r.Status.Failed, w.r.Status.Assigned)
	}
	// Nothing more, ever.
	w.settleReverts()
	w.now = w.now.Add(time.Hour)
	w.plan()
	if len(w.last.Patches) != 0 {
		t.Errorf("a halted rollout patched %v", w.last.Patches)
	}
}

// TestHaltWithoutRevertThenUndo: revertOnHalt false keeps the nodes; undo
// reverts them later.
func TestHaltWithoutRevertThenUndo(t *testing.T) {
	w := newWorld(t, 4, countStep(2), countStep(4))
	w.r.Spec.RevertOnHalt = ptr.To(false)
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	w.plan()
	w.fail("node-000")
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	if len(w.assigning())+len(w.reverting()) != 0 {
		t.Fatalf("halt without revert patched %v", w.last.Patches)
	}
	w.r.Spec.Undo = true
	w.r.Generation = 2
	w.plan()
	w.wantPhase(v1alpha1.PhaseReverted)
	if got := w.reverting(); !cmp.Equal(got, []string{"node-000", "node-001"}) {
		t.Fatalf("undo reverted %v", got)
	}
	if !w.hasEvent("Undo") || w.r.Status.ObservedGeneration != 2 {
		t.Errorf("events %v, observedGeneration %d", w.last.Events, w.r.Status.ObservedGeneration)
	}
}

func TestUndoCompleted(t *testing.T) {
	w := newWorld(t, 6, percentStep("50%"), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	w.runToEnd(10)
	w.wantPhase(v1alpha1.PhaseCompleted)
	w.r.Spec.Undo = true
	w.plan()
	if got := len(w.reverting()); got != 6 {
		t.Fatalf("undo reverted %d nodes, want 6", got)
	}
	w.plan()
	for _, n := range w.nodes {
		odd := n.Name[len(n.Name)-1]%2 == 1
		if odd && !carries(n, oldSource()) || !odd && n.Assignment != nil {
			t.Errorf("node %s carries %v after undo", n.Name, n.Assignment)
		}
	}
	if got := len(w.states()[v1alpha1.NodeReverted]); got != 6 || w.r.Status.Promoted != 0 {
		t.Errorf("%d reverted, %d promoted", got, w.r.Status.Promoted)
	}
}

func TestPauseSteps(t *testing.T) {
	t.Run("with duration", func(t *testing.T) {
		w := newWorld(t, 4, countStep(1), pauseStep(10*time.Minute), percentStep("100%"))
		w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(4))
		w.plan()
		w.promoteAll()
		w.now = w.now.Add(time.Minute)
		w.plan()
		w.wantPhase(v1alpha1.PhasePaused)
		if w.last.RequeueAfter != 10*time.Minute || len(w.last.Patches) != 0 || !w.hasEvent("Paused") {
			t.Fatalf("paused: requeue %v, patches %v, events %v", w.last.RequeueAfter, w.last.Patches, w.last.Events)
		}
		w.now = w.now.Add(9 * time.Minute)
		w.plan()
		w.wantPhase(v1alpha1.PhasePaused)
		if w.last.RequeueAfter != time.Minute || len(w.last.Events) != 0 {
			t.Fatalf("still paused: requeue %v, events %v", w.last.RequeueAfter, w.last.Events)
		}
		w.now = w.now.Add(time.Minute)
		w.plan()
		w.wantPhase(v1alpha1.PhaseProgressing)
		if len(w.assigning()) != 3 || !w.hasEvent("Resumed") {
			t.Fatalf("after the pause: %v, events %v", w.last.Patches, w.last.Events)
		}
	})
	t.Run("until resumed", func(t *testing.T) {
		w := newWorld(t, 4, countStep(1), pauseStep(0), percentStep("100%"))
		w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(4))
		w.plan()
		w.promoteAll()
		w.plan()
		w.now = w.now.Add(24 * time.Hour)
		w.plan()
		w.wantPhase(v1alpha1.PhasePaused)
		if w.last.RequeueAfter != 0 || len(w.last.Patches) != 0 || !strings.Contains(w.r.Status.Message, "resume") {
			t.Fatalf("paused: requeue %v, patches %v, message %q", w.last.RequeueAfter, w.last.Patches, w.r.Status.Message)
		}
		w.r.Spec.ResumedStep = ptr.To(int32(0)) // an older pause does not release this one
		w.plan()
		w.wantPhase(v1alpha1.PhasePaused)
		w.r.Spec.ResumedStep = ptr.To(int32(1))
		w.plan()
		w.wantPhase(v1alpha1.PhaseProgressing)
		if len(w.assigning()) != 3 {
			t.Fatalf("after resume: %v", w.last.Patches)
		}
	})
}

// TestSpecPaused: no new node while paused, but a failure still halts.
func TestSpecPaused(t *testing.T) {
	w := newWorld(t, 6, countStep(2), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	w.plan()
	w.r.Spec.Paused = true
	w.promoteAll()
	w.plan()
	w.wantPhase(v1alpha1.PhasePaused)
	if len(w.last.Patches) != 0 || !w.hasEvent("Paused") {
		t.Fatalf("paused: patches %v, events %v", w.last.Patches, w.last.Events)
	}
	w.r.Spec.Paused = false
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if got := w.assigning(); !cmp.Equal(got, []string{"node-002", "node-003"}) || !w.hasEvent("Resumed") {
		t.Fatalf("resumed: %v, events %v", got, w.last.Events)
	}
	w.r.Spec.Paused = true
	w.fail("node-002")
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	if got := w.reverting(); len(got) != 4 {
		t.Fatalf("a failure while paused reverted %v, want 4 nodes", got)
	}
}

func TestAbort(t *testing.T) {
	w := newWorld(t, 6, countStep(2), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	w.plan()
	w.promoteAll()
	w.r.Spec.Abort = true
	w.plan()
	w.wantPhase(v1alpha1.PhaseAborted)
	if len(w.last.Patches) != 0 || !w.hasEvent("Aborted") {
		t.Fatalf("abort: patches %v, events %v", w.last.Patches, w.last.Events)
	}
	if got := w.states(); !cmp.Equal(got, map[v1alpha1.NodeState][]string{v1alpha1.NodePromoted: {"node-000", "node-001"}}) {
		t.Errorf("aborted states %v: what was done stays", got)
	}
	w.now = w.now.Add(time.Hour)
	w.plan()
	if len(w.last.Patches) != 0 || len(w.last.Events) != 0 {
		t.Errorf("an aborted rollout acted: %v %v", w.last.Patches, w.last.Events)
	}
}

func TestDeadline(t *testing.T) {
	t.Run("no status", func(t *testing.T) {
		w := newWorld(t, 3, percentStep("100%"))
		w.r.Spec.ProgressDeadlineSeconds = ptr.To(int32(60))
		w.r.Spec.MaxFailures = 5
		w.plan()
		if w.last.RequeueAfter != time.Minute {
			t.Fatalf("requeue %v, want the deadline", w.last.RequeueAfter)
		}
		w.now = w.now.Add(59 * time.Second)
		w.plan()
		if w.r.Status.Failed != 0 {
			t.Fatalf("failed before the deadline")
		}
		w.now = w.now.Add(time.Second)
		w.plan()
		if st := w.r.Status; st.Failed != 1 || len(st.Failures) != 1 || !strings.Contains(st.Failures[0].Reason, "no progress within 1m0s") {
			t.Fatalf("at the deadline: failed %d, %+v", st.Failed, st.Failures)
		}
	})
	t.Run("trial extends it", func(t *testing.T) {
		w := newWorld(t, 3, percentStep("100%"))
		w.r.Spec.ProgressDeadlineSeconds = ptr.To(int32(60))
		w.plan()
		ends := metav1.NewTime(t0.Add(10 * time.Minute))
		w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: newSource(), Active: newSource(), TrialEnds: &ends}
		w.now = t0.Add(10*time.Minute + 59*time.Second)
		w.plan()
		w.wantPhase(v1alpha1.PhaseProgressing)
		if w.last.RequeueAfter != time.Second {
			t.Fatalf("requeue %v, want 1s", w.last.RequeueAfter)
		}
		w.now = w.now.Add(time.Second)
		w.plan()
		w.wantPhase(v1alpha1.PhaseHalted)
		if !strings.Contains(w.r.Status.Message, "phase Trial") {
			t.Errorf("message %q", w.r.Status.Message)
		}
	})
	// A phase of a newer agent this version does not know means "wait"
	// (nodeapi's skew rule); the trial end it reports on the rollout's
	// config moves the deadline as a Trial's does, so that a newer agent's
	// long phase does not fail the node at an older controller.
	t.Run("an unknown phase's trial end extends it", func(t *testing.T) {
		w := newWorld(t, 3, percentStep("100%"))
		w.r.Spec.ProgressDeadlineSeconds = ptr.To(int32(60))
		w.plan()
		ends := metav1.NewTime(t0.Add(10 * time.Minute))
		w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: "Soaking", Assigned: newSource(), Active: newSource(), TrialEnds: &ends}
		w.now = t0.Add(10*time.Minute + 59*time.Second)
		w.plan()
		w.wantPhase(v1alpha1.PhaseProgressing)
		w.now = w.now.Add(time.Second)
		w.plan()
		w.wantPhase(v1alpha1.PhaseHalted)
		if !strings.Contains(w.r.Status.Message, "phase Soaking") {
			t.Errorf("message %q", w.r.Status.Message)
		}
	})
}

func TestConfigMapChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		cm   *ConfigMap
		want []string
	}{
		{"edited", &ConfigMap{UID: cmUID, ResourceVersion: "11", HasKey: true}, []string{"edited", "resourceVersion 10, now 11", "new ConfigMap"}},
		{"replaced", &ConfigMap{UID: "other", ResourceVersion: "12", HasKey: true, Immutable: true}, []string{"replaced", "UID cm-uid-1, now other"}},
		{"deleted", nil, []string{"deleted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3, countStep(1), percentStep("100%"))
			w.plan()
			w.cm = tc.cm
			w.plan()
			w.wantPhase(v1alpha1.PhaseHalted)
			for _, s := range tc.want {
				if !strings.Contains(w.r.Status.Message, s) {
					t.Errorf("message %q lacks %q", w.r.Status.Message, s)
				}
			}
			c := meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionHalted)
			if c == nil || c.Reason != "ConfigMapChanged" {
				t.Errorf("Halted condition %+v", c)
			}
			if got := w.reverting(); !cmp.Equal(got, []string{"node-000"}) {
				t.Errorf("reverts %v", got)
			}
		})
	}
}

// TestImmutableMetadataEditDoesNotHalt: a new resourceVersion of the
// rollout's immutable ConfigMap (a label edit) is the same config: the
// rollout goes on, and the next step assigns the next nodes.
func TestImmutableMetadataEditDoesNotHalt(t *testing.T) {
	w := newWorld(t, 3, countStep(1), percentStep("100%"))
	w.plan()
	w.cm = &ConfigMap{UID: cmUID, ResourceVersion: "11", HasKey: true, Immutable: true}
	w.plan()
	if c := meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionHalted); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("halted on a metadata edit of an immutable ConfigMap: %+v", c)
	}
	if got := w.reverting(); len(got) != 0 {
		t.Fatalf("reverts %v", got)
	}
}

func TestNotStarted(t *testing.T) {
	for _, tc := range []struct {
		name string
		cm   *ConfigMap
		want string
	}{
		{"no ConfigMap", nil, "does not exist"},
		{"no key", &ConfigMap{UID: cmUID, ResourceVersion: "1", Immutable: true}, `hold key "kubelet"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3, percentStep("100%"))
			w.cm = tc.cm
			w.plan()
			w.wantPhase(v1alpha1.PhasePending)
			if len(w.last.Patches) != 0 || !strings.Contains(w.r.Status.Message, tc.want) || w.r.Status.ConfigMap != nil {
				t.Fatalf("patches %v, message %q", w.last.Patches, w.r.Status.Message)
			}
			w.plan()
			if len(w.last.Events) != 0 {
				t.Errorf("the same wait recorded again: %v", w.last.Events)
			}
		})
	}
}

func TestConflict(t *testing.T) {
	older, newer := t0.Add(-time.Hour), t0.Add(time.Hour)
	all := map[string]bool{"node-000": true, "node-001": true, "node-002": true}
	for _, tc := range []struct {
		name    string
		other   Other
		refused bool
	}{
		{"started overlapping", Other{Namespace: "x", Name: "a", Created: newer, Phase: v1alpha1.PhaseProgressing, Started: true, Nodes: all}, true},
		{"older pending overlapping", Other{Namespace: "ns", Name: "a", Created: older, Phase: v1alpha1.PhasePending, Nodes: all}, true},
		{"same age, name first", Other{Namespace: "ns", Name: "a", Created: t0, Phase: v1alpha1.PhasePending, Nodes: all}, true},
		{"newer pending", Other{Namespace: "ns", Name: "z", Created: newer, Phase: v1alpha1.PhasePending, Nodes: all}, false},
		{"disjoint", Other{Namespace: "ns", Name: "a", Created: older, Phase: v1alpha1.PhaseProgressing, Started: true, Nodes: map[string]bool{"node-9": true}}, false},
		{"other component", Other{Namespace: "ns", Name: "a", Component: "kube-proxy", Created: older, Phase: v1alpha1.PhaseProgressing, Started: true, Nodes: all}, false},
		{"finished", Other{Namespace: "ns", Name: "a", Created: older, Phase: v1alpha1.PhaseCompleted, Started: true, Nodes: all}, false},
		// A halted rollout still putting nodes back holds them: starting
		// now would race its revert patches.
		{"halted, still reverting", Other{Namespace: "ns", Name: "a", Created: newer, Phase: v1alpha1.PhaseHalted, Started: true, Reverting: true, Nodes: all}, true},
		{"itself", Other{Namespace: "ns", Name: "ro", Created: t0, Phase: v1alpha1.PhaseProgressing, Started: true, Nodes: all}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3, percentStep("100%"))
			w.others = []Other{tc.other}
			w.plan()
			c := meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionConflict)
			if tc.refused {
				w.wantPhase(v1alpha1.PhasePending)
				if len(w.last.Patches) != 0 || c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.other.Name) {
					t.Fatalf("refused: patches %v, condition %+v", w.last.Patches, c)
				}
				// Once the other ends, it starts.
				w.others[0].Phase = v1alpha1.PhaseCompleted
				w.others[0].Reverting = false
				w.plan()
				c = meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionConflict)
			}
			w.wantPhase(v1alpha1.PhaseProgressing)
			if len(w.assigning()) != 1 || c == nil || c.Status != metav1.ConditionFalse {
				t.Fatalf("not refused: patches %v, condition %+v", w.last.Patches, c)
			}
		})
	}
}

func TestNodesComeAndGo(t *testing.T) {
	w := newWorld(t, 4, countStep(2), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	w.plan()
	// node-001, in trial, is deleted: it neither blocks nor fails.
	w.nodes = append(w.nodes[:1], w.nodes[2:]...)
	w.promoteAll()
	w.plan()
	if got := w.states()[v1alpha1.NodeGone]; !cmp.Equal(got, []string{"node-001"}) || w.r.Status.Failed != 0 {
		t.Fatalf("gone %v, failed %d", got, w.r.Status.Failed)
	}
	// A new node joins (its component runs: it publishes a status): the
	// 100% step takes it.
	w.nodes = append(w.nodes, &Node{Name: "node-new", Selected: true, Status: &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal}})
	rounds := w.runToEnd(10)
	w.wantPhase(v1alpha1.PhaseCompleted)
	if w.patches["node-new"] != 1 || w.r.Status.Promoted != 4 || w.r.Status.Selected != 4 {
		t.Errorf("rounds %v, patches %v, status %+v", rounds, w.patches, w.r.Status)
	}
	// A node that stops matching the selector is followed, never assigned.
	w2 := newWorld(t, 3, percentStep("100%"))
	w2.node("node-000").Selected = false
	w2.runToEnd(10)
	if w2.patches["node-000"] != 0 || w2.r.Status.Selected != 2 {
		t.Errorf("unselected node patched %d times; selected %d", w2.patches["node-000"], w2.r.Status.Selected)
	}
}

// TestLostPatch: a patch that did not happen (the assignment and its
// claim, one request) is asked again with the same value; one that
// happened is not.
func TestLostPatch(t *testing.T) {
	w := newWorld(t, 3, percentStep("100%"))
	w.plan()
	w.node("node-000").Assignment = nil // the write was lost
	w.node("node-000").Claim = nil
	w.plan()
	if got := w.assigning(); !cmp.Equal(got, []string{"node-000"}) {
		t.Fatalf("patches %v, want node-000 again", w.last.Patches)
	}
	w.plan()
	if len(w.last.Patches) != 0 {
		t.Fatalf("patched again %v once the node carries it", w.last.Patches)
	}
}

func TestAnnotationEdgeCases(t *testing.T) {
	t.Run("undecodable assignment", func(t *testing.T) {
		w := newWorld(t, 2, percentStep("100%"))
		bad := "{not json"
		w.node("node-000").Assignment = &bad
		w.r.Spec.MaxFailures = 1
		w.plan()
		if st := w.r.Status; w.patches["node-000"] != 0 || st.Failed != 1 || len(st.Failures) != 1 || !strings.Contains(st.Failures[0].Reason, "which is invalid") {
			t.Fatalf("patches %v, status %+v", w.patches, st)
		}
	})
	t.Run("already assigned", func(t *testing.T) {
		w := newWorld(t, 2, percentStep("100%"))
		v := mustJSON(t, Assignment(w.r, cmUID))
		w.node("node-000").Assignment = &v
		w.node("node-000").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: newSource(), Active: newSource()}
		w.plan()
		if state, _ := w.stateOf("node-000"); w.patches["node-000"] != 0 || state != v1alpha1.NodePromoted {
			t.Fatalf("patches %v, node-000 %s", w.patches, state)
		}
	})
	t.Run("changed by someone else", func(t *testing.T) {
		w := newWorld(t, 2, percentStep("100%"))
		w.r.Spec.MaxFailures = 1
		w.plan()
		w.plan()
		other := mustJSON(t, oldSource())
		w.node("node-000").Assignment = &other
		w.plan()
		if state, reason := w.stateOf("node-000"); state != v1alpha1.NodeFailed || !strings.Contains(reason, "someone else") {
			t.Fatalf("node-000 %s (%q)", state, reason)
		}
	})
}

func TestHistoryBound(t *testing.T) {
	w := newWorld(t, 3*v1alpha1.MaxHistory, percentStep("100%"))
	w.r.Spec.MaxFailures = 1000
	for range 3 * v1alpha1.MaxHistory {
		w.plan()
		for _, n := range w.assigning() {
			w.fail(n)
		}
		w.now = w.now.Add(time.Second)
	}
	h := w.r.Status.History
	if len(h) != v1alpha1.MaxHistory {
		t.Fatalf("history has %d entries, want %d", len(h), v1alpha1.MaxHistory)
	}
	if h[len(h)-1].Time.Time != w.now.Add(-time.Second) {
		t.Errorf("the newest entry is at %v, want %v", h[len(h)-1].Time, w.now.Add(-time.Second))
	}
}

func TestPayloadKey(t *testing.T) {
	for _, tc := range []struct{ component, key, want string }{
		{"", "", "kubelet"},
		{"kubelet", "", "kubelet"},
		{"kube-proxy", "", "config.conf"},
		{"agent", "", ""}, // no default: required (issue 24: it was "agent")
		{"agent", "greeter.yaml", "greeter.yaml"},
		{"kubelet", "custom", "custom"},
	} {
		got, ok := PayloadKey(&v1alpha1.ConfigRolloutSpec{Component: tc.component, PayloadKey: tc.key})
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("PayloadKey(%q, %q) = %q, %v; want %q", tc.component, tc.key, got, ok, tc.want)
		}
	}
}

// TestHaltInTheSamePlan: a failure found while picking nodes halts the
// rollout, and the nodes picked in that plan are not assigned.
func TestHaltInTheSamePlan(t *testing.T) {
	w := newWorld(t, 3, percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	bad := "{not json"
	w.node("node-001").Assignment = &bad
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	if len(w.last.Patches) != 0 {
		t.Fatalf("a halted plan patched %v", w.last.Patches)
	}
	if got := w.states(); len(got) != 0 {
		t.Errorf("states %v, want no node claimed", got)
	}
	if st := w.r.Status; st.Failed != 1 || len(st.Failures) != 1 || st.Failures[0].Node != "node-001" || st.Reverting != 0 || !w.last.Finalized {
		t.Errorf("status %+v, finalized %v: want node-001 failed, nothing to revert", st, w.last.Finalized)
	}
}

// TestDeletion: deleting an active rollout puts its nodes back before the
// finalizer may go; deleting one that ended changes nothing.
func TestDeletion(t *testing.T) {
	type tc struct {
		name string
		// setup runs the rollout to where it is deleted.
		setup func(w *world)
		// phase after the deletion's plan; reverted: nodes put back.
		phase    v1alpha1.RolloutPhase
		reverted int
	}
	for _, c := range []tc{
		{"mid-step", func(w *world) { w.plan(); w.promoteAll(); w.plan() }, v1alpha1.PhaseReverted, 4},
		{"paused", func(w *world) { w.plan(); w.promoteAll(); w.r.Spec.Paused = true; w.plan() }, v1alpha1.PhaseReverted, 2},
		{"before the first plan", func(w *world) {}, v1alpha1.PhaseAborted, 0},
		{"refused by a conflict", func(w *world) {
			w.others = []Other{{Namespace: "ns", Name: "first", Phase: v1alpha1.PhaseProgressing, Started: true, Nodes: map[string]bool{"node-000": true}}}
			w.plan()
		}, v1alpha1.PhaseAborted, 0},
		{"completed", func(w *world) { w.runToEnd(10) }, v1alpha1.PhaseCompleted, 0},
		{"aborted", func(w *world) { w.plan(); w.promoteAll(); w.r.Spec.Abort = true; w.plan() }, v1alpha1.PhaseAborted, 0},
		{"halted without revert", func(w *world) {
			w.r.Spec.RevertOnHalt = ptr.To(false)
			w.plan()
			w.fail("node-000")
			w.plan()
		}, v1alpha1.PhaseHalted, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, 6, countStep(2), percentStep("100%"))
			w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			c.setup(w)
			before := map[string]*string{}
			for _, n := range w.nodes {
				before[n.Name] = n.Assignment
			}
			wasActive := w.r.Status.Phase.Active()
			w.r.DeletionTimestamp = &metav1.Time{Time: w.now}
			w.plan()
			w.wantPhase(c.phase)
			for _, p := range w.last.Patches {
				if !p.Revert {
					t.Errorf("a deleted rollout assigns %s", p.Node)
				}
			}
			if got := len(w.reverting()); got != c.reverted {
				t.Errorf("%d nodes reverting, want %d", got, c.reverted)
			}
			if wasActive != w.hasEvent("Deleted") {
				t.Errorf("Deleted event: %v, want %v (events %v)", !wasActive, wasActive, w.last.Events)
			}
			if c.reverted > 0 && w.last.Finalized {
				t.Errorf("finalized while %d nodes revert", c.reverted)
			}
			// The components take the reverts; the next plan sees them.
			w.settleReverts()
			w.plan()
			if !w.last.Finalized {
				t.Fatalf("not finalized after the reverts: phase %s, states %v", w.r.Status.Phase, w.states())
			}
			for _, n := range w.nodes {
				want := before[n.Name]
				if c.reverted > 0 {
					if odd := n.Name[len(n.Name)-1]%2 == 1; odd {
						v := mustJSON(t, oldSource())
						want = &v
					} else {
						want = nil
					}
				}
				if !sameAssignment(n.Assignment, want) {
					t.Errorf("node %s carries %s, want %s", n.Name, describeAnnotation(n.Assignment), describeAnnotation(want))
				}
			}
			if len(w.last.Patches) != 0 {
				t.Errorf("patches after the end: %v", w.last.Patches)
			}
		})
	}
}

// TestClaimsHoldPreviousSources: each node's previous source is in its
// claim, written in the same patch as the assignment; undo puts it back
// and takes the claim off.
func TestClaimsHoldPreviousSources(t *testing.T) {
	w := newWorld(t, 9, percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	third := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "third", UID: "third-uid", KubeletConfigKey: "kubelet"}}
	for i, n := range w.nodes {
		if i%3 == 0 {
			v := mustJSON(t, third)
			n.Assignment = &v
		}
	}
	start := map[string]*string{}
	for _, n := range w.nodes {
		start[n.Name] = n.Assignment
	}
	w.plan()
	for _, p := range w.last.Patches {
		if p.ClaimOnly || p.Claim == nil {
			t.Fatalf("assignment of %s without its claim in the same patch: %+v", p.Node, p)
		}
	}
	for _, n := range w.nodes {
		c := w.claim(n)
		want, _ := parseAssignment(start[n.Name])
		if c == nil || !sameSource(c.Previous, want) {
			t.Errorf("node %s: claim %+v, want previous %v", n.Name, c, want)
		}
	}
	w.r.Spec.Undo = true
	w.plan()
	for _, n := range w.nodes {
		if !sameAssignment(n.Assignment, start[n.Name]) || n.Claim != nil {
			t.Errorf("node %s after undo: %s, claim %v; want %s and no claim", n.Name, describeAnnotation(n.Assignment), n.Claim, describeAnnotation(start[n.Name]))
		}
	}
	w.plan()
	if !w.last.Finalized || w.r.Status.Reverting != 0 {
		t.Errorf("after the reverts: finalized %v, reverting %d", w.last.Finalized, w.r.Status.Reverting)
	}
}

// TestStatusDoesNotGrowWithTheFleet: the status of a rollout over 5000
// nodes is as small as one over 50 (counts, a bounded failure list, the
// steps), also with every node failed.
func TestStatusDoesNotGrowWithTheFleet(t *testing.T) {
	size := func(n int, failAll bool) int {
		w := newWorld(t, n, percentStep("50%"), percentStep("100%"))
		w.r.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		w.r.Spec.MaxFailures = int32(n)
		w.plan()
		for _, node := range w.nodes {
			if w.carriesNew(node) {
				if failAll {
					w.fail(node.Name)
				} else {
					w.promote(node.Name)
				}
			}
		}
		w.runToEnd(10)
		return len(mustJSON(t, w.r.Status))
	}
	for _, failAll := range []bool{false, true} {
		small, big := size(50, failAll), size(5000, failAll)
		if big > small+200 || big > 16<<10 {
			t.Errorf("failing all %v: status of 50 nodes %d bytes, of 5000 nodes %d bytes: it grows with the fleet", failAll, small, big)
		}
	}
}

// legacyWorld is a rollout an older controller ran: status.nodes records
// (previousIndex into previousSources, or the full previous source), nodes
// that carry the rollout's assignment and no claim.
func legacyWorld(t *testing.T, fullPrevious bool) *world {
	w := newWorld(t, 4, percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	w.r.Status = v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing, ConfigMap: &v1alpha1.ConfigMapRef{UID: cmUID, ResourceVersion: "10"},
		PreviousSources: []corev1.NodeConfigSource{*oldSource()}}
	ours := mustJSON(t, Assignment(w.r, cmUID))
	for i, n := range w.nodes {
		rec := v1alpha1.NodeRecord{Name: n.Name, State: v1alpha1.NodeTrial, AssignedAt: metav1.NewTime(t0)}
		if i%2 == 1 {
			rec.PreviousIndex = ptr.To(int32(0))
			if fullPrevious {
				rec.PreviousIndex, rec.Previous = nil, oldSource()
			}
		}
		if i == 3 {
			rec.State, rec.Reason = v1alpha1.NodeFailed, "kubelet reports RolledBack"
		}
		v := ours
		n.Assignment = &v
		w.r.Status.Nodes = append(w.r.Status.Nodes, rec)
	}
	if fullPrevious {
		w.r.Status.PreviousSources = nil
	}
	w.r.Spec.MaxFailures = 1
	return w
}

// TestLegacyRecordsRevert: the records of today's controller (status.nodes
// with previousIndex or previous) still revert, and a record is only
// dropped once its node carries it as a claim.
func TestLegacyRecordsRevert(t *testing.T) {
	for _, full := range []bool{false, true} {
		w := legacyWorld(t, full)
		w.r.Spec.Undo = true
		w.plan()
		if len(w.r.Status.Nodes) != 4 {
			t.Fatalf("full %v: %d records left before the reverts were seen, want 4", full, len(w.r.Status.Nodes))
		}
		w.plan()
		for _, n := range w.nodes {
			odd := n.Name[len(n.Name)-1]%2 == 1
			if odd && !carries(n, oldSource()) || !odd && n.Assignment != nil {
				t.Errorf("full %v: node %s carries %s after undo", full, n.Name, describeAnnotation(n.Assignment))
			}
		}
		if len(w.r.Status.Nodes) != 0 || len(w.r.Status.PreviousSources) != 0 || !w.last.Finalized {
			t.Errorf("full %v: after the reverts %d records, %d previous sources, finalized %v", full, len(w.r.Status.Nodes), len(w.r.Status.PreviousSources), w.last.Finalized)
		}
		if w.r.Status.Failed != 1 {
			t.Errorf("full %v: failed %d, want 1 (the old record's failure still counts)", full, w.r.Status.Failed)
		}
	}
}

// TestLegacyRecordsMoveOntoNodes: an active rollout of today's controller
// writes each record as a claim on its node, then drops it; a later undo
// reverts from the claims.
func TestLegacyRecordsMoveOntoNodes(t *testing.T) {
	w := legacyWorld(t, false)
	w.plan()
	for _, p := range w.last.Patches {
		if !p.ClaimOnly || p.Claim == nil {
			t.Errorf("migration patch %+v: want the claim alone", p)
		}
	}
	if len(w.r.Status.Nodes) != 4 {
		t.Fatalf("%d records dropped before their claims were seen", 4-len(w.r.Status.Nodes))
	}
	w.plan()
	if len(w.r.Status.Nodes) != 0 || w.r.Status.Failed != 1 || len(w.r.Status.Failures) != 1 {
		t.Fatalf("after migration: %d records, failed %d, failures %v", len(w.r.Status.Nodes), w.r.Status.Failed, w.r.Status.Failures)
	}
	if c := w.claim(w.node("node-003")); c == nil || c.Failed != "kubelet reports RolledBack" {
		t.Fatalf("node-003's claim %+v does not keep its failure", c)
	}
	w.r.Spec.Undo = true
	w.plan()
	for _, n := range w.nodes {
		odd := n.Name[len(n.Name)-1]%2 == 1
		if odd && !carries(n, oldSource()) || !odd && n.Assignment != nil || n.Claim != nil {
			t.Errorf("node %s carries %s (claim %v) after undo", n.Name, describeAnnotation(n.Assignment), n.Claim)
		}
	}
}

// TestDamagedPreviousIndex: a record pointing outside previousSources is
// not reverted to a guess; the node is left alone and an event says why.
func TestDamagedPreviousIndex(t *testing.T) {
	w := legacyWorld(t, false)
	w.r.Status.Nodes[1].PreviousIndex = ptr.To(int32(7))
	w.r.Spec.Undo = true
	w.plan()
	for _, p := range w.last.Patches {
		if p.Node == "node-001" {
			t.Errorf("the damaged record's node was patched: %v", p)
		}
	}
	if !w.hasEvent("NodeFailed") {
		t.Errorf("no event says node-001 cannot be reverted: %v", w.last.Events)
	}
	if !w.carriesNew(w.node("node-001")) {
		t.Errorf("node-001 carries %s, want it left on the new source", describeAnnotation(w.node("node-001").Assignment))
	}
	if !carries(w.node("node-000"), nil) {
		t.Errorf("node-000 was not reverted")
	}
}

// TestSomeoneElseChangesANode: a node whose assignment someone else
// changes (another rollout on the same nodes, an operator) fails while the
// rollout is active, even after it promoted, and a revert leaves it as it
// is rather than overwrite their change.
func TestSomeoneElseChangesANode(t *testing.T) {
	other := mustJSON(t, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns2", Name: "other", UID: "other-uid", KubeletConfigKey: "kubelet"}})
	w := newWorld(t, 6, countStep(2), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	w.r.Spec.MaxFailures = 1
	w.plan()
	w.promoteAll()
	w.plan() // node-000, node-001 promoted; node-002, node-003 assigned
	if got := w.assigning(); !cmp.Equal(got, []string{"node-002", "node-003"}) {
		t.Fatalf("assigning %v", got)
	}
	// Another rollout takes a promoted node and an assigned one.
	for _, name := range []string{"node-000", "node-002"} {
		v := other
		w.node(name).Assignment = &v
	}
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	for _, p := range w.last.Patches {
		if (p.Node == "node-000" || p.Node == "node-002") && !p.ClaimOnly {
			t.Errorf("patched %s, which someone else assigned: %v", p.Node, p)
		}
	}
	if !w.hasEvent("NodeSuperseded") {
		t.Errorf("no NodeSuperseded event: %v", w.last.Events)
	}
	w.plan()
	got := w.states()
	want := map[v1alpha1.NodeState][]string{v1alpha1.NodeSuperseded: {"node-000", "node-002"}, v1alpha1.NodeReverted: {"node-001", "node-003"}}
	if !cmp.Equal(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	for _, name := range []string{"node-000", "node-002"} {
		if n := w.node(name); n.Assignment == nil || *n.Assignment != other {
			t.Errorf("%s carries %s, want the other rollout's", name, describeAnnotation(n.Assignment))
		}
	}
	if f := w.r.Status.Failures; len(f) != 2 || f[0].Node != "node-000" || !strings.Contains(f[0].Reason, "its assignment was changed by someone else (now ConfigMap ns2/other") {
		t.Errorf("failures: %+v", f)
	}
	if w.r.Status.Failed != 2 {
		t.Errorf("failed %d, want 2 (both changed nodes)", w.r.Status.Failed)
	}
}

// TestRepairCurrentStep: a currentStep out of range (an edited status)
// neither panics nor stalls: planning goes on from a step that exists.
func TestRepairCurrentStep(t *testing.T) {
	for _, c := range []struct {
		step  int32
		phase v1alpha1.RolloutPhase
	}{{-1, v1alpha1.PhaseProgressing}, {-2147483648, v1alpha1.PhaseProgressing}, {7, v1alpha1.PhaseCompleted}} {
		w := newWorld(t, 4, countStep(1), percentStep("100%"))
		w.plan()
		w.r.Status.CurrentStep = c.step
		w.plan()
		w.wantPhase(c.phase)
		if !w.hasEvent("StatusRepaired") {
			t.Errorf("currentStep %d: no StatusRepaired event: %v", c.step, w.last.Events)
		}
		if got := w.r.Status.CurrentStep; got < 0 || got > 2 {
			t.Errorf("currentStep %d repaired to %d", c.step, got)
		}
	}
}
