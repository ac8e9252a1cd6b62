package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// pdbs is a test's view of the budgets: the budgets, and the pods on each
// node that they select. Pods are named by the budgets that select them.
type pdbs struct {
	budgets []Budget
	pods    map[string][]Pod
	failing map[string]bool // nodes whose pods cannot be read
	unknown string
	asked   []string // the nodes PodsOn was asked about, in order
}

func (f *pdbs) disruption() *Disruption {
	return &Disruption{Budgets: f.budgets, Unknown: f.unknown, PodsOn: func(node string) ([]Pod, error) {
		f.asked = append(f.asked, node)
		if f.failing[node] {
			return nil, errors.New("the API server said no")
		}
		return f.pods[node], nil
	}}
}

// ready and notReady are pods selected by the budgets of the given
// indexes.
func ready(budgets ...int) Pod    { return Pod{Budgets: budgets, Ready: true} }
func notReady(budgets ...int) Pod { return Pod{Budgets: budgets} }

// planBudgets is world.plan with the budgets as input.
func (w *world) planBudgets(d *Disruption) Result {
	w.t.Helper()
	return w.planIn(func(in *Input) { in.Disruption = d })
}

func budgetCondition(w *world) *metav1.Condition {
	return meta.FindStatusCondition(w.r.Status.Conditions, v1alpha1.ConditionDisruptionBudget)
}

