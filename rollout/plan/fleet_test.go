package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// planIn is world.plan with an Input edited first (BadReports, ...).
func (w *world) planIn(edit func(*Input)) Result {
	w.t.Helper()
	in := w.input()
	edit(&in)
	res := Plan(in)
	w.r.Status = res.Status
	for _, p := range res.Patches {
		w.apply(p)
		if !p.ClaimOnly {
			w.patches[p.Node]++
		}
	}
	w.last = res
	return res
}

func condition(st *v1alpha1.ConfigRolloutStatus, t string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, t)
}

func wantContains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s %q does not say %q", what, got, w)
		}
	}
}

// TestNotRunningNodes: a selected node that carries no status of the
// component is said at once (count, condition naming it, an Event), never
// assigned, never failed, not waited for at the progress deadline, and
// joins once its component publishes a status.
func TestNotRunningNodes(t *testing.T) {
	w := newWorld(t, 5, percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(5))
	w.node("node-001").Status = nil
	w.node("node-003").Status = nil
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	st := &w.r.Status
	if st.NotRunning != 2 || slices.Contains(w.assigning(), "node-001") || slices.Contains(w.assigning(), "node-003") || len(w.assigning()) != 3 {
		t.Fatalf("notRunning %d, assigning %v", st.NotRunning, w.assigning())
	}
	c := condition(st, v1alpha1.ConditionComponentNotRunning)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("condition %+v", c)
	}
	wantContains(t, "condition", c.Message, "node-001", "node-003", nodeapi.StatusAnnotation, "not counted as failed")
	if !w.hasEvent("ComponentNotRunning") {
		t.Errorf("no ComponentNotRunning event: %+v", w.last.Events)
	}
	// Far past the progress deadline: nothing fails; the step, counted on
	// the nodes that run the component, completes.
	w.now = w.now.Add(3 * DefaultProgressDeadline)
	w.promoteAll()
	w.plan()
	w.wantPhase(v1alpha1.PhaseCompleted)
	if st.Failed != 0 || st.Promoted != 3 {
		t.Fatalf("failed %d, promoted %d (%s)", st.Failed, st.Promoted, st.Message)
	}
	if w.hasEvent("ComponentNotRunning") {
		t.Errorf("the event repeats: %+v", w.last.Events)
	}

	// In a rollout still under way, a node whose component starts later
	// joins it.
	w = newWorld(t, 3, percentStep("100%"))
	w.node("node-002").Status = nil
	w.plan()
	w.node("node-002").Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal}
	w.runToEnd(10)
	w.wantPhase(v1alpha1.PhaseCompleted)
	if w.r.Status.Promoted != 3 || w.r.Status.NotRunning != 0 || condition(&w.r.Status, v1alpha1.ConditionComponentNotRunning).Status != metav1.ConditionFalse {
		t.Fatalf("promoted %d, notRunning %d", w.r.Status.Promoted, w.r.Status.NotRunning)
	}

	// An unreadable status is a running component (it wrote something):
	// assigned, as before.
	w = newWorld(t, 1, percentStep("100%"))
	w.node("node-000").Status, w.node("node-000").StatusError = nil, "decoding the config status: EOF"
	w.plan()
	if len(w.assigning()) != 1 || w.r.Status.NotRunning != 0 {
		t.Fatalf("assigning %v, notRunning %d", w.assigning(), w.r.Status.NotRunning)
	}
}

