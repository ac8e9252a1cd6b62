package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// world is a cluster as Plan sees it: a rollout, its ConfigMap, nodes whose
// assignment the patches change, and a clock. Tests drive the components
// by hand (promote, fail).
type world struct {
	t      testing.TB
	r      *v1alpha1.ConfigRollout
	cm     *ConfigMap
	nodes  []*Node
	others []Other
	now    time.Time
	// patches counts the patches made per node.
	patches map[string]int
	last    Result
	// claims are the last claims this rollout wrote, by node, kept after
	// the claim is removed (to tell a revert from a superseded node).
	claims map[string]*nodeapi.Claim
	rv     int
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const cmUID = types.UID("cm-uid-1")

func countStep(n int) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{Nodes: ptr.To(intstr.FromInt32(int32(n)))}
}

func percentStep(s string) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{Nodes: ptr.To(intstr.FromString(s))}
}

func pauseStep(d time.Duration) v1alpha1.RolloutStep {
	if d == 0 {
		return v1alpha1.RolloutStep{Pause: &v1alpha1.RolloutPause{}}
	}
	return v1alpha1.RolloutStep{Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: d}}}
}

// newWorld has n nodes node-000..., each on previous ConfigMap "old" (odd
// ones) or on no assignment (even ones), and a rollout of "new".
func newWorld(t testing.TB, n int, steps ...v1alpha1.RolloutStep) *world {
	w := &world{
		t: t,
		r: &v1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro", UID: "ro-uid", Generation: 1, CreationTimestamp: metav1.NewTime(t0)},
			Spec:       v1alpha1.ConfigRolloutSpec{ConfigMapName: "new", Steps: steps},
		},
		cm:      &ConfigMap{UID: cmUID, ResourceVersion: "10", HasKey: true, Immutable: true},
		now:     t0,
		patches: map[string]int{},
		claims:  map[string]*nodeapi.Claim{},
	}
	for i := range n {
		node := &Node{Name: fmt.Sprintf("node-%03d", i), Selected: true}
		if i%2 == 1 {
			v := mustJSON(t, oldSource())
			node.Assignment = &v
			node.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: oldSource(), Active: oldSource(), LastKnownGood: oldSource()}
		} else {
			node.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal}
		}
		w.nodes = append(w.nodes, node)
	}
	return w
}

func oldSource() *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "old", UID: "old-uid", KubeletConfigKey: "kubelet"}}
}

func newSource() *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "new", UID: cmUID, KubeletConfigKey: "kubelet", ResourceVersion: "10"}}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (w *world) input() Input {
	nodes := make([]Node, len(w.nodes))
	for i, n := range w.nodes {
		nodes[i] = *n
	}
	return Input{Rollout: w.r.DeepCopy(), ConfigMap: w.cm, Nodes: nodes, Others: w.others, Now: w.now}
}

// plan runs Plan, stores the status and makes the patches.
func (w *world) plan() Result {
	w.t.Helper()
	before := w.r.DeepCopy()
	in := w.input()
	res := Plan(in)
	if diff := cmpDiff(before, in.Rollout); diff != "" {
		w.t.Fatalf("Plan modified its input (-before +after):\n%s", diff)
	}
	w.r.Status = res.Status
	for _, p := range res.Patches {
		w.apply(p)
		if !p.ClaimOnly && p.Preflight == nil {
			w.patches[p.Node]++
		}
	}
	w.last = res
	return res
}

// apply makes a patch on its node as the API server would: refused when
// the node's resourceVersion changed since.
func (w *world) apply(p Patch) bool {
	w.t.Helper()
	n := w.node(p.Node)
	if p.Preflight != nil {
		// A pre-flight request: that annotation only, no precondition.
		n.Preflight = cloneString(p.Preflight)
		w.touch(n)
		return true
	}
	if p.ResourceVersion != n.ResourceVersion {
		return false
	}
	if !p.ClaimOnly {
		n.Assignment = cloneString(p.Value)
	}
	n.Claim = cloneString(p.Claim)
	if n.Claim != nil {
		c, err := nodeapi.DecodeClaim(*n.Claim)
		if err != nil {
			w.t.Fatalf("Plan wrote an invalid claim on %s: %v", p.Node, err)
		}
		if c.UID == w.r.UID {
			w.claims[p.Node] = c
		}
	}
	w.touch(n)
	return true
}

// touch bumps a node's resourceVersion, as any write does.
func (w *world) touch(n *Node) {
	w.rv++
	n.ResourceVersion = fmt.Sprint(1000 + w.rv)
}

func cloneString(v *string) *string {
	if v == nil {
		return nil
	}
	s := *v
	return &s
}

// claim returns the rollout's claim on a node, nil when it carries none.
func (w *world) claim(n *Node) *nodeapi.Claim {
	if n.Claim == nil {
		return nil
	}
	c, err := nodeapi.DecodeClaim(*n.Claim)
	if err != nil || c == nil || c.UID != w.r.UID {
		return nil
	}
	return c
}

func (w *world) node(name string) *Node {
	w.t.Helper()
	for _, n := range w.nodes {
		if n.Name == name {
			return n
		}
	}
	w.t.Fatalf("no node %s", name)
	return nil
}