// TestDisruptionBudgets: one assignment round, rule by rule.
func TestDisruptionBudgets(t *testing.T) {
	web := Budget{Namespace: "shop", Name: "web", Allowed: 1}
	db := Budget{Namespace: "shop", Name: "db", Allowed: 0}
	for _, tc := range []struct {
		name           string
		nodes          int
		maxUnavailable int32
		policy         v1alpha1.DisruptionBudgetPolicy
		f              pdbs
		want           []string // nodes assigned
		reason         string   // the DisruptionBudget condition's reason; "" for none
		message        []string // what its message says
	}{
		{
			name: "the two replicas of a minAvailable 1 budget: one node per round even with maxUnavailable 2",
			// minAvailable 1 over 2 Ready replicas: the disruption
			// controller allows 1.
			nodes: 2, maxUnavailable: 2,
			f:      pdbs{budgets: []Budget{web}, pods: map[string][]Pod{"node-000": {ready(0)}, "node-001": {ready(0)}}},
			want:   []string{"node-000"},
			reason: "Held", message: []string{"held by PodDisruptionBudget shop/web: 1 nodes wait: node node-001 (1 Ready pods of shop/web, which allows 1 disruptions: 0 left"},
		},
		{
			name: "knob off: both", nodes: 2, maxUnavailable: 2, policy: v1alpha1.DisruptionBudgetsIgnore,
			f:      pdbs{budgets: []Budget{web}, pods: map[string][]Pod{"node-000": {ready(0)}, "node-001": {ready(0)}}},
			want:   []string{"node-000", "node-001"},
			reason: "Ignored",
		},
		{
			name: "Respect spelt out is the default", nodes: 2, maxUnavailable: 2, policy: v1alpha1.DisruptionBudgetsRespect,
			f:      pdbs{budgets: []Budget{web}, pods: map[string][]Pod{"node-000": {ready(0)}, "node-001": {ready(0)}}},
			want:   []string{"node-000"},
			reason: "Held",
		},
		{
			name: "a budget that allows 0 holds every node with a Ready pod of it, and is named", nodes: 3, maxUnavailable: 3,
			f:      pdbs{budgets: []Budget{db}, pods: map[string][]Pod{"node-000": {ready(0)}, "node-002": {ready(0), ready(0)}}},
			want:   []string{"node-001"},
			reason: "Held", message: []string{"held by PodDisruptionBudget shop/db: 2 nodes wait", "node node-000 (1 Ready pods of shop/db, which allows 0 disruptions"},
		},
		{
			name: "a pod that is not Ready is disrupted already: a budget at 0 does not hold its node", nodes: 1, maxUnavailable: 1,
			f:      pdbs{budgets: []Budget{db}, pods: map[string][]Pod{"node-000": {notReady(0)}}},
			want:   []string{"node-000"},
			reason: "WithinBudgets",
		},
		{
			name: "pods no budget selects are free", nodes: 2, maxUnavailable: 2,
			f:      pdbs{budgets: []Budget{db}, pods: map[string][]Pod{}},
			want:   []string{"node-000", "node-001"},
			reason: "WithinBudgets",
		},
		{
			name: "a node whose pods exceed what is left is held; a later smaller one fits", nodes: 3, maxUnavailable: 3,
			f: pdbs{budgets: []Budget{{Namespace: "shop", Name: "cache", Allowed: 2}}, pods: map[string][]Pod{
				"node-000": {ready(0), ready(0), ready(0)}, "node-001": {ready(0)}, "node-002": {ready(0)},
			}},
			want:   []string{"node-001", "node-002"},
			reason: "Held", message: []string{"node node-000 (3 Ready pods of shop/cache, which allows 2 disruptions: 2 left"},
		},
		{
			name: "a pod of two budgets counts against both; only the short one is named", nodes: 2, maxUnavailable: 2,
			f: pdbs{budgets: []Budget{{Namespace: "a", Name: "wide", Allowed: 5}, {Namespace: "a", Name: "narrow", Allowed: 1}},
				pods: map[string][]Pod{"node-000": {ready(0, 1)}, "node-001": {ready(0, 1)}}},
			want:   []string{"node-000"},
			reason: "Held", message: []string{"held by PodDisruptionBudget a/narrow: 1 nodes wait"},
		},
		{
			name: "budgets not known: nothing is assigned", nodes: 2, maxUnavailable: 2,
			f:      pdbs{unknown: "the PodDisruptionBudget cache has not synced"},
			reason: "BudgetsUnknown", message: []string{"not known: the PodDisruptionBudget cache has not synced"},
		},
		{
			name: "budgets not known, knob off: assigned", nodes: 2, maxUnavailable: 2, policy: v1alpha1.DisruptionBudgetsIgnore,
			f:      pdbs{unknown: "forbidden"},
			want:   []string{"node-000", "node-001"},
			reason: "Ignored",
		},
		{
			name: "a node whose pods cannot be read is held; the others go", nodes: 2, maxUnavailable: 2,
			f:      pdbs{budgets: []Budget{web}, failing: map[string]bool{"node-000": true}},
			want:   []string{"node-001"},
			reason: "Held", message: []string{"held by their pods: 1 nodes wait: node node-000 (its pods could not be read: the API server said no)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.nodes, percentStep("100%"))
			w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(tc.maxUnavailable))
			w.r.Spec.PodDisruptionBudgets = tc.policy
			res := w.planBudgets(tc.f.disruption())
			if diff := cmp.Diff(tc.want, w.assigning()); diff != "" {
				t.Errorf("assigned (-want +got):\n%s", diff)
			}
			w.wantPhase(v1alpha1.PhaseProgressing)
			c := budgetCondition(w)
			switch {
			case tc.reason == "" && c != nil:
				t.Errorf("DisruptionBudget condition %+v, want none", c)
			case tc.reason != "" && (c == nil || c.Reason != tc.reason):
				t.Fatalf("DisruptionBudget condition %+v, want reason %s", c, tc.reason)
			}
			held := tc.reason == "Held" || tc.reason == "BudgetsUnknown"
			if held != (c.Status == metav1.ConditionTrue) {
				t.Errorf("DisruptionBudget condition status %s with reason %s", c.Status, c.Reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("DisruptionBudget message %q does not say %q", c.Message, m)
				}
				// The rollout's own message says it too.
				if held && !strings.Contains(w.r.Status.Message, m) {
					t.Errorf("status message %q does not say %q", w.r.Status.Message, m)
				}
			}
			if held && (res.RequeueAfter == 0 || res.RequeueAfter > DisruptionBudgetRequeue) {
				t.Errorf("RequeueAfter %v while nodes are held, want at most %v", res.RequeueAfter, DisruptionBudgetRequeue)
			}
			if held != w.hasEvent("HeldByDisruptionBudget") {
				t.Errorf("events %v: a HeldByDisruptionBudget event is wanted when (and only when) nodes are held", res.Events)
			}
		})
	}
}

