package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// The pre-flight check (spec.preflight): when a rollout starts, before any
// node applies its config, it asks every selected node that runs the
// component to check the config against the node's own layers, by writing
// one pre-flight request on each Node (nodeapi.PreflightRequest: the same
// value everywhere, one write per node; written again only to a node that
// does not carry it, e.g. after a failed write). Each node answers in its
// ConfigStatus (nodeapi.PreflightResult). The steps wait until every asked
// node answered or the timeout passed; then:
//
//   - every node passed: the rollout goes on (the Preflight condition is
//     True);
//   - some failed, were overridden or did not answer, and the policy is
//     Required: the rollout halts (PreflightFailed), before any node
//     applies the config, so there is nothing to revert;
//   - the same under Warn: a Warning Event and the condition name them,
//     and the rollout goes on.
//
// Overridden halts under Required as a failure does: the node would run
// its own value for the field while it reports the config promoted, so
// the rollout would count as done a node that does not run what it rolled
// out, which is what Required is for. An operator who accepts a node's own
// drop-ins chooses Warn, or removes the node from the selector.
//
// A node that does not answer is most often an agent older than the
// check (the skew rule: it never reads the request). Under Warn the
// timeout bounds the wait and the rollout goes on, so that a fleet in the
// middle of a dynconfig upgrade is slowed once by the timeout, never
// stopped; under Required such a node halts the rollout with a message
// that names it and says that it did not answer (upgrade its agent, or use
// Warn). Nodes that join the selection after the check completed, and a
// rollout that started before the check was set (or under an older
// controller), are not checked.

// preflightHaltReason is the Halted condition's reason of a Required
// check that did not pass; it does not mark the ConfigMap known bad
// (HaltMarksBad).
const preflightHaltReason = "PreflightFailed"

// DefaultPreflightTimeout is the default of spec.preflightTimeoutSeconds.
const DefaultPreflightTimeout = 120 * time.Second

// preflightPolicy returns spec.preflight, Off when unset.
func preflightPolicy(spec *v1alpha1.ConfigRolloutSpec) v1alpha1.PreflightPolicy {
	if spec.Preflight == "" {
		return v1alpha1.PreflightOff
	}
	return spec.Preflight
}

func (p *planner) preflightTimeout() time.Duration {
	if s := p.r.Spec.PreflightTimeoutSeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return DefaultPreflightTimeout
}

