package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// The defaults of spec.analysis (documented on its fields).
const (
	defaultGrace         = 30 * time.Second
	defaultCheckInterval = 30 * time.Second
	defaultCheckTimeout  = 10 * time.Second
	defaultErrorLimit    = 4
	podCheckInterval     = 10 * time.Second
	podListQPS           = 10
	podListBurst         = 20
	maxExternalChecks    = 16 // external checks in flight at once
	maxAnswerShown       = 256
	analysisTickInterval = time.Second
)

// defaultNewConditions are the Node conditions that must not turn True.
var defaultNewConditions = []string{
	string(corev1.NodeMemoryPressure), string(corev1.NodeDiskPressure),
	string(corev1.NodePIDPressure), string(corev1.NodeNetworkUnavailable),
}

// analyzer runs the health gates (spec.analysis) on the nodes the plans
// ask to watch (plan.Result.Watch) and hands their verdicts to the next
// plan (plan.Node.Analysis). The Node conditions are read from the Node
// informer at each plan; the pods of a watched node are listed by
// spec.nodeName (from the API server's watch cache, rate-limited) every
// podCheckInterval, and the Prometheus and webhook checks run at their
// interval: only the nodes in trial or soak are ever checked, so a large
// fleet costs what maxUnavailable allows, not what it holds.
//
// What must survive a restart or a change of leader is on the Node, in
// the rollout's claim (nodeapi.GateMemory): the pod baseline, taken before
// the assignment, goes into the assignment's PATCH (prepare); the soak
// start is the plan's (plan.Watch, package plan's soakStart). A new leader
// reads both back (plan.Watch.Pods), so that the soak is not started
// again and a pod that failed after the assignment is not taken for the
// baseline. The rest is in memory and starts over with a new leader: the
// last verdicts (every check runs again before a soak's end is judged) and
// the count of an external check's errors in a row (a leader change gives
// a failing webhook consecutiveErrorLimit more tries).
type analyzer struct {
	client  kubernetes.Interface
	clock   clock.Clock
	http    *http.Client
	enqueue func(key string)
	limiter flowcontrol.RateLimiter
	sem     chan struct{}

	mu       sync.Mutex
	rollouts map[string]*gateRollout // by rollout key
}

// gateRollout is one rollout's watched nodes.
type gateRollout struct {
	ro    *v1alpha1.ConfigRollout
	nodes map[string]*gateNode
}

// gateNode is what the analyzer knows of one watched node.
type gateNode struct {
	assignedAt time.Time
	promotedAt time.Time // zero: not seen promoted
	baseline   *podBaseline
	checks     map[string]*checkState // by check name ("pods", "prometheus/x", "webhook/y")
}

// podBaseline is what the node's pods were when it was assigned, by
// nodeapi.PodKey: as the claim keeps it (nodeapi.PodBaseline), so that a
// new leader judges by the same baseline as the one that took it.
type podBaseline struct {
	failed map[nodeapi.PodKey]bool
	ready  map[nodeapi.PodKey]bool
	// stored is the baseline as the claim keeps it; nil for one rebuilt
	// at the first check (baselineAsOf), which is not written.
	stored *nodeapi.PodBaseline
}

// checkState is one check on one node.
type checkState struct {
	running bool
	next    time.Time // when it runs next
	// at is when it last reached a verdict (passed or failed); zero: none
	// yet.
	at     time.Time
	failed string
	// errors counts the runs in a row that ended in an error.
	errors  int
	lastErr string
}

func newAnalyzer(client kubernetes.Interface, clk clock.Clock, enqueue func(string)) *analyzer {
	return &analyzer{
		client: client, clock: clk, enqueue: enqueue,
		http:     &http.Client{},
		limiter:  flowcontrol.NewTokenBucketRateLimiter(podListQPS, podListBurst),
		sem:      make(chan struct{}, maxExternalChecks),
		rollouts: map[string]*gateRollout{},
	}
}