// TestDisruptionBudgetTimeline: two nodes carry the only two replicas of
// a minAvailable 1 budget, maxUnavailable 2. The first node is assigned;
// the second waits while the first is in trial (its pod Ready, then not
// Ready across its kubelet's restart, when the disruption controller
// allows 0), and goes once the first promoted and its pod is Ready again.
// An Event says so once, not at every plan.
func TestDisruptionBudgetTimeline(t *testing.T) {
	w := newWorld(t, 2, percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	f := &pdbs{budgets: []Budget{{Namespace: "shop", Name: "web", Allowed: 1}},
		pods: map[string][]Pod{"node-000": {ready(0)}, "node-001": {ready(0)}}}
	type row struct {
		what     string
		allowed  int32
		pod0     Pod
		promote  bool
		want     []string
		held     bool
		newEvent bool
	}
	for i, r := range []row{
		{what: "first round", allowed: 1, pod0: ready(0), want: []string{"node-000"}, held: true, newEvent: true},
		{what: "node-000 in trial, its pod still Ready: it will be restarted", allowed: 1, pod0: ready(0), held: true},
		{what: "node-000 restarting, its pod not Ready: the budget allows 0", allowed: 0, pod0: notReady(0), held: true},
		{what: "node-000 promoted, its pod Ready again", allowed: 1, pod0: ready(0), promote: true, want: []string{"node-001"}},
	} {
		f.budgets[0].Allowed = r.allowed
		f.pods["node-000"] = []Pod{r.pod0}
		if r.promote {
			w.promote("node-000")
		}
		w.planBudgets(f.disruption())
		if diff := cmp.Diff(r.want, w.assigning()); diff != "" {
			t.Errorf("%d (%s): assigned (-want +got):\n%s", i, r.what, diff)
		}
		c := budgetCondition(w)
		if c == nil || (c.Status == metav1.ConditionTrue) != r.held {
			t.Errorf("%d (%s): DisruptionBudget condition %+v, want held %v", i, r.what, c, r.held)
		}
		if got := w.hasEvent("HeldByDisruptionBudget"); got != r.newEvent {
			t.Errorf("%d (%s): HeldByDisruptionBudget event %v, want %v (events %v)", i, r.what, got, r.newEvent, w.last.Events)
		}
		w.now = w.now.Add(10 * time.Second)
	}
	w.promoteAll()
	w.planBudgets(f.disruption())
	w.wantPhase(v1alpha1.PhaseCompleted)
}

// TestDisruptionBudgetReadsLazily: the pods of a node are read only when
// the node is considered: none when no room is left, and none past the
// nodes a round needs.
func TestDisruptionBudgetReadsLazily(t *testing.T) {
	w := newWorld(t, 10, percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	f := &pdbs{budgets: []Budget{{Namespace: "a", Name: "b", Allowed: 5}}, pods: map[string][]Pod{}}
	w.planBudgets(f.disruption())
	if diff := cmp.Diff([]string{"node-000", "node-001"}, f.asked); diff != "" {
		t.Errorf("first round read the pods of (-want +got):\n%s", diff)
	}
	f.asked = nil
	w.planBudgets(f.disruption())
	if len(f.asked) != 0 {
		t.Errorf("with no room left, the pods of %v were read", f.asked)
	}
	w.promote("node-000")
	f.asked = nil
	w.planBudgets(f.disruption())
	// node-001 is in trial: its pods come off the budgets first.
	if diff := cmp.Diff([]string{"node-001", "node-002"}, f.asked); diff != "" {
		t.Errorf("third round read the pods of (-want +got):\n%s", diff)
	}
}

// BenchmarkDisruptionBudgets1000 is the rule's cost in one assignment
// round at 1,000 nodes and 200 budgets: 30 pods a node, each of one
// budget (150 pods a budget over 150 nodes), 50 nodes in trial,
// maxUnavailable 100. "fit": each budget allows 20, the round fills its
// 50 slots; "held": every budget allows 0, every one of the 950
// candidates is checked and held; "off": the "fit" round with
// spec.podDisruptionBudgets Ignore, the baseline. The pods are built once
// (the caller's reads are not measured here).
func BenchmarkDisruptionBudgets1000(b *testing.B) {
	for _, bc := range []struct {
		name    string
		allowed int32
		policy  v1alpha1.DisruptionBudgetPolicy
		want    int
	}{
		{"off", 20, v1alpha1.DisruptionBudgetsIgnore, 50},
		{"fit", 20, "", 50},
		{"held", 0, "", 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := newWorld(b, 1000, percentStep("100%"))
			d := &Disruption{}
			for i := range 200 {
				d.Budgets = append(d.Budgets, Budget{Namespace: fmt.Sprintf("ns-%d", i%20), Name: fmt.Sprintf("pdb-%d", i), Allowed: bc.allowed})
			}
			pods := map[string][]Pod{}
			for i, n := range w.nodes {
				for j := range 30 {
					pods[n.Name] = append(pods[n.Name], ready((i*30+j)%200))
				}
			}
			d.PodsOn = func(node string) ([]Pod, error) { return pods[node], nil }
			// 50 nodes in trial: set up with the rule off.
			w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(50))
			w.r.Spec.PodDisruptionBudgets = v1alpha1.DisruptionBudgetsIgnore
			w.planBudgets(d)
			if w.r.Status.InTrial != 50 {
				b.Fatalf("set-up: %d in trial", w.r.Status.InTrial)
			}
			w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(100))
			w.r.Spec.PodDisruptionBudgets = bc.policy
			in := w.input()
			in.Disruption = d
			in.Memo = &Memo{}
			b.ReportAllocs()
			for b.Loop() {
				res := Plan(in)
				if got := len(res.Patches); got != bc.want {
					b.Fatalf("%d patches, want %d", got, bc.want)
				}
			}
		})
	}
}