// TestNoSelectedNodeRunsTheComponent: a misspelt component (no selected
// node carries its status) is refused at once, saying why.
func TestNoSelectedNodeRunsTheComponent(t *testing.T) {
	w := newWorld(t, 3, percentStep("100%"))
	w.r.Spec.Component = "kubelte"
	for _, n := range w.nodes {
		n.Status = nil
	}
	w.plan()
	w.wantPhase(v1alpha1.PhasePending)
	if len(w.last.Patches) != 0 || w.r.Status.ConfigMap != nil {
		t.Fatalf("patches %v, pinned %v", w.last.Patches, w.r.Status.ConfigMap)
	}
	wantContains(t, "message", w.r.Status.Message, `none of the 3 selected nodes runs component "kubelte"`,
		nodeapi.StatusAnnotationFor("kubelte"), "spec.component", "spec.nodeSelector")
	c := condition(&w.r.Status, v1alpha1.ConditionRefused)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ComponentNotRunning" {
		t.Fatalf("Refused condition %+v", c)
	}
	if !w.hasEvent("ComponentNotRunning") || w.r.Status.NotRunning != 3 {
		t.Errorf("events %+v, notRunning %d", w.last.Events, w.r.Status.NotRunning)
	}
	// Planned again, unchanged: no new Event.
	w.plan()
	if len(w.last.Events) != 0 {
		t.Errorf("events repeat: %+v", w.last.Events)
	}
	// No selected node at all is no typo: nothing to do, done.
	w = newWorld(t, 0, percentStep("100%"))
	w.runToEnd(3)
	w.wantPhase(v1alpha1.PhaseCompleted)
}

// TestMutableConfigMapRefused: a rollout starts on an immutable ConfigMap
// only, and says how to make it so.
func TestMutableConfigMapRefused(t *testing.T) {
	w := newWorld(t, 2, percentStep("100%"))
	w.cm.Immutable = false
	w.plan()
	w.wantPhase(v1alpha1.PhasePending)
	if len(w.last.Patches) != 0 || w.r.Status.ConfigMap != nil {
		t.Fatalf("patches %v", w.last.Patches)
	}
	wantContains(t, "message", w.r.Status.Message, "ConfigMap ns/new is not immutable", `kubectl patch configmap -n ns new --type merge -p '{"immutable":true}'`, "--make-immutable")
	if c := condition(&w.r.Status, v1alpha1.ConditionRefused); c == nil || c.Reason != "ConfigMapMutable" || c.Status != metav1.ConditionTrue {
		t.Fatalf("Refused %+v", c)
	}
	// Made immutable (a new resourceVersion): it starts, on that version.
	w.cm = &ConfigMap{UID: cmUID, ResourceVersion: "11", HasKey: true, Immutable: true}
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if w.r.Status.ConfigMap.ResourceVersion != "11" || condition(&w.r.Status, v1alpha1.ConditionRefused).Status != metav1.ConditionFalse {
		t.Fatalf("pinned %+v", w.r.Status.ConfigMap)
	}
}

func haltedOn(name, reason string, uid, rv string) Other {
	return Other{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Component: "kubelet", Phase: v1alpha1.PhaseHalted, Started: true,
		ConfigMap: &v1alpha1.ConfigMapRef{UID: types.UID(uid), ResourceVersion: rv}, HaltReason: reason, HaltMessage: "1 nodes failed, more than maxFailures 0: node-x: kubelet reports RolledBack"}
}