// inputs fills the Analysis of the nodes a rollout's last plan asked to
// watch: the verdict of the Node's conditions now, and the last verdicts
// of the other checks.
func (a *analyzer) inputs(key string, ro *v1alpha1.ConfigRollout, nodes []plan.Node, get func(string) *corev1.Node) {
	an := ro.Spec.Analysis
	if an == nil {
		return
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	gr := a.rollouts[key]
	if gr == nil || gr.ro.UID != ro.UID {
		return
	}
	for i := range nodes {
		gn := gr.nodes[nodes[i].Name]
		if gn == nil {
			continue
		}
		out := &plan.Analysis{PromotedAt: gn.promotedAt, CheckedAt: now}
		if n := get(nodes[i].Name); n != nil {
			failed, pending := nodeVerdict(an, n, gn.assignedAt, now)
			if pending {
				out.CheckedAt = time.Time{}
			}
			out.Failed = failed
		}
		for _, name := range slices.Sorted(maps.Keys(gn.checks)) {
			cs := gn.checks[name]
			if out.Failed == "" && cs.failed != "" {
				out.Failed = cs.failed
			}
			if cs.at.Before(out.CheckedAt) {
				out.CheckedAt = cs.at
			}
		}
		nodes[i].Analysis = out
	}
}

// watch takes the nodes a plan asks to watch: it forgets the others, takes
// the pod baseline of the ones the plan assigns (before their patch, so
// that what the new config breaks is not in it) and notes when a node is
// first seen promoted. It returns the nodes the plan assigns whose baseline
// could not be taken, with why: it does not watch them, and the caller must
// not make their assignment now (the next plan assigns them again and
// watch takes the baseline again). A node is never watched as assigned
// without its baseline, so no pods check takes one after the node's
// restart, when what the new config broke would be in it.
func (a *analyzer) watch(ctx context.Context, key string, ro *v1alpha1.ConfigRollout, watch []plan.Watch) map[string]error {
	an := ro.Spec.Analysis
	a.mu.Lock()
	gr := a.rollouts[key]
	if an == nil || len(watch) == 0 {
		delete(a.rollouts, key)
		a.mu.Unlock()
		return nil
	}
	if gr == nil || gr.ro.UID != ro.UID {
		gr = &gateRollout{nodes: map[string]*gateNode{}}
		a.rollouts[key] = gr
	}
	gr.ro = ro
	// The baselines of the assigned nodes first, before they are watched:
	// no pods check runs on a node without its baseline.
	var fresh []string
	for _, w := range watch {
		if gr.nodes[w.Node] == nil && w.Fresh && an.Pods != nil {
			fresh = append(fresh, w.Node)
		}
	}
	a.mu.Unlock()
	baselines := make(map[string]*podBaseline, len(fresh))
	var missing map[string]error
	for _, name := range fresh {
		b, err := a.baseline(ctx, an.Pods, name)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Taking the pod baseline before the assignment failed; the assignment waits for the next plan", "rollout", key, "node", name)
			if missing == nil {
				missing = map[string]error{}
			}
			missing[name] = err
			continue
		}
		baselines[name] = b
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rollouts[key] != gr {
		// Forgotten (deleted) meanwhile: watch nothing, assign nothing.
		for _, name := range fresh {
			if missing == nil {
				missing = map[string]error{}
			}
			if missing[name] == nil {
				missing[name] = errors.New("the rollout was forgotten while its pod baseline was taken")
			}
		}
		return missing
	}
	now := a.clock.Now()
	keep := make(map[string]bool, len(watch))
	names := checkNames(an)
	for _, w := range watch {
		if missing[w.Node] != nil {
			continue
		}
		keep[w.Node] = true
		gn := gr.nodes[w.Node]
		if gn == nil {
			b := baselines[w.Node]
			if b == nil && w.Pods != nil {
				// Taken by the leader that assigned it: read back.
				b = keysOf(w.Pods)
			}
			gn = &gateNode{assignedAt: w.AssignedAt, checks: map[string]*checkState{}, baseline: b}
			gr.nodes[w.Node] = gn
		}
		// spec.analysis may be edited: the checks follow it.
		for _, name := range names {
			if gn.checks[name] == nil {
				gn.checks[name] = &checkState{}
			}
		}
		for name := range gn.checks {
			if !slices.Contains(names, name) {
				delete(gn.checks, name)
			}
		}
		if w.Promoted && gn.promotedAt.IsZero() {
			gn.promotedAt = now
		}
	}
	for name := range gr.nodes {
		if !keep[name] {
			delete(gr.nodes, name)
		}
	}
	return missing
}

// prepare takes on the nodes a plan asks to watch (watch) and readies the
// plan's patches: it drops the assignments whose pod baseline could not be
// taken (withoutAssignments, an error for each), and writes the baseline
// of the others into the claim their assignment's PATCH writes
// (nodeapi.GateMemory.Pods): the same write, no other, so that a new
// leader judges the node's pods against the baseline from before the
// assignment.
func (a *analyzer) prepare(ctx context.Context, key string, ro *v1alpha1.ConfigRollout, watch []plan.Watch, patches []plan.Patch) ([]plan.Patch, []error) {
	patches, errs := withoutAssignments(patches, a.watch(ctx, key, ro, watch))
	fresh := map[string]bool{}
	for _, w := range watch {
		if w.Fresh {
			fresh[w.Node] = true
		}
	}
	if len(fresh) == 0 {
		return patches, errs
	}
	a.mu.Lock()
	stored := map[string]*nodeapi.PodBaseline{}
	for name := range fresh {
		if gn := a.nodeOf(key, name); gn != nil && gn.baseline != nil && gn.baseline.stored != nil {
			stored[name] = gn.baseline.stored
		}
	}
	a.mu.Unlock()
	out := patches[:0:0]
	for _, p := range patches {
		b := stored[p.Node]
		if b == nil || p.Revert || p.Claim == nil {
			out = append(out, p)
			continue
		}
		enc, err := withPodBaseline(*p.Claim, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: not assigned yet, its pod baseline could not be written into its claim: %w", p.Node, err))
			continue
		}
		p.Claim = &enc
		out = append(out, p)
	}
	return out, errs
}

// withPodBaseline returns a claim annotation value with the pod baseline
// b in its gate memory.
func withPodBaseline(claim string, b *nodeapi.PodBaseline) (string, error) {
	c, err := nodeapi.DecodeClaim(claim)
	if err != nil {
		return "", err
	}
	if c == nil {
		return "", errors.New("the plan wrote no claim")
	}
	g := nodeapi.GateMemory{}
	if c.Gates != nil {
		g = *c.Gates
	}
	g.Pods, c.Gates = b, &g
	return nodeapi.EncodeClaim(c)
}

// forget drops a deleted rollout.
func (a *analyzer) forget(key string) {
	a.mu.Lock()
	delete(a.rollouts, key)
	a.mu.Unlock()
}

func (a *analyzer) nodeOf(key, node string) *gateNode {
	if gr := a.rollouts[key]; gr != nil {
		return gr.nodes[node]
	}
	return nil
}

// nodeChanged plans the rollouts that watch a Node whose conditions
// changed (the Node informer's other updates do not plan them).
func (a *analyzer) nodeChanged(old, cur *corev1.Node) {
	if sameConditions(old.Status.Conditions, cur.Status.Conditions) {
		return
	}
	a.mu.Lock()
	var keys []string
	for key, gr := range a.rollouts {
		if gr.nodes[cur.Name] != nil {
			keys = append(keys, key)
		}
	}
	a.mu.Unlock()
	for _, key := range keys {
		a.enqueue(key)
	}
}

// sameConditions compares the types, statuses and transition times (not
// the heartbeats, which move every few seconds).
func sameConditions(a, b []corev1.NodeCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.NodeCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.LastTransitionTime.Equal(&y.LastTransitionTime) && x.Reason == y.Reason
	})
}

