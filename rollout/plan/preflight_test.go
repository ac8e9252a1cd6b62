package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// answer has a node answer the rollout's pre-flight request.
func (w *world) answer(name string, verdict nodeapi.PreflightVerdict, fields ...string) {
	n := w.node(name)
	s := *n.Status
	s.Preflight = &nodeapi.PreflightResult{Candidate: newSource(), Verdict: verdict, Fields: fields}
	if verdict == nodeapi.PreflightFail {
		s.Preflight.Message = "maxPods: Invalid value: -1: must be positive"
	}
	n.Status = &s
}

// asks returns the nodes the last plan asked (pre-flight request patches).
func (w *world) asks() []string {
	var out []string
	for _, p := range w.last.Patches {
		if p.Preflight != nil {
			out = append(out, p.Node)
		}
	}
	return out
}

func (w *world) preflightCondition() *metav1.Condition {
	return meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionPreflight)
}

func preflightWorld(t *testing.T, policy v1alpha1.PreflightPolicy) *world {
	w := newWorld(t, 4, countStep(1), percentStep("100%"))
	w.r.Spec.Preflight = policy
	return w
}

// TestPreflightAsksOnceAndWaits: the first plan asks every selected node
// that runs the component, once, with the pinned candidate, and assigns
// nothing; a plan while answers are missing asks only a node that does
// not carry the request (its write failed) and assigns nothing; once all
// passed, the steps go on. A node that does not run the component is not
// asked.
func TestPreflightAsksOnceAndWaits(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightRequired)
	w.nodes[3].Status = nil // does not run the component
	w.plan()
	if got := w.asks(); strings.Join(got, ",") != "node-000,node-001,node-002" {
		t.Fatalf("first plan asked %v, want node-000..002", got)
	}
	if len(w.assigning()) != 0 || w.r.Status.Assigned != 0 {
		t.Fatalf("assigned before the pre-flight answers: %v", w.assigning())
	}
	req, err := nodeapi.DecodePreflightRequest(*w.node("node-000").Preflight)
	if err != nil || req.Holder() != "ns/ro" || req.UID != "ro-uid" || req.Candidate.ConfigMap.ResourceVersion != "10" || req.Candidate.ConfigMap.UID != cmUID {
		t.Fatalf("request %+v, %v: want ns/ro asking about %s at resourceVersion 10", req, err, cmUID)
	}
	if c := w.preflightCondition(); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != "Waiting" {
		t.Fatalf("Preflight condition %+v, want Unknown Waiting", c)
	}
	if pf := w.r.Status.Preflight; pf == nil || pf.Asked != 3 || pf.NoAnswer != 3 || pf.CompletedAt != nil {
		t.Fatalf("status.preflight %+v", pf)
	}

	// node-002's write was lost; node-000 answers.
	w.node("node-002").Preflight = nil
	w.answer("node-000", nodeapi.PreflightPass)
	w.now = w.now.Add(10 * time.Second)
	w.plan()
	if got := w.asks(); strings.Join(got, ",") != "node-002" {
		t.Fatalf("second plan asked %v, want only node-002 (the others carry the request)", got)
	}
	if len(w.assigning()) != 0 {
		t.Fatalf("assigned while answers are missing: %v", w.assigning())
	}
	if !strings.Contains(w.r.Status.Message, "1 of 3 nodes answered") {
		t.Errorf("message %q", w.r.Status.Message)
	}

	w.answer("node-001", nodeapi.PreflightPass)
	w.answer("node-002", nodeapi.PreflightPass)
	w.plan()
	if len(w.asks()) != 0 || len(w.assigning()) != 1 {
		t.Fatalf("after every answer: asked %v, assigned %v; want the canary assigned", w.asks(), w.assigning())
	}
	if c := w.preflightCondition(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Passed" {
		t.Fatalf("Preflight condition %+v, want True Passed", c)
	}
	if pf := w.r.Status.Preflight; pf.Passed != 3 || pf.CompletedAt == nil {
		t.Fatalf("status.preflight %+v", pf)
	}
	// Done: later plans never ask again, whatever the nodes say.
	w.node("node-001").Preflight = nil
	w.promoteAll()
	w.plan()
	if len(w.asks()) != 0 {
		t.Fatalf("asked %v after the check completed", w.asks())
	}
}

