package plan

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

var (
	modelSeed      = flag.Uint64("model.seed", 0, "run the rollout model with this seed only")
	modelSequences = flag.Int("model.sequences", 200, "random sequences of the rollout model")
)

// TestModel drives Plan with random sequences of what a cluster and its
// operators do, and checks the invariants after every plan:
//   - never more nodes in Trial than maxUnavailable;
//   - a node is assigned (patched with the new config) at most once unless
//     the write was lost, and every assignment carries, in the same patch,
//     the rollout's claim with the node's assignment before as Previous;
//   - every node whose assignment differs from its start carries the
//     rollout's claim, with the start assignment as Previous;
//   - a rollout that is not Progressing or Paused asks no assignment;
//   - more than maxFailures failures means the rollout is not active; the
//     status lists at most MaxFailureRecords failures;
//   - a revert patch only changes the assignment of a node that carries
//     the rollout's, and removes the claim; a node that carries another
//     controller's claim is never patched; every patch is made on the
//     resourceVersion the node was read at;
//   - Plan with a Memo kept across the sequence decides as without;
//   - with spec.analysis (half the sequences), the verdicts coming from a
//     model of the controller's analyzer (gateModel: it keeps only the
//     nodes the last plan watched): a node whose health gate failed is
//     failed while the rollout is active; a node counts as promoted only
//     once a passing verdict taken after its soak is in, and that pass is
//     written into its claim; the watch list holds exactly the nodes in
//     trial (soaking ones too) of an active rollout and the ones passed in
//     this plan;
//   - with spec.preflight (a third of the sequences; the nodes answer the
//     request they carry, mostly Pass), no node is assigned before the
//     check completed, none under Required unless every asked node
//     passed, and a request patch writes nothing else;
//   - at the end of a sequence, a rollout still active ends once every
//     component promotes and every gate passes (drain);
//   - a rollout deleted while active, once Finalized, has put every node
//     back on its start assignment and no node carries its claim; one
//     deleted after it ended changed none back, and asks no patch unless
//     it puts nodes back (then, once Finalized, no node carries its
//     claim).
//
// A failure prints its seed: go test -run TestModel -model.seed=N ./rollout/plan
func TestModel(t *testing.T) {
	n := *modelSequences
	if testing.Short() {
		n = 50
	}
	seeds := make([]uint64, 0, n)
	if *modelSeed != 0 {
		seeds = append(seeds, *modelSeed)
	} else {
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		if !runModel(t, seed) {
			t.Fatalf("seed %d failed: go test -run TestModel -model.seed=%d ./rollout/plan", seed, seed)
		}
	}
}