// TestKnownBadRefused: a ConfigMap a halted rollout pinned, or that
// nodes report bad, is refused unless spec.allowKnownBad; the refusal
// names the halted rollout and the nodes.
func TestKnownBadRefused(t *testing.T) {
	w := newWorld(t, 2, percentStep("100%"))
	w.others = []Other{haltedOn("first", "TooManyFailures", string(cmUID), "10")}
	w.plan()
	w.wantPhase(v1alpha1.PhasePending)
	if len(w.last.Patches) != 0 {
		t.Fatalf("patches %v", w.last.Patches)
	}
	wantContains(t, "message", w.r.Status.Message, "known bad", "ConfigRollout ns/first halted on it (TooManyFailures", "spec.allowKnownBad")
	if c := condition(&w.r.Status, v1alpha1.ConditionRefused); c == nil || c.Reason != "KnownBad" {
		t.Fatalf("Refused %+v", c)
	}
	// Forced: it starts.
	w.r.Spec.AllowKnownBad = true
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)

	// Undone after the halt (phase Reverted, Halted still True): still
	// known bad.
	undone := haltedOn("undone", "TooManyFailures", string(cmUID), "10")
	undone.Phase = v1alpha1.PhaseReverted
	w = newWorld(t, 2, percentStep("100%"))
	w.others = []Other{undone}
	w.plan()
	w.wantPhase(v1alpha1.PhasePending)
	wantContains(t, "message", w.r.Status.Message, "ConfigRollout ns/undone halted on it")

	// A halt that says nothing about the config does not mark it; another
	// ConfigMap's halt neither; a rollout that never halted neither.
	completed := haltedOn("completed", "", string(cmUID), "10")
	completed.Phase = v1alpha1.PhaseCompleted
	w = newWorld(t, 2, percentStep("100%"))
	w.others = []Other{completed}
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	for _, o := range []Other{haltedOn("edited", "ConfigMapChanged", string(cmUID), "10"), haltedOn("invalid", "InvalidSpec", string(cmUID), "10"),
		haltedOn("other", "TooManyFailures", "other-uid", "10")} {
		w = newWorld(t, 2, percentStep("100%"))
		w.others = []Other{o}
		w.plan()
		w.wantPhase(v1alpha1.PhaseProgressing)
	}
	// The same immutable ConfigMap at another resourceVersion (a label
	// edit) is the same config.
	w = newWorld(t, 2, percentStep("100%"))
	w.others = []Other{haltedOn("first", "TooManyFailures", string(cmUID), "7")}
	w.plan()
	w.wantPhase(v1alpha1.PhasePending)

	// Nodes that report it bad, across the fleet.
	report := func(node string) BadReport {
		return BadReport{Node: node, UID: cmUID, ResourceVersion: "10", Phase: nodeapi.PhaseRolledBack, Error: "failed to apply: maxPods"}
	}
	w = newWorld(t, 2, percentStep("100%"))
	w.planIn(func(in *Input) { in.BadReports = []BadReport{report("elsewhere-1"), report("elsewhere-2")} })
	w.wantPhase(v1alpha1.PhasePending)
	wantContains(t, "message", w.r.Status.Message, "2 nodes report it bad", "elsewhere-1 (RolledBack: failed to apply: maxPods)")
	// One report is enough by default.
	w = newWorld(t, 2, percentStep("100%"))
	w.planIn(func(in *Input) { in.BadReports = []BadReport{report("elsewhere-1")} })
	w.wantPhase(v1alpha1.PhasePending)
	// Below the threshold: not refused.
	w = newWorld(t, 2, percentStep("100%"))
	w.planIn(func(in *Input) { in.BadReports = []BadReport{report("elsewhere-1")}; in.KnownBadNodes = 2 })
	w.wantPhase(v1alpha1.PhaseProgressing)
	// Once started, what the fleet learns does not stop it (a halt does).
	w.planIn(func(in *Input) { in.BadReports = []BadReport{report("a"), report("b")} })
	w.wantPhase(v1alpha1.PhaseProgressing)
}