// checkNames are the checks that run apart from the Node conditions.
func checkNames(an *v1alpha1.RolloutAnalysis) []string {
	var out []string
	if an.Pods != nil {
		out = append(out, "pods")
	}
	for _, p := range an.Prometheus {
		out = append(out, "prometheus/"+p.Name)
	}
	for _, w := range an.Webhooks {
		out = append(out, "webhook/"+w.Name)
	}
	return out
}

// run starts the checks that are due, every analysisTickInterval, until
// ctx ends.
func (a *analyzer) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		t := a.clock.NewTimer(analysisTickInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		for _, job := range a.due() {
			wg.Go(func() { a.runCheck(ctx, job) })
		}
	}
}

// job is one check to run on one node.
type job struct {
	key, node, check string
	ro               *v1alpha1.ConfigRollout
	gn               *gateNode
	cs               *checkState
}

// due marks the checks whose time came as running and returns them.
func (a *analyzer) due() []job {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []job
	for key, gr := range a.rollouts {
		for node, gn := range gr.nodes {
			for name, cs := range gn.checks {
				if cs.running || now.Before(cs.next) {
					continue
				}
				cs.running = true
				out = append(out, job{key: key, node: node, check: name, ro: gr.ro, gn: gn, cs: cs})
			}
		}
	}
	return out
}