func runModel(t *testing.T, seed uint64) (ok bool) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	nodes := 3 + rng.IntN(20)
	steps := []v1alpha1.RolloutStep{countStep(1)}
	for range rng.IntN(4) {
		switch rng.IntN(3) {
		case 0:
			steps = append(steps, pauseStep(time.Duration(rng.IntN(3))*time.Minute))
		case 1:
			steps = append(steps, countStep(1+rng.IntN(nodes)))
		default:
			steps = append(steps, percentStep(fmt.Sprintf("%d%%", 1+rng.IntN(100))))
		}
	}
	steps = append(steps, percentStep("100%"))
	w := newWorld(t, nodes, steps...)
	maxU := 1 + rng.IntN(4)
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(int32(maxU)))
	w.r.Spec.MaxFailures = int32(rng.IntN(3))
	w.r.Spec.ProgressDeadlineSeconds = ptr.To(int32(60 + rng.IntN(600)))
	if rng.IntN(3) == 0 {
		w.r.Spec.RevertOnHalt = ptr.To(false)
	}
	// honors: the components honor a gated rollout's hold (the claim's
	// holdUntil); else they promote at the end of their trial, as older
	// ones do.
	honors := false
	if rng.IntN(2) == 0 {
		withAnalysis(w, time.Duration(rng.IntN(4))*time.Minute)
		honors = rng.IntN(2) == 0
	}
	// A third of the sequences check before they assign (spec.preflight).
	if rng.IntN(3) == 0 {
		w.r.Spec.Preflight = []v1alpha1.PreflightPolicy{v1alpha1.PreflightWarn, v1alpha1.PreflightRequired}[rng.IntN(2)]
		w.r.Spec.PreflightTimeoutSeconds = ptr.To(int32(60 + rng.IntN(600)))
	}
	start := map[string]*string{}
	for _, n := range w.nodes {
		start[n.Name] = n.Assignment
	}
	applied := map[string]int{}      // assignments that reached the node
	deletedActive := false           // deleted while it was active
	foreign := map[string]bool{}     // changed by someone else after the rollout recorded them
	elseTouched := map[string]bool{} // changed by someone else at any time
	otherClaim := mustJSON(t, &nodeapi.Claim{Namespace: "elsewhere", Name: "theirs", UID: "their-uid", AssignedAt: metav1.NewTime(t0)})
	third := mustJSON(t, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "ns", Name: "someone-else", UID: "else-uid", KubeletConfigKey: "kubelet"}})
	var atDeletion map[string]*string
	memo := &Memo{}
	gates := newGateModel() // the analyzer: verdicts of the watched nodes only
	var log []string
	defer func() {
		if !ok {
			for _, l := range log {
				t.Log(l)
			}
		}
	}()
	fail := func(format string, args ...any) bool {
		t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
		return false
	}

	for range 200 {
		action := rng.IntN(18)
		dropWrites := false
		switch action {
		case 0, 1, 2: // components promote
			for _, n := range w.nodes {
				if w.carriesNew(n) && rng.IntN(2) == 0 {
					log = append(log, componentPromotes(w, n, honors)+" "+n.Name)
				}
			}
		case 3: // a component fails
			for _, n := range w.nodes {
				if w.carriesNew(n) && rng.IntN(4) == 0 {
					w.fail(n.Name)
					log = append(log, "fail "+n.Name)
					break
				}
			}
		case 4:
			w.now = w.now.Add(time.Duration(rng.IntN(700)) * time.Second)
			log = append(log, "time "+w.now.Sub(t0).String())
		case 5:
			w.r.Spec.Paused = !w.r.Spec.Paused
			log = append(log, fmt.Sprintf("paused=%v", w.r.Spec.Paused))
		case 6:
			if rng.IntN(6) == 0 {
				w.r.Spec.Abort = true
				log = append(log, "abort")
			}
		case 7:
			if rng.IntN(6) == 0 {
				w.r.Spec.Undo = true
				log = append(log, "undo")
			}
		case 8:
			if rng.IntN(8) == 0 {
				w.cm = &ConfigMap{UID: cmUID, ResourceVersion: "99", HasKey: true, Immutable: true}
				log = append(log, "edit ConfigMap")
			}
		case 9:
			if len(w.nodes) > 1 && rng.IntN(3) == 0 {
				i := rng.IntN(len(w.nodes))
				log = append(log, "delete "+w.nodes[i].Name)
				w.nodes = append(w.nodes[:i:i], w.nodes[i+1:]...)
			}
		case 10:
			if rng.IntN(3) == 0 {
				name := fmt.Sprintf("late-%03d", rng.IntN(1000))
				if _, dup := start[name]; !dup {
					w.nodes = append(w.nodes, &Node{Name: name, Selected: true, Status: &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal}})
					start[name] = nil
					log = append(log, "add "+name)
				}
			}
		case 11:
			w.r.Spec.ResumedStep = ptr.To(w.r.Status.CurrentStep)
			log = append(log, "resume")
		case 12:
			dropWrites = true
		case 14:
			if rng.IntN(3) == 0 {
				// Someone else (an operator) assigns a node.
				n := w.nodes[rng.IntN(len(w.nodes))]
				v := third
				n.Assignment = &v
				w.touch(n)
				elseTouched[n.Name] = true
				if w.claim(n) != nil {
					foreign[n.Name] = true
				} else {
					start[n.Name] = &v // what the rollout will find
				}
				log = append(log, fmt.Sprintf("someone else assigns %s (claimed: %v)", n.Name, foreign[n.Name]))
			}
		case 15:
			if rng.IntN(3) == 0 {
				// A controller in another namespace claims a node this
				// one does not hold.
				n := w.nodes[rng.IntN(len(w.nodes))]
				if n.Claim == nil {
					v := otherClaim
					n.Claim = &v
					w.touch(n)
					log = append(log, "another controller claims "+n.Name)
				}
			}
		case 16: // the health gates report on the nodes they watch
			for _, n := range w.nodes {
				m := gates.nodes[n.Name]
				if m == nil || rng.IntN(2) == 0 {
					continue
				}
				m.checkedAt, m.failed = w.now.Add(-time.Duration(rng.IntN(3))*time.Minute), ""
				if rng.IntN(5) == 0 {
					m.failed = "pods: a pod failed"
				}
				log = append(log, fmt.Sprintf("gates on %s: %+v", n.Name, *m))
			}
		case 17: // the nodes answer the pre-flight request they carry
			for _, n := range w.nodes {
				if v := preflightAnswer(n, rng.IntN(10)); v != "" {
					log = append(log, fmt.Sprintf("%s answers %s", n.Name, v))
				}
			}
		case 13:
			if w.r.DeletionTimestamp == nil && rng.IntN(6) == 0 {
				w.r.DeletionTimestamp = &metav1.Time{Time: w.now}
				deletedActive = w.r.Status.Phase.Active() && w.r.Status.ConfigMap != nil
				atDeletion = map[string]*string{}
				for _, n := range w.nodes {
					atDeletion[n.Name] = n.Assignment
				}
				log = append(log, fmt.Sprintf("delete the rollout (active: %v)", deletedActive))
			}
		}
		before := map[string]*string{}
		beforeClaim := map[string]*string{}
		for _, n := range w.nodes {
			before[n.Name] = n.Assignment
			beforeClaim[n.Name] = n.Claim
		}
		gates.fill(w)
		in := w.input()
		in.Scope = "ns"
		res := Plan(in)
		if !dropWrites {
			gates.watch(w, res)
		}
		// A Memo kept across the plans changes no decision.
		withMemo := in
		withMemo.Memo = memo
		if diff := cmpDiff(res, Plan(withMemo)); diff != "" {
			return fail("Plan with a Memo decides otherwise (-without +with):\n%s", diff)
		}
		w.r.Status = res.Status
		w.last = res
		log = append(log, fmt.Sprintf("plan: phase %s step %d patches %v", res.Status.Phase, res.Status.CurrentStep, res.Patches))
		st := res.Status
		if int(st.InTrial) > maxU {
			return fail("%d in trial, maxUnavailable %d", st.InTrial, maxU)
		}
		active := st.Phase == v1alpha1.PhaseProgressing || st.Phase == v1alpha1.PhasePaused
		if st.Failed > w.r.Spec.MaxFailures && active {
			return fail("%d failures > maxFailures %d, phase %s", st.Failed, w.r.Spec.MaxFailures, st.Phase)
		}
		if len(st.Failures) > v1alpha1.MaxFailureRecords || int32(len(st.Failures)) > st.Failed {
			return fail("%d failures listed, %d failed", len(st.Failures), st.Failed)
		}
		if msg := checkGates(w, in, res, active); msg != "" {
			return fail("%s", msg)
		}
		seen := map[string]bool{}
		for _, p := range res.Patches {
			if seen[p.Node] {
				return fail("two patches of node %s in one plan", p.Node)
			}
			seen[p.Node] = true
			if p.Preflight == nil && p.ResourceVersion != w.node(p.Node).ResourceVersion {
				return fail("patch of %s on resourceVersion %q, the node is at %q", p.Node, p.ResourceVersion, w.node(p.Node).ResourceVersion)
			}
			if bc := beforeClaim[p.Node]; bc != nil {
				if c, err := nodeapi.DecodeClaim(*bc); err != nil || c == nil || c.UID != w.r.UID {
					return fail("patch of %s, which carries another rollout's claim %s", p.Node, *bc)
				}
			}
			if p.Preflight != nil {
				// A pre-flight request: that annotation only.
				if p.Claim != nil || p.Value != nil || p.Revert || p.ClaimOnly {
					return fail("pre-flight request of %s changes more: %+v", p.Node, p)
				}
				if !dropWrites {
					w.apply(p)
				}
				continue
			}
			if p.Revert && !p.ClaimOnly && !w.carriesNew(&Node{Assignment: before[p.Node]}) {
				return fail("revert of %s, which carries %s, not the rollout's assignment", p.Node, describeAnnotation(before[p.Node]))
			}
			if p.Revert && p.Claim != nil {
				return fail("revert of %s keeps a claim", p.Node)
			}
			if !p.Revert && !p.ClaimOnly {
				// An assignment comes with its claim, in the same patch,
				// and the claim's previous source is what the node had.
				if p.Claim == nil {
					return fail("assignment of %s without a claim", p.Node)
				}
				c, err := nodeapi.DecodeClaim(*p.Claim)
				if err != nil || c == nil || c.UID != w.r.UID {
					return fail("assignment of %s with claim %s (%v)", p.Node, *p.Claim, err)
				}
				if !carries(&Node{Assignment: before[p.Node]}, c.Previous) {
					return fail("assignment of %s over %s, not its claim's previous source %v", p.Node, describeAnnotation(before[p.Node]), c.Previous)
				}
				if !active {
					return fail("phase %s asks to assign %s", st.Phase, p.Node)
				}
				if pf := st.Preflight; pf != nil && (pf.CompletedAt == nil || pf.Policy == v1alpha1.PreflightRequired && pf.Passed != pf.Asked) {
					return fail("assignment of %s while the pre-flight check says %+v", p.Node, pf)
				}
				if w.r.Spec.Preflight != "" && st.Preflight == nil {
					return fail("assignment of %s without the pre-flight check of spec.preflight %s", p.Node, w.r.Spec.Preflight)
				}
				if w.r.Spec.Analysis != nil && c.HoldUntil == nil {
					return fail("a gated rollout assigns %s without a hold of its promotion: %+v", p.Node, c)
				}
			}
			if dropWrites {
				continue
			}
			if !w.apply(p) {
				continue
			}
			if !p.Revert && !p.ClaimOnly && !sameAssignment(before[p.Node], p.Value) {
				applied[p.Node]++
				if applied[p.Node] > 1 {
					return fail("node %s assigned %d times", p.Node, applied[p.Node])
				}
			}
		}
		if dropWrites {
			log = append(log, "(writes lost)")
		}
		released := w.r.DeletionTimestamp != nil && !deletedActive
		for _, n := range w.nodes {
			if sameAssignment(n.Assignment, start[n.Name]) || foreign[n.Name] || released {
				continue
			}
			c := w.claim(n)
			if c == nil {
				return fail("node %s changed without a claim", n.Name)
			}
			prev, _ := parseAssignment(start[n.Name])
			if !sameSource(prev, c.Previous) {
				return fail("node %s: claim's previous %v, started on %v", n.Name, c.Previous, prev)
			}
		}
		// A rollout that ended without putting nodes back keeps its
		// claims when deleted, and its deletion patches nothing.
		rst := &res.Status
		reverting := rst.Phase == v1alpha1.PhaseReverted || rst.Phase == v1alpha1.PhaseHalted && (w.r.Spec.RevertOnHalt == nil || *w.r.Spec.RevertOnHalt)
		if w.r.DeletionTimestamp != nil && !deletedActive && !reverting && !rst.Phase.Active() && len(res.Patches) > 0 {
			return fail("rollout deleted after it ended (%s) asks %d patches, want none", rst.Phase, len(res.Patches))
		}
		if w.r.DeletionTimestamp != nil && res.Finalized {
			for _, n := range w.nodes {
				if w.claim(n) != nil && (deletedActive || reverting) {
					return fail("deleted rollout finalized with its claim still on node %s", n.Name)
				}
				want := atDeletion[n.Name]
				if deletedActive {
					want = start[n.Name]
				} else if _, ok := atDeletion[n.Name]; !ok {
					want = start[n.Name] // added after the deletion
				}
				if !sameAssignment(n.Assignment, want) && !w.r.Spec.Undo && !elseTouched[n.Name] {
					return fail("deleted rollout finalized with node %s on %s, want %s", n.Name, describeAnnotation(n.Assignment), describeAnnotation(want))
				}
			}
		}
		// The components react to reverts.
		w.settleReverts()
	}
	return drain(t, w, gates, honors, seed)
}