// preflightHolds runs the pre-flight check of a rollout that started in
// this plan (or whose check still waits), and reports whether the steps
// wait: the check waits for answers, or it halted the rollout.
func (p *planner) preflightHolds() bool {
	st, policy := p.st, preflightPolicy(&p.r.Spec)
	if st.Preflight == nil {
		// Only a rollout that starts now is checked: one its ConfigMap was
		// pinned for earlier (by an older controller, or with the check
		// Off) goes on as it was.
		if policy == v1alpha1.PreflightOff || p.in.Rollout.Status.ConfigMap != nil || st.ConfigMap == nil {
			return false
		}
		st.Preflight = &v1alpha1.PreflightStatus{Policy: policy, StartedAt: p.now}
		p.event(false, "PreflightStarted", "asking the %d selected nodes that run %s to check ConfigMap %s/%s against their own layers before any node applies it (spec.preflight %s, timeout %v)",
			p.eligible(), component(&p.r.Spec), p.r.Namespace, p.r.Spec.ConfigMapName, policy, p.preflightTimeout())
	}
	pf := st.Preflight
	if pf.CompletedAt != nil {
		return false
	}
	if policy == v1alpha1.PreflightOff {
		pf.CompletedAt = &p.now
		msg := fmt.Sprintf("spec.preflight was set to Off while the check waited (%d of %d nodes had answered): not checked", pf.Asked-pf.NoAnswer, pf.Asked)
		p.preflightCondition(metav1.ConditionFalse, "Off", msg)
		p.event(false, "PreflightSkipped", "%s", msg)
		return false
	}
	pf.Policy = policy
	req, err := p.preflightRequest()
	if err != nil {
		p.halt("InvalidSpec", fmt.Sprintf("the pre-flight request would be invalid: %v", err))
		return true
	}
	candidate := p.preflightCandidate()
	var pending, unasked []string
	blocked := map[string]string{} // pending nodes that may not be asked: why
	var notPassed []v1alpha1.NodePreflight
	pf.Asked, pf.Passed, pf.Overridden, pf.Failed, pf.NoAnswer = 0, 0, 0, 0, 0
	for i := range p.in.Nodes {
		n := &p.in.Nodes[i]
		if !n.Selected || p.notRunning(n.Name) {
			continue
		}
		pf.Asked++
		var ans *nodeapi.PreflightResult
		if n.Status != nil {
			ans = n.Status.Preflight
		}
		if !ans.Answers(candidate) {
			pending = append(pending, n.Name)
			if n.Preflight == nil || *n.Preflight != req {
				if why := p.mayNotAsk(n); why != "" {
					blocked[n.Name] = why
				} else {
					unasked = append(unasked, n.Name)
				}
			}
			continue
		}
		switch ans.Verdict {
		case nodeapi.PreflightPass:
			pf.Passed++
			continue
		case nodeapi.PreflightOverridden:
			pf.Overridden++
		default:
			pf.Failed++
		}
		notPassed = append(notPassed, v1alpha1.NodePreflight{Node: n.Name, Verdict: string(ans.Verdict), Fields: statusFields(ans.Fields), Message: truncateReason(ans.Message)})
	}
	pf.NoAnswer = int32(len(pending))
	deadline := pf.StartedAt.Add(p.preflightTimeout())
	if len(pending) > 0 && p.in.Now.Before(deadline) {
		pf.Nodes = boundPreflightNodes(notPassed)
		msg := fmt.Sprintf("pre-flight: %d of %d nodes answered, waiting until %s for %s", pf.Asked-pf.NoAnswer, pf.Asked,
			deadline.UTC().Format(time.RFC3339), abbreviate(pending, 5))
		p.preflightCondition(metav1.ConditionUnknown, "Waiting", msg)
		st.Message = msg
		for _, name := range unasked {
			v := req
			p.res.Patches = append(p.res.Patches, Patch{Node: name, Preflight: &v})
		}
		p.requeue(deadline.Sub(p.in.Now))
		return true
	}
	for _, name := range pending {
		msg := fmt.Sprintf("no answer within %v: its agent is older than the pre-flight check, or did not run", p.preflightTimeout())
		if why := blocked[name]; why != "" {
			msg = "not asked: " + why
		}
		notPassed = append(notPassed, v1alpha1.NodePreflight{Node: name, Verdict: v1alpha1.PreflightNoAnswer, Message: msg})
	}
	sortPreflightNodes(notPassed)
	pf.Nodes = boundPreflightNodes(notPassed)
	pf.CompletedAt = &p.now
	if len(notPassed) == 0 {
		msg := fmt.Sprintf("all %d asked nodes passed the pre-flight check", pf.Asked)
		p.preflightCondition(metav1.ConditionTrue, "Passed", msg)
		p.event(false, "PreflightPassed", "%s", msg)
		return false
	}
	why := describePreflight(pf, notPassed)
	if policy == v1alpha1.PreflightRequired {
		p.preflightCondition(metav1.ConditionFalse, "Failed", why)
		p.halt(preflightHaltReason, why+" (spec.preflight Required: no node was assigned)")
		return true
	}
	p.preflightCondition(metav1.ConditionFalse, "Warnings", why)
	p.event(true, "PreflightWarning", "%s (spec.preflight Warn: going on)", why)
	return false
}

// preflightEnded closes a check that still waits when the rollout ended
// without it (aborted, undone, deleted, halted for another reason), so
// that its condition does not say it waits on a rollout that is over.
func (p *planner) preflightEnded() {
	pf := p.st.Preflight
	if pf == nil || pf.CompletedAt != nil || p.st.Phase.Active() {
		return
	}
	pf.CompletedAt = &p.now
	p.preflightCondition(metav1.ConditionFalse, "RolloutEnded",
		fmt.Sprintf("the rollout ended (%s) before the check completed (%d of %d nodes had answered when it last looked)", p.st.Phase, pf.Asked-pf.NoAnswer, pf.Asked))
}

// mayNotAsk says why the rollout may not write its request on a node
// ("" when it may): another rollout holds the node (as for an assignment:
// its claim does not decode, or its rollout is active, reverting or out
// of this controller's scope), or another rollout that is still live by
// the same rule wrote the request the node carries. Two controllers never
// overwrite each other's request in turn; a request of a rollout that
// ended is replaced.
func (p *planner) mayNotAsk(n *Node) string {
	if why, bad := p.badClaim[n.Name]; bad {
		return why
	}
	if c := p.foreign[n.Name]; c != nil {
		if ok, why := p.takeable(c); !ok {
			return "claimed by " + why
		}
	}
	if n.Preflight != nil {
		r, err := nodeapi.DecodePreflightRequest(*n.Preflight)
		if err == nil && r != nil && r.UID != p.r.UID {
			if ok, why := p.takeable(&nodeapi.Claim{Namespace: r.Namespace, Name: r.Name, UID: r.UID}); !ok {
				return "it carries the pre-flight request of " + why
			}
		}
	}
	return ""
}