// TestPreflightRequiredHaltsOnOverridden: one node's drop-in overrides a
// field of the candidate: under Required the rollout halts before any
// node is assigned, naming the node and the field, and reverts nothing.
func TestPreflightRequiredHaltsOnOverridden(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightRequired)
	w.plan()
	for _, n := range []string{"node-000", "node-002", "node-003"} {
		w.answer(n, nodeapi.PreflightPass)
	}
	w.answer("node-001", nodeapi.PreflightOverridden, "maxPods (by /etc/kubernetes/kubelet.conf.d/zz-local.conf)")
	w.plan()
	w.wantPhase(v1alpha1.PhaseHalted)
	for _, p := range w.last.Patches {
		if p.Preflight == nil {
			t.Errorf("halted with a node patch %+v", p)
		}
	}
	if len(w.claims) != 0 || w.r.Status.Assigned != 0 {
		t.Fatalf("a node was claimed or assigned: %v", w.claims)
	}
	halted := meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionHalted)
	if halted == nil || halted.Reason != "PreflightFailed" || !strings.Contains(halted.Message, "node node-001 Overridden: maxPods (by /etc/kubernetes/kubelet.conf.d/zz-local.conf)") {
		t.Fatalf("Halted condition %+v: want PreflightFailed naming node-001 and maxPods", halted)
	}
	pf := w.r.Status.Preflight
	if pf.Overridden != 1 || pf.Passed != 3 || len(pf.Nodes) != 1 || pf.Nodes[0].Node != "node-001" || pf.Nodes[0].Fields[0] != "maxPods (by /etc/kubernetes/kubelet.conf.d/zz-local.conf)" {
		t.Fatalf("status.preflight %+v", pf)
	}
	if c := w.preflightCondition(); c.Status != metav1.ConditionFalse || c.Reason != "Failed" {
		t.Fatalf("Preflight condition %+v", c)
	}
	if !w.hasEvent("Halted") {
		t.Errorf("no Halted event: %+v", w.last.Events)
	}
	// Nothing ran the config: the halt does not make it known bad, and a
	// new rollout of it (once the drop-in is gone) starts.
	if HaltMarksBad(halted.Reason) {
		t.Errorf("a pre-flight halt marks the ConfigMap known bad")
	}
	next := preflightWorld(t, v1alpha1.PreflightRequired)
	next.r.Name, next.r.UID = "ro-2", "ro-2-uid"
	next.others = []Other{{Namespace: "ns", Name: "ro", UID: "ro-uid", Phase: v1alpha1.PhaseHalted, Started: true,
		ConfigMap: w.r.Status.ConfigMap, HaltReason: halted.Reason, HaltMessage: halted.Message}}
	next.plan()
	if next.r.Status.Phase != v1alpha1.PhaseProgressing || len(next.asks()) != 4 {
		t.Errorf("a new rollout of the ConfigMap: phase %s (%s), asked %v; want it to start and ask", next.r.Status.Phase, next.r.Status.Message, next.asks())
	}
}

// TestPreflightWarnGoesOn: under Warn, the nodes that failed or were
// overridden are named (status, condition, a Warning Event), and the
// rollout assigns as it would without the check.
func TestPreflightWarnGoesOn(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightWarn)
	w.plan()
	w.answer("node-000", nodeapi.PreflightPass)
	w.answer("node-001", nodeapi.PreflightOverridden, "maxPods (by zz.conf)")
	w.answer("node-002", nodeapi.PreflightFail)
	w.answer("node-003", nodeapi.PreflightPass)
	w.plan()
	w.wantPhase(v1alpha1.PhaseProgressing)
	if len(w.assigning()) != 1 {
		t.Fatalf("assigned %v, want the canary", w.assigning())
	}
	var warned string
	for _, e := range w.last.Events {
		if e.Reason == "PreflightWarning" && e.Warning {
			warned = e.Message
		}
	}
	for _, want := range []string{"2 of 4 nodes did not pass (1 failed, 1 overridden)", "node node-002 Fail: maxPods: Invalid value", "node node-001 Overridden: maxPods (by zz.conf)"} {
		if !strings.Contains(warned, want) {
			t.Errorf("PreflightWarning event %q does not say %q", warned, want)
		}
	}
	if nodes := w.r.Status.Preflight.Nodes; len(nodes) != 2 || nodes[0].Node != "node-002" || nodes[1].Node != "node-001" {
		t.Errorf("status.preflight.nodes %+v: want the failure first", nodes)
	}
	if c := w.preflightCondition(); c.Status != metav1.ConditionFalse || c.Reason != "Warnings" {
		t.Fatalf("Preflight condition %+v", c)
	}
	if got := w.runToEnd(50); w.r.Status.Phase != v1alpha1.PhaseCompleted {
		t.Fatalf("the rollout did not complete under Warn: %v, %s", got, w.r.Status.Message)
	}
}