// componentPromotes has the component of a node that carries the new
// assignment end its trial: it promotes, unless it honors a hold its claim
// asks for (then it reports its trial over and keeps its last-known-good).
func componentPromotes(w *world, n *Node, honors bool) string {
	if c := w.claim(n); honors && c.PromotionHeld(w.now) {
		ends := metav1.NewTime(w.now)
		lkg := oldSource()
		if n.Status != nil {
			lkg = n.Status.LastKnownGood
		}
		n.Status = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: newSource(), Active: newSource(), LastKnownGood: lkg, TrialEnds: &ends}
		return "trial over, held"
	}
	w.promote(n.Name)
	return "promote"
}

// drain checks that a rollout left active ends once nothing goes wrong any
// more: every component promotes, every gate passes at every plan, the
// rollout is resumed, time goes on. Unless a node another controller holds
// blocks a step, it completes, or halts on the failures it had; it never
// stays active (a soak that starts again as its node passes would keep it
// so forever).
func drain(t *testing.T, w *world, gates *gateModel, honors bool, seed uint64) bool {
	if w.r.DeletionTimestamp != nil || !w.r.Status.Phase.Active() {
		return true
	}
	gates.auto = true
	w.r.Spec.Paused = false
	for range 500 {
		w.r.Spec.ResumedStep = ptr.To(w.r.Status.CurrentStep)
		for _, n := range w.nodes {
			if w.carriesNew(n) {
				componentPromotes(w, n, honors)
			}
		}
		gates.fill(w)
		res := w.plan()
		gates.watch(w, res)
		w.settleReverts()
		if !w.r.Status.Phase.Active() || w.r.Status.Blocked > 0 {
			return true
		}
		w.now = w.now.Add(10 * time.Second)
	}
	t.Errorf("seed %d: still %s after 500 plans with every node healthy: %s", seed, w.r.Status.Phase, w.r.Status.Message)
	return false
}