// errInconclusive marks a run that reached no verdict (an error).
var errInconclusive = errors.New("inconclusive")

// runCheck runs one check and records its verdict; a new failure, or a
// verdict on a soaking node, plans the rollout.
func (a *analyzer) runCheck(ctx context.Context, j job) {
	an := j.ro.Spec.Analysis
	interval, limit := podCheckInterval, int32(defaultErrorLimit)
	var failed string
	var err error
	kind, name, _ := strings.Cut(j.check, "/")
	switch kind {
	case "pods":
		if an.Pods != nil { // nil: edited away while this run was due
			failed, err = a.checkPods(ctx, an.Pods, j)
		}
	case "prometheus":
		for i := range an.Prometheus {
			if p := &an.Prometheus[i]; p.Name == name {
				interval, limit = external(&p.ExternalCheck)
				failed, err = a.gated(ctx, &p.ExternalCheck, func(ctx context.Context) (string, error) { return a.checkPrometheus(ctx, p, j.node) })
			}
		}
	case "webhook":
		for i := range an.Webhooks {
			if w := &an.Webhooks[i]; w.Name == name {
				interval, limit = external(&w.ExternalCheck)
				failed, err = a.gated(ctx, &w.ExternalCheck, func(ctx context.Context) (string, error) { return a.checkWebhook(ctx, w, j) })
			}
		}
	}
	now := a.clock.Now()
	a.mu.Lock()
	cs := j.cs
	cs.running = false
	cs.next = now.Add(interval)
	before := cs.failed
	var early tooEarly
	switch {
	case errors.As(err, &early):
		cs.next = early.until
	case errors.Is(err, errInconclusive):
		// Pods not Ready within their grace period: no verdict yet.
		cs.next = now.Add(time.Second)
	case err != nil:
		cs.errors++
		cs.lastErr = err.Error()
		// As Argo Rollouts counts them: limit errors in a row are
		// allowed, one more fails the node.
		if int32(cs.errors) > limit {
			cs.failed = fmt.Sprintf("%s: %d errors in a row, more than consecutiveErrorLimit %d, the last: %v", j.check, cs.errors, limit, err)
			cs.at = now
		}
	default:
		cs.errors, cs.lastErr = 0, ""
		cs.failed = failed
		cs.at = now
	}
	replan := cs.failed != before || (!j.gn.promotedAt.IsZero() && err == nil)
	a.mu.Unlock()
	if err != nil && !errors.Is(err, errInconclusive) && !errors.As(err, &early) {
		klog.FromContext(ctx).V(2).Info("Health check error", "rollout", j.key, "node", j.node, "check", j.check, "err", err)
	}
	if replan {
		a.enqueue(j.key)
	}
}

// external returns a check's interval and error limit.
func external(c *v1alpha1.ExternalCheck) (time.Duration, int32) {
	interval, limit := defaultCheckInterval, int32(defaultErrorLimit)
	if c.Interval != nil && c.Interval.Duration > 0 {
		interval = c.Interval.Duration
	}
	if c.ConsecutiveErrorLimit != nil && *c.ConsecutiveErrorLimit > 0 {
		limit = *c.ConsecutiveErrorLimit
	}
	return interval, limit
}