// TestPreflightTimeout: a node that never answers (an agent older than
// the check). Under Warn the rollout waits until the timeout, not longer,
// and goes on naming it; under Required it halts at the timeout, naming it
// and saying it did not answer.
func TestPreflightTimeout(t *testing.T) {
	for _, policy := range []v1alpha1.PreflightPolicy{v1alpha1.PreflightWarn, v1alpha1.PreflightRequired} {
		t.Run(string(policy), func(t *testing.T) {
			w := preflightWorld(t, policy)
			w.r.Spec.PreflightTimeoutSeconds = ptr.To(int32(60))
			res := w.plan()
			if res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
				t.Errorf("RequeueAfter %v, want at most the timeout", res.RequeueAfter)
			}
			for _, n := range []string{"node-000", "node-001", "node-002"} {
				w.answer(n, nodeapi.PreflightPass)
			}
			w.now = t0.Add(59 * time.Second)
			w.plan()
			if len(w.assigning()) != 0 || w.r.Status.Phase != v1alpha1.PhaseProgressing {
				t.Fatalf("before the timeout: assigned %v, phase %s", w.assigning(), w.r.Status.Phase)
			}
			w.now = t0.Add(60 * time.Second)
			w.plan()
			pf := w.r.Status.Preflight
			if pf.NoAnswer != 1 || len(pf.Nodes) != 1 || pf.Nodes[0].Node != "node-003" || pf.Nodes[0].Verdict != v1alpha1.PreflightNoAnswer {
				t.Fatalf("status.preflight %+v", pf)
			}
			switch policy {
			case v1alpha1.PreflightWarn:
				w.wantPhase(v1alpha1.PhaseProgressing)
				if len(w.assigning()) != 1 {
					t.Fatalf("at the timeout under Warn: assigned %v, want the canary", w.assigning())
				}
			case v1alpha1.PreflightRequired:
				w.wantPhase(v1alpha1.PhaseHalted)
				if !strings.Contains(w.r.Status.Message, "node node-003 NoAnswer: no answer within 1m0s: its agent is older than the pre-flight check") {
					t.Fatalf("halt message %q", w.r.Status.Message)
				}
			}
		})
	}
}

// TestPreflightOnlyAtStart: a rollout that started before the check was
// set (or under an older controller: its status has no preflight) is not
// checked; Off asks nothing; Off set while the check waits ends the wait.
func TestPreflightOnlyAtStart(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightOff)
	w.plan()
	if len(w.asks()) != 0 || len(w.assigning()) != 1 || w.r.Status.Preflight != nil || w.preflightCondition() != nil {
		t.Fatalf("Off: asked %v, assigned %v, status %+v", w.asks(), w.assigning(), w.r.Status.Preflight)
	}
	w.r.Spec.Preflight = v1alpha1.PreflightRequired
	w.promoteAll()
	w.plan()
	if len(w.asks()) != 0 || w.r.Status.Preflight != nil {
		t.Fatalf("a started rollout was checked: asked %v", w.asks())
	}

	w = preflightWorld(t, v1alpha1.PreflightRequired)
	w.plan()
	w.r.Spec.Preflight = v1alpha1.PreflightOff
	w.plan()
	if len(w.assigning()) != 1 || w.r.Status.Preflight.CompletedAt == nil || w.preflightCondition().Reason != "Off" {
		t.Fatalf("Off while waiting: assigned %v, status %+v, condition %+v", w.assigning(), w.r.Status.Preflight, w.preflightCondition())
	}
}