// preflightCandidate is the config the nodes check: the rollout's
// assignment with the resourceVersion it pinned.
func (p *planner) preflightCandidate() *corev1.NodeConfigSource {
	c := p.ours.DeepCopy()
	c.ConfigMap.ResourceVersion = p.st.ConfigMap.ResourceVersion
	return c
}

// preflightRequest encodes the request every asked node gets.
func (p *planner) preflightRequest() (string, error) {
	return nodeapi.EncodePreflightRequest(&nodeapi.PreflightRequest{
		Namespace: p.r.Namespace, Name: p.r.Name, UID: p.r.UID, Candidate: p.preflightCandidate(),
	})
}

// preflightCondition sets the Preflight condition.
func (p *planner) preflightCondition(status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&p.st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionPreflight, Status: status, Reason: reason, Message: truncate(msg),
		ObservedGeneration: p.r.Generation, LastTransitionTime: p.now,
	})
}

// describePreflight says which nodes did not pass and why: the counts,
// then the first few nodes with their fields or message.
func describePreflight(pf *v1alpha1.PreflightStatus, notPassed []v1alpha1.NodePreflight) string {
	var parts []string
	for _, c := range []struct {
		n    int32
		what string
	}{{pf.Failed, "failed"}, {pf.Overridden, "overridden"}, {pf.NoAnswer, "did not answer"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	const shown = 3
	var nodes []string
	for i, np := range notPassed {
		if i == shown {
			nodes = append(nodes, fmt.Sprintf("and %d more", len(notPassed)-shown))
			break
		}
		d := (&nodeapi.PreflightResult{Verdict: nodeapi.PreflightVerdict(np.Verdict), Fields: np.Fields, Message: np.Message}).Describe()
		nodes = append(nodes, "node "+np.Node+" "+d)
	}
	return fmt.Sprintf("pre-flight: %d of %d nodes did not pass (%s): %s", len(notPassed), pf.Asked, strings.Join(parts, ", "), strings.Join(nodes, "; "))
}

// sortPreflightNodes sorts failures first (Fail, Overridden, NoAnswer),
// then by node name, so that the status and the message show the worst.
func sortPreflightNodes(nodes []v1alpha1.NodePreflight) {
	rank := func(v string) int {
		switch v {
		case string(nodeapi.PreflightFail):
			return 0
		case string(nodeapi.PreflightOverridden):
			return 1
		}
		return 2
	}
	slices.SortFunc(nodes, func(a, b v1alpha1.NodePreflight) int {
		if d := rank(a.Verdict) - rank(b.Verdict); d != 0 {
			return d
		}
		return strings.Compare(a.Node, b.Node)
	})
}

// The bounds of a node's fields in status.preflight.nodes: what a node
// publishes is bounded (nodeapi.MaxPreflightFields of
// nodeapi.MaxPreflightField bytes), but sixteen nodes of it would make the
// rollout's status some 140 KiB; the node's own status keeps them all.
const (
	maxStatusFields     = 8
	maxStatusFieldBytes = 256
)

// statusFields returns fields cut to maxStatusFields entries (the last
// saying how many more) of at most maxStatusFieldBytes each.
func statusFields(fields []string) []string {
	var out []string
	for i, f := range fields {
		if i == maxStatusFields-1 && len(fields) > maxStatusFields {
			out = append(out, fmt.Sprintf("and %d more (the node's status annotation has them)", len(fields)-i))
			break
		}
		if len(f) > maxStatusFieldBytes {
			cut := maxStatusFieldBytes - len("...")
			for cut > 0 && !utf8.RuneStart(f[cut]) {
				cut--
			}
			f = f[:cut] + "..."
		}
		out = append(out, f)
	}
	return out
}

// boundPreflightNodes keeps at most MaxFailureRecords nodes.
func boundPreflightNodes(nodes []v1alpha1.NodePreflight) []v1alpha1.NodePreflight {
	if len(nodes) > v1alpha1.MaxFailureRecords {
		nodes = nodes[:v1alpha1.MaxFailureRecords]
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}