// gated runs an external check within its timeout, at most
// maxExternalChecks at once.
func (a *analyzer) gated(ctx context.Context, c *v1alpha1.ExternalCheck, run func(context.Context) (string, error)) (string, error) {
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-a.sem }()
	timeout := defaultCheckTimeout
	if c.Timeout != nil && c.Timeout.Duration > 0 {
		timeout = c.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return run(ctx)
}

// nodeVerdict checks a Node's own conditions against what it had when it
// was assigned: Ready must not turn anything else than True (for longer
// than the grace period: pending until then), the pressure conditions
// must not turn True, and the component conditions must not turn anything
// else than True. A condition counts as turned when its
// lastTransitionTime is at or after the assignment.
func nodeVerdict(an *v1alpha1.RolloutAnalysis, n *corev1.Node, assignedAt, now time.Time) (failed string, pending bool) {
	grace := defaultGrace
	na := an.Node
	if na != nil && na.GracePeriod != nil && na.GracePeriod.Duration >= 0 {
		grace = na.GracePeriod.Duration
	}
	turned := func(c *corev1.NodeCondition) bool { return !c.LastTransitionTime.Time.Before(assignedAt) }
	mustStayTrue := func(t string) string {
		c := findCondition(n, t)
		if c == nil || c.Status == corev1.ConditionTrue || !turned(c) {
			return ""
		}
		if since := now.Sub(c.LastTransitionTime.Time); since < grace {
			pending = true
			return ""
		}
		return fmt.Sprintf("%s is %s since %s (%s: %s)", t, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, cut(c.Message))
	}
	if na == nil || !na.Disabled {
		if why := mustStayTrue(string(corev1.NodeReady)); why != "" {
			return "node: " + why, false
		}
		types := defaultNewConditions
		if na != nil && len(na.Conditions) > 0 {
			types = na.Conditions
		}
		for _, t := range types {
			if c := findCondition(n, t); c != nil && c.Status == corev1.ConditionTrue && turned(c) {
				return fmt.Sprintf("node: %s turned True at %s (%s: %s)", t, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, cut(c.Message)), false
			}
		}
	}
	for _, t := range an.ComponentConditions {
		if why := mustStayTrue(t); why != "" {
			return "component condition " + why, false
		}
	}
	return "", pending
}

func findCondition(n *corev1.Node, t string) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if string(n.Status.Conditions[i].Type) == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// cut shortens what a check quotes from elsewhere.
func cut(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxAnswerShown {
		return s
	}
	return strings.ToValidUTF8(s[:maxAnswerShown], "") + "..."
}