// carriesNew reports whether the node's annotation names the rollout's
// ConfigMap.
func (w *world) carriesNew(n *Node) bool {
	src, ok := parseAssignment(n.Assignment)
	return ok && src != nil && src.ConfigMap != nil && src.ConfigMap.UID == w.cm.UID
}

// promoteAll has every node that carries the new assignment report it
// promoted.
func (w *world) promoteAll() {
	for _, n := range w.nodes {
		if w.carriesNew(n) {
			n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: newSource(), Active: newSource(), LastKnownGood: newSource()}
		}
	}
}

// promote has the node report the new config promoted.
func (w *world) promote(name string) {
	n := w.node(name)
	n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: newSource(), Active: newSource(), LastKnownGood: newSource()}
}

// fail has the node report the new config rolled back.
func (w *world) fail(name string) {
	n := w.node(name)
	n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack, Assigned: newSource(), Active: oldSource(), LastKnownGood: oldSource(),
		Error: "failed to validate current (UID: cm-uid-1)"}
}

// revertedComponents has every node report its assignment's config promoted
// (after a revert).
func (w *world) settleReverts() {
	for _, n := range w.nodes {
		if !w.carriesNew(n) {
			src, _ := parseAssignment(n.Assignment)
			ph := nodeapi.PhasePromoted
			if src == nil {
				ph = nodeapi.PhaseLocal
			}
			n.Status = &nodeapi.ConfigStatus{Phase: ph, Assigned: src, Active: src}
		}
	}
}

// states says where each node the rollout ever claimed stands, from what
// the nodes carry: Failed, Promoted or Trial while it carries the claim
// (Reverting when the rollout is putting its nodes back), Reverted or
// Superseded once the claim is gone, Gone once the node is.
func (w *world) states() map[v1alpha1.NodeState][]string {
	out := map[v1alpha1.NodeState][]string{}
	nodes := map[string]*Node{}
	for _, n := range w.nodes {
		nodes[n.Name] = n
	}
	reverting := w.r.Status.Reverting > 0
	for name, last := range w.claims {
		n, ok := nodes[name]
		var s v1alpha1.NodeState
		var c *nodeapi.Claim
		if ok {
			c = w.claim(n)
		}
		switch {
		case !ok:
			s = v1alpha1.NodeGone
		case c != nil && reverting:
			s = v1alpha1.NodeReverting
		case c != nil && c.Failed != "":
			s = v1alpha1.NodeFailed
		case c != nil && w.carriesNew(n) && n.Status != nil && n.Status.Phase == nodeapi.PhasePromoted:
			s = v1alpha1.NodePromoted
		case c != nil:
			s = v1alpha1.NodeTrial
		case carries(n, last.Previous) && !strings.HasPrefix(last.Failed, "its assignment annotation is"):
			s = v1alpha1.NodeReverted
		default:
			s = v1alpha1.NodeSuperseded
		}
		out[s] = append(out[s], name)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func (w *world) wantPhase(want v1alpha1.RolloutPhase) {
	w.t.Helper()
	if got := w.r.Status.Phase; got != want {
		w.t.Fatalf("phase %s (%s), want %s", got, w.r.Status.Message, want)
	}
}

func (w *world) assigning() []string {
	var out []string
	for _, p := range w.last.Patches {
		if !p.Revert && !p.ClaimOnly && p.Preflight == nil {
			out = append(out, p.Node)
		}
	}
	return out
}

// marks returns the nodes whose claim alone is written (a failure, a
// claim of a node that already carries the config, a migrated record).
func (w *world) marks() []string {
	var out []string
	for _, p := range w.last.Patches {
		if !p.Revert && p.ClaimOnly && p.Preflight == nil {
			out = append(out, p.Node)
		}
	}
	return out
}

// reverting returns the nodes whose assignment is put back.
func (w *world) reverting() []string {
	var out []string
	for _, p := range w.last.Patches {
		if p.Revert && !p.ClaimOnly {
			out = append(out, p.Node)
		}
	}
	return out
}

// releasing returns the nodes whose claim alone is taken off.
func (w *world) releasing() []string {
	var out []string
	for _, p := range w.last.Patches {
		if p.Revert && p.ClaimOnly {
			out = append(out, p.Node)
		}
	}
	return out
}

func (w *world) hasEvent(reason string) bool {
	for _, e := range w.last.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// runToEnd plans and promotes until the rollout leaves Progressing or
// limit rounds pass; it returns the number of nodes assigned per round.
func (w *world) runToEnd(limit int) []int {
	var rounds []int
	for range limit {
		w.plan()
		rounds = append(rounds, len(w.assigning()))
		if w.r.Status.Phase != v1alpha1.PhaseProgressing {
			return rounds
		}
		w.promoteAll()
		w.now = w.now.Add(time.Second)
	}
	w.t.Fatalf("still %s after %d rounds", w.r.Status.Phase, limit)
	return nil
}

// stateOf returns where a node stands (as states does) and the failure
// reason its claim keeps.
func (w *world) stateOf(name string) (v1alpha1.NodeState, string) {
	w.t.Helper()
	for s, names := range w.states() {
		if slices.Contains(names, name) {
			reason := ""
			if c := w.claim(w.node(name)); c != nil {
				reason = c.Failed
			}
			return s, reason
		}
	}
	return "", ""
}