// FuzzPlanPreflight feeds the pre-flight check what nodes control: the
// answer a node publishes (any status annotation value) and the request
// annotation it carries. Plan must not panic, must assign no node before
// the check completed, must patch a node at most once in a result, must
// ask only with the request annotation, and under Required must assign
// nothing once a node did not pass.
func FuzzPlanPreflight(f *testing.F) {
	cand := `{"configMap":{"namespace":"ns","name":"new","uid":"cm-uid-1","resourceVersion":"10","kubeletConfigKey":"kubelet"}}`
	f.Add(`{"phase":"Local","preflight":{"candidate":`+cand+`,"verdict":"Pass"}}`, "", true, 0)
	f.Add(`{"phase":"Local","preflight":{"candidate":`+cand+`,"verdict":"Overridden","fields":["maxPods (by zz.conf)"]}}`, "x", true, 1)
	f.Add(`{"phase":"Local","preflight":{"candidate":`+cand+`,"verdict":"Maybe"}}`, "", false, 2)
	f.Add(`{"phase":"Local","preflight":{"verdict":"Fail","message":"no"}}`, "", false, 30)
	f.Add(`{"phase":`, "", true, 0)
	f.Fuzz(func(t *testing.T, published, request string, required bool, minutes int) {
		w := preflightWorld(t, v1alpha1.PreflightWarn)
		if required {
			w.r.Spec.Preflight = v1alpha1.PreflightRequired
		}
		for round := range 4 {
			for _, n := range w.nodes[1:] {
				n.Status.Preflight = &nodeapi.PreflightResult{Candidate: newSource(), Verdict: nodeapi.PreflightPass}
			}
			n := w.node("node-000")
			if s, err := nodeapi.ParseConfigStatus(published); err == nil {
				n.Status, n.StatusError = s, ""
			} else if round > 0 {
				n.Status, n.StatusError = nil, err.Error()
			}
			if round == 1 && request != "" {
				r := request
				n.Preflight = &r
			}
			res := w.plan()
			patched := map[string]bool{}
			for _, p := range res.Patches {
				if patched[p.Node] {
					t.Fatalf("patched %s twice in one result", p.Node)
				}
				patched[p.Node] = true
				if p.Preflight != nil {
					if p.Claim != nil || p.Value != nil || p.Revert {
						t.Fatalf("a pre-flight request patch changes more: %+v", p)
					}
					continue
				}
				pf := res.Status.Preflight
				if !p.Revert && (pf == nil || pf.CompletedAt == nil) {
					t.Fatalf("assigned %s before the pre-flight check completed (%+v)", p.Node, pf)
				}
				if !p.Revert && required && pf.Passed != pf.Asked {
					t.Fatalf("Required assigned %s though %d of %d nodes passed", p.Node, pf.Passed, pf.Asked)
				}
			}
			w.now = w.now.Add(time.Duration(minutes%180) * time.Minute)
		}
	})
}

// BenchmarkPlanPreflight5000 plans a rollout whose pre-flight check waits
// on 5000 selected nodes, half of which answered: the work of each
// reconcile while the check waits (every node event of the fleet plans
// it again).
func BenchmarkPlanPreflight5000(b *testing.B) {
	w := newWorld(b, 5000, countStep(1), percentStep("100%"))
	w.r.Spec.Preflight = v1alpha1.PreflightWarn
	w.plan()
	if len(w.asks()) != 5000 {
		b.Fatalf("set-up: %d asked", len(w.asks()))
	}
	for i, n := range w.nodes {
		if i%2 == 0 {
			s := *n.Status
			s.Preflight = &nodeapi.PreflightResult{Candidate: newSource(), Verdict: nodeapi.PreflightPass}
			n.Status = &s
		}
	}
	in := w.input()
	in.Memo = &Memo{}
	b.ReportAllocs()
	for b.Loop() {
		res := Plan(in)
		if pf := res.Status.Preflight; pf == nil || pf.NoAnswer != 2500 || len(res.Patches) != 0 {
			b.Fatalf("status.preflight %+v, %d patches", pf, len(res.Patches))
		}
	}
}