// listPods lists the pods bound to a node (the selector's, when set), from
// the API server's watch cache, within the analyzer's rate limit.
func (a *analyzer) listPods(ctx context.Context, pa *v1alpha1.PodAnalysis, node string) ([]corev1.Pod, error) {
	sel := labels.Everything()
	if pa.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(pa.Selector)
		if err != nil {
			return nil, fmt.Errorf("spec.analysis.pods.selector: %w", err)
		}
		sel = s
	}
	if err := a.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	list, err := a.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", node).String(),
		LabelSelector:   sel.String(),
		ResourceVersion: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("list the pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// baseline lists the node's pods and remembers which failed and which
// were Ready.
func (a *analyzer) baseline(ctx context.Context, pa *v1alpha1.PodAnalysis, node string) (*podBaseline, error) {
	pods, err := a.listPods(ctx, pa, node)
	if err != nil {
		return nil, err
	}
	return baselineOf(pods), nil
}

// baselineOf takes the baseline of pods as they are now, in the form the
// claim keeps (nodeapi.BaselineOf).
func baselineOf(pods []corev1.Pod) *podBaseline {
	var failed, ready []types.UID
	for i := range pods {
		p := &pods[i]
		switch {
		case p.Status.Phase == corev1.PodFailed:
			failed = append(failed, p.UID)
		case podReady(p) != nil && podReady(p).Status == corev1.ConditionTrue:
			ready = append(ready, p.UID)
		}
	}
	return keysOf(nodeapi.BaselineOf(failed, ready))
}

// keysOf is a stored baseline as the checks use it. A claim's baseline
// was validated when it was decoded; one that does not decode is none.
func keysOf(s *nodeapi.PodBaseline) *podBaseline {
	failed, ready, err := s.Keys()
	if err != nil {
		return nil
	}
	return &podBaseline{failed: failed, ready: ready, stored: s}
}

// baselineAsOf rebuilds the baseline of a node assigned at assignedAt
// from its pods now, for a node whose claim carries none (assigned by a
// controller from before nodeapi.GateMemory), as far as the pods' own
// times tell: a pod created at or after the assignment is in neither
// list; a Failed pod is in the failed list unless its failure is dated
// (its Ready condition's last transition, its containers' termination) at
// or after the assignment; a pod is in the ready list if it is Ready, or
// if its Ready condition turned at or after the assignment (it was Ready
// before, or it would not have turned). A Failed pod with no date at all
// counts as failed before, as an older controller would have taken it:
// the upgrade of the controller must not fail a node for a pod that
// failed before it was assigned. The times are the kubelet's, compared
// with the controller's, as the Node conditions' are (nodeVerdict).
func baselineAsOf(pods []corev1.Pod, assignedAt time.Time) *podBaseline {
	b := &podBaseline{failed: map[nodeapi.PodKey]bool{}, ready: map[nodeapi.PodKey]bool{}}
	for i := range pods {
		p := &pods[i]
		if !p.CreationTimestamp.Time.Before(assignedAt) {
			continue
		}
		key := nodeapi.PodKeyOf(p.UID)
		c := podReady(p)
		turnedSince := c != nil && !c.LastTransitionTime.Time.Before(assignedAt)
		if p.Status.Phase == corev1.PodFailed {
			if at, dated := failedAt(p); !dated || at.Before(assignedAt) {
				b.failed[key] = true
				continue
			}
		}
		if c != nil && (c.Status == corev1.ConditionTrue || turnedSince) {
			b.ready[key] = true
		}
	}
	return b
}

// failedAt dates a Failed pod's failure: the latest of its Ready
// condition's last transition and its containers' terminations; false
// when it has none of them.
func failedAt(p *corev1.Pod) (time.Time, bool) {
	var at time.Time
	if c := podReady(p); c != nil && !c.LastTransitionTime.IsZero() {
		at = c.LastTransitionTime.Time
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.Time.After(at) {
			at = t.FinishedAt.Time
		}
	}
	return at, !at.IsZero()
}

func podReady(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// checkPods runs the pods check of one node.
func (a *analyzer) checkPods(ctx context.Context, pa *v1alpha1.PodAnalysis, j job) (string, error) {
	pods, err := a.listPods(ctx, pa, j.node)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	assignedAt := j.gn.assignedAt
	b := j.gn.baseline
	if b == nil {
		// Assigned by a controller from before the gate memory: its
		// claim carries no baseline. Rebuilt as of the assignment, as
		// far as the pods tell (baselineAsOf).
		j.gn.baseline = baselineAsOf(pods, assignedAt)
		b = j.gn.baseline
	}
	a.mu.Unlock()
	now := a.clock.Now()
	failed, err := podVerdict(pa, b, pods, now)
	if until := assignedAt.Add(podGrace(pa)); err == nil && failed == "" && now.Before(until) {
		// The kubelet reports the pods it rejects at its restart seconds
		// after it: nothing wrong seen yet is no pass before the grace
		// period since the assignment is over (a failure counts at once).
		return "", tooEarly{until}
	}
	return failed, err
}

// podGrace is spec.analysis.pods.gracePeriod, else defaultGrace.
func podGrace(pa *v1alpha1.PodAnalysis) time.Duration {
	if pa.GracePeriod != nil && pa.GracePeriod.Duration >= 0 {
		return pa.GracePeriod.Duration
	}
	return defaultGrace
}

// tooEarly is a pods check that found nothing wrong before the grace
// period since the assignment was over: no verdict, the check runs again
// at until.
type tooEarly struct{ until time.Time }

func (e tooEarly) Error() string {
	return "no verdict before " + e.until.UTC().Format(time.RFC3339)
}

// podVerdict judges the pods on a node against its baseline: the pods
// that newly failed, and the pods Ready at the baseline that are not
// Ready now (failed, or not Ready for longer than the grace period;
// errInconclusive while one is within it and would tip the count).
func podVerdict(pa *v1alpha1.PodAnalysis, b *podBaseline, pods []corev1.Pod, now time.Time) (string, error) {
	grace := podGrace(pa)
	var failed, unready, waiting []string
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		name, key := p.Namespace+"/"+p.Name, nodeapi.PodKeyOf(p.UID)
		if p.Status.Phase == corev1.PodFailed {
			if !b.failed[key] {
				why := p.Status.Reason
				if why == "" {
					why = "Failed"
				}
				failed = append(failed, name+" ("+why+")")
			}
			if b.ready[key] {
				unready = append(unready, name)
			}
			continue
		}
		if !b.ready[key] {
			continue
		}
		c := podReady(p)
		switch {
		case c != nil && c.Status == corev1.ConditionTrue:
		case c != nil && now.Sub(c.LastTransitionTime.Time) < grace:
			waiting = append(waiting, name)
		default:
			unready = append(unready, name)
		}
	}
	slices.Sort(failed)
	slices.Sort(unready)
	if pa.MaxNewFailures != nil && len(failed) > int(*pa.MaxNewFailures) {
		return fmt.Sprintf("pods: %d pods newly failed since the node was assigned (maxNewFailures %d): %s",
			len(failed), *pa.MaxNewFailures, abbreviateNames(failed)), nil
	}
	if pa.MaxUnready != nil {
		total := len(b.ready)
		allowed, err := intstr.GetScaledValueFromIntOrPercent(pa.MaxUnready, total, false)
		if err != nil {
			return "", fmt.Errorf("spec.analysis.pods.maxUnready: %w", err)
		}
		if len(unready) > allowed {
			return fmt.Sprintf("pods: %d of the %d pods Ready when the node was assigned are not Ready (maxUnready %s): %s",
				len(unready), total, pa.MaxUnready.String(), abbreviateNames(unready)), nil
		}
		if len(unready)+len(waiting) > allowed {
			return "", errInconclusive
		}
	}
	return "", nil
}

func abbreviateNames(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
}

// promResponse is the Prometheus HTTP API's answer to /api/v1/query.
type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// promSample is one sample of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// checkPrometheus runs a Prometheus check for a node: every sample of the
// query must be within [min, max]. An error (unreachable, an error answer,
// an empty result) is inconclusive.
func (a *analyzer) checkPrometheus(ctx context.Context, p *v1alpha1.PrometheusCheck, node string) (string, error) {
	query := strings.ReplaceAll(p.Query, "$node", node)
	u := strings.TrimRight(p.Address, "/") + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("prometheus %s: %w", p.Name, err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("prometheus %s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", fmt.Errorf("prometheus %s: reading the answer: %w", p.Name, err)
	}
	return promVerdict(p, query, resp.StatusCode, body)
}

// promVerdict judges a Prometheus answer (HTTP status code, body) to query:
// every sample within the check's bounds passes; an answer that is not a
// successful instant vector or scalar with data is an error.
func promVerdict(p *v1alpha1.PrometheusCheck, query string, code int, body []byte) (string, error) {
	minV, maxV, err := bounds(p)
	if err != nil {
		return "", err
	}
	var pr promResponse
	if err := json.Unmarshal(body, &pr); err != nil {
		return "", fmt.Errorf("prometheus %s: HTTP %d, an answer that does not decode: %w (%s)", p.Name, code, err, cut(string(body)))
	}
	if pr.Status != "success" {
		return "", fmt.Errorf("prometheus %s: HTTP %d, status %q: %s: %s", p.Name, code, cut(pr.Status), cut(pr.ErrorType), cut(pr.Error))
	}
	samples, err := promSamples(pr.Data.ResultType, pr.Data.Result)
	if err != nil {
		return "", fmt.Errorf("prometheus %s: %w", p.Name, err)
	}
	if len(samples) == 0 {
		return "", fmt.Errorf("prometheus %s: query %q returned no data", p.Name, query)
	}
	for _, s := range samples {
		v, err := sampleValue(s.Value)
		if err != nil {
			return "", fmt.Errorf("prometheus %s: %w", p.Name, err)
		}
		if math.IsNaN(v) || v < minV || v > maxV {
			return fmt.Sprintf("prometheus %s: %s%s is %g, outside [%s, %s]", p.Name, query, labelsOf(s.Metric), v,
				boundString(p.Min, "-Inf"), boundString(p.Max, "+Inf")), nil
		}
	}
	return "", nil
}

func bounds(p *v1alpha1.PrometheusCheck) (lo, hi float64, err error) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if p.Min != nil {
		if lo, err = strconv.ParseFloat(*p.Min, 64); err != nil {
			return 0, 0, fmt.Errorf("spec.analysis.prometheus[%s].min: %w", p.Name, err)
		}
	}
	if p.Max != nil {
		if hi, err = strconv.ParseFloat(*p.Max, 64); err != nil {
			return 0, 0, fmt.Errorf("spec.analysis.prometheus[%s].max: %w", p.Name, err)
		}
	}
	return lo, hi, nil
}

func boundString(v *string, none string) string {
	if v == nil {
		return none
	}
	return *v
}

func promSamples(resultType string, raw json.RawMessage) ([]promSample, error) {
	switch resultType {
	case "vector":
		var out []promSample
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("a vector that does not decode: %w", err)
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("a scalar that does not decode: %w", err)
		}
		return []promSample{{Value: v}}, nil
	}
	return nil, fmt.Errorf("result type %q: want an instant vector or a scalar", resultType)
}

func sampleValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return f, nil
}

// labelsOf names a sample by its labels (" at {a="b"}"); "" for a scalar.
func labelsOf(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return " at {" + strings.Join(parts, ",") + "}"
}

// checkWebhook asks a webhook for go or no-go on a node: a 2xx answer is
// go; a 4xx answer is an explicit no-go, with the answer's start as the
// reason, except 408 and 429 (the webhook could not answer now). Those,
// any other answer (a 5xx: the webhook failed) and no answer
// (unreachable, a timeout) are errors (webhookAnswer).
func (a *analyzer) checkWebhook(ctx context.Context, w *v1alpha1.WebhookCheck, j job) (string, error) {
	ro := j.ro
	phase := "Trial"
	a.mu.Lock()
	if !j.gn.promotedAt.IsZero() {
		phase = "Soak"
	}
	assignedAt := j.gn.assignedAt
	a.mu.Unlock()
	body := v1alpha1.WebhookRequest{
		Rollout: v1alpha1.WebhookRollout{Namespace: ro.Namespace, Name: ro.Name, UID: string(ro.UID)},
		Node:    j.node, Component: nodeapi.ComponentOrDefault(ro.Spec.Component), Phase: phase, AssignedAt: metav1.NewTime(assignedAt),
		ConfigMap: v1alpha1.WebhookConfigMap{Namespace: ro.Namespace, Name: ro.Spec.ConfigMapName},
	}
	if cm := ro.Status.ConfigMap; cm != nil {
		body.ConfigMap.UID, body.ConfigMap.ResourceVersion = string(cm.UID), cm.ResourceVersion
	}
	b, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", w.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("webhook %s: %w", w.Name, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return webhookAnswer(w.Name, resp.StatusCode, answer)
}

// webhookAnswer judges a webhook's answer: 2xx go, 4xx (but 408 and 429)
// no-go; any other is an error that counts toward consecutiveErrorLimit,
// as Argo Rollouts counts a web metric's non-2xx answer: a webhook that
// fails or is overloaded says nothing about the node.
func webhookAnswer(name string, code int, answer []byte) (failed string, err error) {
	switch {
	case code >= 200 && code < 300:
		return "", nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return fmt.Sprintf("webhook %s: no-go (HTTP %d): %s", name, code, cut(string(answer))), nil
	}
	return "", fmt.Errorf("webhook %s: HTTP %d, no verdict: %s", name, code, cut(string(answer)))
}