func TestBadReportOf(t *testing.T) {
	src := newSource()
	src.ConfigMap.ResourceVersion = "10"
	for _, tc := range []struct {
		st   *nodeapi.ConfigStatus
		want bool
	}{
		{nil, false},
		{&nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack, Assigned: src}, true},
		{&nodeapi.ConfigStatus{Phase: nodeapi.PhaseDeadEnd, Assigned: src}, true},
		{&nodeapi.ConfigStatus{Phase: nodeapi.PhaseSyncFailed, Assigned: src}, false},
		{&nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: src, Active: src}, false},
		{&nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack}, false},
	} {
		got := BadReportOf("n", tc.st)
		if (got != nil) != tc.want || (got != nil && (got.UID != cmUID || got.ResourceVersion != "10")) {
			t.Errorf("%+v: got %+v", tc.st, got)
		}
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWindowsOnAFakeClock: outside spec.windows no node is assigned; the
// rollout is Paused naming the next window and asks to be planned when it
// opens; inside, it goes on; when the window closes, it waits again
// (nodes in trial are still followed).
func TestWindowsOnAFakeClock(t *testing.T) {
	w := newWorld(t, 4, countStep(1), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(4))
	// Mondays 22:00 to Tuesdays 02:00, New York time.
	w.r.Spec.Windows = []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Mon"}, Start: "22:00", End: "02:00", TimeZone: "America/New_York"}}
	ny := mustZone(t, "America/New_York")
	w.now = time.Date(2026, 1, 5, 21, 0, 0, 0, ny) // a Monday, 21:00 EST
	res := w.plan()
	w.wantPhase(v1alpha1.PhasePaused)
	open := time.Date(2026, 1, 5, 22, 0, 0, 0, ny)
	if len(w.assigning()) != 0 || res.RequeueAfter != time.Hour || w.r.Status.NextWindow == nil || !w.r.Status.NextWindow.Time.Equal(open) {
		t.Fatalf("assigning %v, requeue %v, next %v", w.assigning(), res.RequeueAfter, w.r.Status.NextWindow)
	}
	wantContains(t, "message", w.r.Status.Message, "outside the maintenance windows", "2026-01-06T03:00:00Z", "Mon 22:00-02:00 America/New_York")
	if !w.hasEvent("OutsideWindow") {
		t.Errorf("no OutsideWindow event")
	}
	w.plan()
	if w.hasEvent("OutsideWindow") {
		t.Errorf("the event repeats")
	}
	// The window opens: the canary is assigned; the rollout asks to be
	// planned when it closes.
	w.now = open
	res = w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if len(w.assigning()) != 1 || w.r.Status.NextWindow != nil || res.RequeueAfter > 4*time.Hour {
		t.Fatalf("assigning %v, next %v, requeue %v", w.assigning(), w.r.Status.NextWindow, res.RequeueAfter)
	}
	// Past midnight, still in Monday's window: step 1 goes on.
	w.promoteAll()
	w.now = time.Date(2026, 1, 6, 1, 59, 0, 0, ny)
	res = w.plan()
	if len(w.assigning()) != 3 || res.RequeueAfter != time.Minute {
		t.Fatalf("assigning %v at 01:59, requeue %v (want the window's close, in a minute)", w.assigning(), res.RequeueAfter)
	}
	// Closed at 02:00 with nodes in trial: they are followed (promoted),
	// no new node would be assigned, and it waits for next Monday.
	w = newWorld(t, 4, countStep(1), percentStep("100%"))
	w.r.Spec.Windows = []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Mon"}, Start: "22:00", End: "02:00", TimeZone: "America/New_York"}}
	w.now = open
	w.plan()
	w.now = time.Date(2026, 1, 6, 2, 0, 0, 0, ny)
	w.promoteAll()
	w.plan()
	w.wantPhase(v1alpha1.PhasePaused)
	if len(w.assigning()) != 0 || w.r.Status.Promoted != 1 || !w.r.Status.NextWindow.Time.Equal(time.Date(2026, 1, 12, 22, 0, 0, 0, ny)) {
		t.Fatalf("assigning %v, promoted %d, next %v", w.assigning(), w.r.Status.Promoted, w.r.Status.NextWindow)
	}
	// A failure still halts it outside the window.
	w.fail("node-000")
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
}

func TestWindowsDST(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	at := func(ws []v1alpha1.MaintenanceWindow, now time.Time) WindowState {
		t.Helper()
		st, err := Windows(ws, now)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	// Sunday 2026-03-29: Berlin's clocks jump from 02:00 CET to 03:00 CEST
	// (01:00 UTC).
	win := []v1alpha1.MaintenanceWindow{{Start: "02:30", End: "04:00", TimeZone: "Europe/Berlin"}}
	st := at(win, utc("2026-03-29T00:00:00Z"))
	if st.Open || !st.Next.Equal(utc("2026-03-29T01:30:00Z")) { // 03:30 CEST
		t.Errorf("spring forward: %+v", st)
	}
	if st := at(win, utc("2026-03-29T01:45:00Z")); !st.Open || !st.Until.Equal(utc("2026-03-29T02:00:00Z")) {
		t.Errorf("spring forward, 03:45 CEST: %+v", st)
	}
	// A window wholly in the skipped hour is shifted later by the change:
	// 03:00-03:45 CEST.
	skipped := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sun"}, Start: "02:00", End: "02:45", TimeZone: "Europe/Berlin"}}
	if st := at(skipped, utc("2026-03-28T23:00:00Z")); st.Open || !st.Next.Equal(utc("2026-03-29T01:00:00Z")) {
		t.Errorf("skipped hour: %+v", st)
	}
	if st := at(skipped, utc("2026-03-29T01:40:00Z")); !st.Open || !st.Until.Equal(utc("2026-03-29T01:45:00Z")) {
		t.Errorf("skipped hour, 03:40 CEST: %+v", st)
	}
	// A window that ends where the skipped hour ends is empty that day.
	gone := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sun"}, Start: "02:00", End: "03:00", TimeZone: "Europe/Berlin"}}
	if st := at(gone, utc("2026-03-29T00:59:00Z")); st.Open || !st.Next.Equal(time.Date(2026, 4, 5, 2, 0, 0, 0, berlin)) {
		t.Errorf("02:00-03:00 on the spring-forward day: %+v", st)
	}
	// The next Sunday, the same hours in CEST.
	if st := at(skipped, utc("2026-03-29T02:00:00Z")); st.Open || !st.Next.Equal(time.Date(2026, 4, 5, 2, 0, 0, 0, berlin)) {
		t.Errorf("next Sunday: %+v", st)
	}
	// Sunday 2026-10-25: 03:00 CEST falls back to 02:00 CET (01:00 UTC);
	// 02:00-03:00 is taken the second time (01:00-02:00 UTC).
	back := []v1alpha1.MaintenanceWindow{{Start: "02:00", End: "03:00", TimeZone: "Europe/Berlin"}}
	if st := at(back, utc("2026-10-25T00:30:00Z")); st.Open || !st.Next.Equal(utc("2026-10-25T01:00:00Z")) {
		t.Errorf("fall back, first 02:30: %+v", st)
	}
	if st := at(back, utc("2026-10-25T01:30:00Z")); !st.Open || !st.Until.Equal(utc("2026-10-25T02:00:00Z")) {
		t.Errorf("fall back, second 02:30: %+v", st)
	}
	// Local days: a Saturday window in Auckland is Friday in UTC.
	sat := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sat"}, Start: "09:00", End: "10:00", TimeZone: "Pacific/Auckland"}}
	if st := at(sat, utc("2026-01-02T20:30:00Z")); !st.Open { // Friday 20:30 UTC = Saturday 09:30 NZDT
		t.Errorf("Auckland Saturday: %+v", st)
	}
	// Local days behind UTC: a Sunday 23:00 to Monday 22:59 window in
	// Honolulu (UTC-10), seen on Monday 20:00 there (Tuesday 06:00 UTC).
	long := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sun"}, Start: "23:00", End: "22:59", TimeZone: "Pacific/Honolulu"}}
	if st := at(long, utc("2026-01-06T06:00:00Z")); !st.Open || !st.Until.Equal(utc("2026-01-06T08:59:00Z")) {
		t.Errorf("Honolulu: %+v", st)
	}
	// Start equal to end: the whole day.
	if st := at([]v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Fri"}, Start: "00:00", End: "00:00"}}, utc("2026-01-02T23:59:00Z")); !st.Open {
		t.Errorf("whole Friday: %+v", st)
	}
}

// TestInvalidWindow: an unknown zone keeps the rollout Paused and names
// the field; fixing the spec lets it go on.
func TestInvalidWindow(t *testing.T) {
	w := newWorld(t, 2, percentStep("100%"))
	w.r.Spec.Windows = []v1alpha1.MaintenanceWindow{{Start: "00:00", End: "00:00", TimeZone: "Europe/Berln"}}
	w.plan()
	w.wantPhase(v1alpha1.PhasePaused)
	wantContains(t, "message", w.r.Status.Message, `spec.windows[0].timeZone "Europe/Berln"`)
	if len(w.assigning()) != 0 || !w.hasEvent("InvalidWindow") {
		t.Fatalf("assigning %v, events %+v", w.assigning(), w.last.Events)
	}
	w.r.Spec.Windows[0].TimeZone = "Europe/Berlin"
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	for _, bad := range []v1alpha1.MaintenanceWindow{{Start: "24:00", End: "01:00"}, {Start: "1:00", End: "02:00"}, {Start: "01:00", End: "02:60"}, {Start: "01:00", End: "02:00", Days: []v1alpha1.Weekday{"Monday"}}} {
		if _, err := Windows([]v1alpha1.MaintenanceWindow{bad}, t0); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