// TestPreflightLeavesOthersAlone: a node another live rollout holds (its
// claim) or asked (its request) is not asked: two rollouts never write
// over each other's request in turn. It counts as not answering, with
// why. A request of a rollout that ended is replaced.
func TestPreflightLeavesOthersAlone(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightWarn)
	w.r.Spec.PreflightTimeoutSeconds = ptr.To(int32(60))
	busy := &nodeapi.PreflightRequest{Namespace: "ns", Name: "busy", UID: "busy-uid", Candidate: newSource()}
	done := &nodeapi.PreflightRequest{Namespace: "ns", Name: "done", UID: "done-uid", Candidate: newSource()}
	w.others = []Other{
		{Namespace: "ns", Name: "busy", UID: "busy-uid", Phase: v1alpha1.PhaseProgressing, Started: true, Nodes: map[string]bool{}},
		{Namespace: "ns", Name: "done", UID: "done-uid", Phase: v1alpha1.PhaseCompleted, Started: true, Nodes: map[string]bool{}},
	}
	for name, r := range map[string]*nodeapi.PreflightRequest{"node-001": busy, "node-002": done} {
		v, err := nodeapi.EncodePreflightRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		w.node(name).Preflight = &v
	}
	claim := mustJSON(t, &nodeapi.Claim{Namespace: "ns", Name: "busy", UID: "busy-uid", AssignedAt: metav1.NewTime(t0)})
	w.node("node-003").Claim = &claim
	w.plan()
	if got := strings.Join(w.asks(), ","); got != "node-000,node-002" {
		t.Fatalf("asked %s, want node-000 and node-002 (the request of a rollout that ended)", got)
	}
	w.answer("node-000", nodeapi.PreflightPass)
	w.answer("node-002", nodeapi.PreflightPass)
	w.now = t0.Add(time.Minute)
	w.plan()
	pf := w.r.Status.Preflight
	if pf.CompletedAt == nil || pf.NoAnswer != 2 {
		t.Fatalf("status.preflight %+v", pf)
	}
	for _, np := range pf.Nodes {
		if !strings.HasPrefix(np.Message, "not asked: ") || !strings.Contains(np.Message, "ns/busy") {
			t.Errorf("node %s: %q, want it not asked because of ns/busy", np.Node, np.Message)
		}
	}
}

// TestPreflightEndsWithTheRollout: a rollout aborted while its check
// waits does not keep saying that it waits.
func TestPreflightEndsWithTheRollout(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightRequired)
	w.plan()
	w.answer("node-000", nodeapi.PreflightPass)
	w.r.Spec.Abort = true
	w.plan()
	w.wantPhase(v1alpha1.PhaseAborted)
	if c := w.preflightCondition(); c.Status != metav1.ConditionFalse || c.Reason != "RolloutEnded" || !strings.Contains(c.Message, "the rollout ended (Aborted) before the check completed") {
		t.Fatalf("Preflight condition %+v", c)
	}
	if w.r.Status.Preflight.CompletedAt == nil {
		t.Fatalf("status.preflight %+v still waits", w.r.Status.Preflight)
	}
}

// TestPreflightStatusFieldsBounded: a node's fields are cut in the
// rollout's status (the node's own annotation keeps them all), so that
// sixteen nodes that did not pass keep the status small.
func TestPreflightStatusFieldsBounded(t *testing.T) {
	w := preflightWorld(t, v1alpha1.PreflightWarn)
	w.plan()
	var many []string
	for i := range nodeapi.MaxPreflightFields {
		many = append(many, fmt.Sprintf("featureGates[Gate%02d%s] (by zz.conf)", i, strings.Repeat("x", 400)))
	}
	for _, n := range w.nodes {
		w.answer(n.Name, nodeapi.PreflightOverridden, many...)
	}
	w.plan()
	for _, np := range w.r.Status.Preflight.Nodes {
		if len(np.Fields) != maxStatusFields || !strings.HasPrefix(np.Fields[maxStatusFields-1], "and 9 more") {
			t.Fatalf("node %s: %d fields, last %q", np.Node, len(np.Fields), np.Fields[len(np.Fields)-1])
		}
		for _, f := range np.Fields {
			if len(f) > maxStatusFieldBytes {
				t.Fatalf("a %d-byte field in the status", len(f))
			}
		}
	}
}