// preflightAnswer has a node that carries a pre-flight request answer it,
// by roll (0-9): mostly Pass, sometimes Overridden or Fail, or not yet.
// It returns the verdict, "" when it did not answer.
func preflightAnswer(n *Node, roll int) nodeapi.PreflightVerdict {
	if n.Preflight == nil || n.Status == nil || roll == 9 {
		return ""
	}
	r, err := nodeapi.DecodePreflightRequest(*n.Preflight)
	if err != nil || r == nil {
		return ""
	}
	ans := &nodeapi.PreflightResult{Candidate: r.Candidate, Verdict: nodeapi.PreflightPass}
	switch roll {
	case 7:
		ans.Verdict, ans.Fields = nodeapi.PreflightOverridden, []string{"maxPods (by zz.conf)"}
	case 8:
		ans.Verdict, ans.Message = nodeapi.PreflightFail, "maxPods: must be positive"
	}
	s := *n.Status
	s.Preflight = ans
	n.Status = &s
	return ans.Verdict
}

func sameAssignment(a, b *string) bool {
	sa, oka := parseAssignment(a)
	sb, okb := parseAssignment(b)
	if !oka || !okb {
		return a != nil && b != nil && *a == *b
	}
	return sameSource(sa, sb)
}

// checkGates checks the health gate invariants of one plan: in is what it
// planned on, res what it decided; active is whether the rollout is still
// active after it.
func checkGates(w *world, in Input, res Result, active bool) string {
	an := in.Rollout.Spec.Analysis
	if an == nil || !active || in.Rollout.DeletionTimestamp != nil {
		if len(res.Watch) != 0 {
			return fmt.Sprintf("watch %v without analysis or an active rollout", res.Watch)
		}
		return ""
	}
	soaked, inTrial, passing := 0, map[string]bool{}, map[string]bool{}
	for _, n := range in.Nodes {
		now := w.node(n.Name)
		c := w.claim(now)
		passedBefore := c != nil && c.Passed != nil
		for _, p := range res.Patches {
			if p.Node == n.Name && !p.Revert && p.Preflight == nil {
				c, _ = nodeapi.DecodeClaim(*p.Claim) // the claim this plan writes
			}
		}
		if c == nil {
			continue
		}
		a := n.Analysis
		if a != nil && a.Failed != "" && c.Failed == "" && w.carriesNew(now) {
			return fmt.Sprintf("node %s failed a gate (%s) and is not failed", n.Name, a.Failed)
		}
		if c.Failed != "" {
			continue
		}
		// Promoted on the rollout's config (as the planner reads it: its
		// status names it active), and it still carries the assignment.
		promoted := n.Status != nil && n.Status.Phase == nodeapi.PhasePromoted && w.carriesNew(&n) &&
			n.Status.Active != nil && n.Status.Active.ConfigMap != nil && n.Status.Active.ConfigMap.UID == w.cm.UID
		if promoted && passedBefore {
			soaked++ // passed in an earlier plan: final
			continue
		}
		if a != nil && promoted && !a.CheckedAt.IsZero() {
			at := in.Now
			if !a.PromotedAt.IsZero() {
				at = a.PromotedAt
			}
			if !a.CheckedAt.Before(at.Add(soak(an))) {
				soaked++
				if c.Passed == nil || !c.Passed.Time.Equal(in.Now) {
					return fmt.Sprintf("node %s passed its soak and its claim does not say so: %+v", n.Name, c)
				}
				passing[n.Name] = true
				continue
			}
		}
		inTrial[n.Name] = true
	}
	if int(res.Status.Promoted) > soaked {
		return fmt.Sprintf("%d nodes promoted, only %d passed their soak", res.Status.Promoted, soaked)
	}
	for _, wt := range res.Watch {
		if !inTrial[wt.Node] && !wt.Fresh && !passing[wt.Node] {
			return fmt.Sprintf("watch %s, which is not in trial nor passed by this plan", wt.Node)
		}
	}
	if len(res.Watch) != int(res.Status.InTrial)+len(passing) {
		return fmt.Sprintf("watch %d nodes, %d in trial, %d passed by this plan", len(res.Watch), res.Status.InTrial, len(passing))
	}
	return ""
}
