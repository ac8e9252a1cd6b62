//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// rolloutPackage is the rollout controller's command.
const rolloutPackage = "github.com/dynconfig/dynconfig/cmd/dynconfig-rollout"

// The Lease timings of the replicas in processes: short, so that a
// failover takes seconds.
const (
	procLeaseDuration = 3 * time.Second
	procRenewDeadline = 2 * time.Second
	procRetryPeriod   = 500 * time.Millisecond
)

// nodePatches is the series of the assignment and revert patches: PATCH of
// the Node itself. The simulated components write only nodes/status.
var nodePatches = requestKey{verb: "PATCH", resource: "nodes"}

// patchCounts counts the PATCHes of Nodes by response code.
type patchCounts map[string]float64

// nodePatchCounts reads the API server's count of Node PATCHes (not
// nodes/status) by response code.
func nodePatchCounts(ctx context.Context, t *testing.T, h *harness) patchCounts {
	t.Helper()
	body, err := h.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("scraping /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := patchCounts{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		if keyOf(m.GetLabel()) != nodePatches {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// sub returns c - prev.
func (c patchCounts) sub(prev patchCounts) patchCounts {
	out := patchCounts{}
	for code, v := range c {
		if d := v - prev[code]; d != 0 {
			out[code] = d
		}
	}
	return out
}

// applied counts the PATCHes the API server answered with success: a
// request it refused (429 under load, retried by client-go) changed
// nothing.
func (c patchCounts) applied() int {
	n := 0.0
	for code, v := range c {
		if strings.HasPrefix(code, "2") {
			n += v
		}
	}
	return int(n)
}

// TestRolloutProcessFailover runs two replicas of the dynconfig-rollout
// binary with leader election and ends the leader mid-rollout: with
// SIGKILL (the Lease is not released; the other replica takes it when it
// expires) and with SIGTERM (the leader releases the Lease and exits 0;
// the other takes it at once). Either way the rollout completes with one
// assignment PATCH per node, and the revert records survive for undo.
func TestRolloutProcessFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes: skipped with -short")
	}
	dir := t.TempDir()
	bin := rolloutBin.Build(t)
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)
	installRolloutCRD(ctx, t, h)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, h.cl.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("SIGKILL of the leader", func(t *testing.T) {
		const n = 10
		ctx := testContext(t, 4*time.Minute)
		f := startFleet(ctx, t, h, "pkill", n, nil)
		lease := objectName(t, "lease")
		lw := watchLease(ctx, t, h, lease)
		replicas := startReplicas(t, bin, kubeconfig, lease, f.label, "a", "b")
		lw.waitHolder(t, "a replica holds the Lease", func(id string) bool { return replicas[id] != nil })
		before, beforePatches := requestCountsOf(ctx, t, h), nodePatchCounts(ctx, t, h)
		aw := watchAssignments(ctx, t, f)
		ro := f.rollout("kill", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(2)), nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		})
		logRolloutOnFailure(ctx, t, f, ro)
		// Kill the leader twice: once early in the last step, and again,
		// after the killed replica came back (as its Deployment would
		// restart it), near the end.
		var survivor string
		for _, at := range []int{4, 8} {
			f.waitFor(ctx, ro, fmt.Sprintf("%d assigned", at), func(r *v1alpha1.ConfigRollout) bool { return int(r.Status.Assigned) >= at })
			victim := leaseHolder(ctx, t, h, lease)
			if replicas[victim] == nil {
				t.Fatalf("the Lease is held by %q, not by a replica (holders %v)", victim, lw.holders())
			}
			survivor = otherReplica(victim)
			replicas[victim].Kill() // SIGKILL: no release of the Lease, no last write
			killed := time.Now()
			atKill, err := f.get(ctx, ro)
			if err != nil {
				t.Fatal(err)
			}
			// The first kill must leave nodes to assign; the second, on a
			// busy machine, may come after the last assignment, with
			// promotions still to observe.
			if (at == 4 && int(atKill.Status.Assigned) >= n) || atKill.Status.Phase != v1alpha1.PhaseProgressing {
				t.Fatalf("at the kill the rollout had %d nodes assigned of %d, phase %s: nothing left for the other replica",
					atKill.Status.Assigned, n, atKill.Status.Phase)
			}
			if code := replicas[victim].Code(); code != -1 {
				t.Errorf("replica %s exited with code %d, want -1 (killed by a signal)", victim, code)
			}
			took := lw.waitHolder(t, "replica "+survivor+" takes the Lease", func(id string) bool { return id == survivor }).Sub(killed)
			t.Logf("killed replica %s at %d of %d nodes assigned; %s took the Lease %v later (lease duration %v)",
				victim, atKill.Status.Assigned, n, survivor, took.Round(time.Millisecond), procLeaseDuration)
			replicas[victim] = startReplicas(t, bin, kubeconfig, lease, f.label, victim)[victim]
		}
		f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		f.wantAll(ctx, f.newCM)
		if lw.released() {
			t.Errorf("the Lease was released, but every replica that lost it was killed: holders %v", lw.holders())
		}

		// Every node ended on the new ConfigMap, so each got at least one
		// assignment; as many PATCHes as nodes means exactly one each, and
		// no revert.
		d := requestCountsOf(ctx, t, h).sub(before)
		p := nodePatchCounts(ctx, t, h).sub(beforePatches)
		t.Logf("Node PATCHes by response code: %v", p)
		if p.applied() != n {
			t.Errorf("%d Node PATCHes applied for %d nodes (by code %v), want exactly one assignment each and no revert; all requests: %v",
				p.applied(), n, p, d)
		}
		if u := d[requestKey{verb: "UPDATE", resource: "nodes"}]; u != 0 {
			t.Errorf("%v Node UPDATEs, want none", u)
		}
		checkClaims(ctx, t, f, ro, true)
		aw.check(t, f, "old", "new")

		// The revert records survived the kill: undo puts every node back
		// on its previous source, with one revert PATCH each.
		f.patchSpec(ctx, ro, `{"spec":{"undo":true}}`)
		f.waitPhase(ctx, ro, v1alpha1.PhaseReverted)
		f.waitReleased(ctx, ro)
		checkClaims(ctx, t, f, ro, false)
		f.waitAll(ctx, f.oldCM)
		if p := nodePatchCounts(ctx, t, h).sub(beforePatches); p.applied() != 2*n {
			t.Errorf("%d Node PATCHes applied after the undo (by code %v), want %d (one assignment and one revert each)", p.applied(), p, 2*n)
		}
		aw.check(t, f, "old", "new", "old")
		if replicas[survivor].Exited() {
			t.Errorf("replica %s exited with code %d", survivor, replicas[survivor].Code())
		}
	})

	t.Run("SIGTERM of the leader", func(t *testing.T) {
		const n = 6
		ctx := testContext(t, 4*time.Minute)
		f := startFleet(ctx, t, h, "pterm", n, nil)
		lease := objectName(t, "lease")
		lw := watchLease(ctx, t, h, lease)
		replicas := startReplicas(t, bin, kubeconfig, lease, f.label, "a", "b")
		lw.waitHolder(t, "a replica holds the Lease", func(id string) bool { return replicas[id] != nil })
		beforePatches := nodePatchCounts(ctx, t, h)
		aw := watchAssignments(ctx, t, f)
		ro := f.rollout("term", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(2)), nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		})
		logRolloutOnFailure(ctx, t, f, ro)
		f.waitFor(ctx, ro, "2 assigned", func(r *v1alpha1.ConfigRollout) bool { return r.Status.Assigned >= 2 })

		victim := leaseHolder(ctx, t, h, lease)
		if replicas[victim] == nil {
			t.Fatalf("the Lease is held by %q, not by a replica", victim)
		}
		survivor := otherReplica(victim)
		termed := time.Now()
		if code := replicas[victim].Terminate(t); code != 0 {
			t.Errorf("replica %s exited with code %d after SIGTERM, want 0", victim, code)
		}
		exited := time.Since(termed)
		took := lw.waitHolder(t, "replica "+survivor+" takes the Lease", func(id string) bool { return id == survivor }).Sub(termed)
		t.Logf("SIGTERM of replica %s: exited after %v; %s took the Lease %v after the signal (lease duration %v)",
			victim, exited.Round(time.Millisecond), survivor, took.Round(time.Millisecond), procLeaseDuration)
		if got, want := lw.sequence(), []string{victim, "", survivor}; !slices.Equal(got, want) {
			t.Errorf("replica %s did not release the Lease on SIGTERM: holders %q, want %q (%v)", victim, got, want, lw.holders())
		}
		// Released, the Lease is free at once; held, it would be free only
		// a lease duration after the last renewal.
		if took >= procLeaseDuration {
			t.Errorf("replica %s took the Lease %v after the SIGTERM of %s, want less than the lease duration %v",
				survivor, took, victim, procLeaseDuration)
		}
		f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		f.wantAll(ctx, f.newCM)
		if p := nodePatchCounts(ctx, t, h).sub(beforePatches); p.applied() != n {
			t.Errorf("%d Node PATCHes applied for %d nodes (by code %v), want exactly one assignment each", p.applied(), n, p)
		}
		checkClaims(ctx, t, f, ro, true)
		aw.check(t, f, "old", "new")
		if replicas[survivor].Exited() {
			t.Errorf("replica %s exited with code %d", survivor, replicas[survivor].Code())
		}
	})
}

// startReplicas starts one dynconfig-rollout process per identity, all on
// the Lease default/lease and watching only the Nodes of nodeSelector (the
// rollouts of the other subtests, over other nodes, stay out of their
// requests). Their stderr is logged when the test fails.
func startReplicas(t *testing.T, bin, kubeconfig, lease, nodeSelector string, ids ...string) map[string]*proctest.Proc {
	t.Helper()
	procs := map[string]*proctest.Proc{}
	var started []*proctest.Proc
	for _, id := range ids {
		p := proctest.Start(t, bin, []string{
			"--kubeconfig=" + kubeconfig, "--leader-elect", "--lease-namespace=" + metav1.NamespaceDefault,
			"--lease-name=" + lease, "--identity=" + id,
			"--lease-duration=" + procLeaseDuration.String(), "--renew-deadline=" + procRenewDeadline.String(),
			"--retry-period=" + procRetryPeriod.String(), "--metrics-address=", "--node-selector=" + nodeSelector,
		}, nil)
		procs[id] = p
		started = append(started, p)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, p := range started {
			state := "running"
			if p.Exited() {
				state = fmt.Sprintf("exited with code %d", p.Code())
			}
			t.Logf("replica %s (pid %d, %s) stderr:\n%s", ids[i], p.PID(), state, proctest.Tail(p.Stderr(), 60))
		}
	})
	return procs
}

func otherReplica(id string) string {
	if id == "a" {
		return "b"
	}
	return "a"
}

func requestCountsOf(ctx context.Context, t *testing.T, h *harness) requestCount {
	t.Helper()
	c, err := requestCounts(ctx, h.client)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func leaseHolder(ctx context.Context, t *testing.T, h *harness, name string) string {
	t.Helper()
	l, err := h.client.CoordinationV1().Leases(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading Lease %s: %v", name, err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// checkClaims checks the revert records, which are on the Nodes: while
// claimed, every node of the fleet carries the rollout's claim with its
// previous source, the old ConfigMap; once released, none does. The
// status holds no per-node record.
func checkClaims(ctx context.Context, t *testing.T, f *fleet, name string, claimed bool) {
	t.Helper()
	ro, err := f.get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(ro.Status.Nodes) != 0 {
		t.Errorf("ConfigRollout %s: %d per-node records in the status", name, len(ro.Status.Nodes))
	}
	claims := f.claims(ctx, ro)
	if !claimed {
		if len(claims) != 0 {
			t.Errorf("%d nodes still carry the claim of ConfigRollout %s", len(claims), name)
		}
		return
	}
	for node, c := range claims {
		p := c.Previous
		if p == nil || p.ConfigMap == nil || p.ConfigMap.UID != f.oldCM.UID ||
			p.ConfigMap.Name != f.oldCM.Name || p.ConfigMap.Namespace != f.oldCM.Namespace {
			t.Errorf("node %s: previous source %s, want ConfigMap %s/%s (uid %s)",
				node, mustJSON(p), f.oldCM.Namespace, f.oldCM.Name, f.oldCM.UID)
		}
	}
	if len(claims) != len(f.names) {
		t.Errorf("%d nodes carry the claim, want all %d", len(claims), len(f.names))
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// leaseWatch records every holder of a Lease, as a watch sees it.
type leaseWatch struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	seen    []holderChange
	err     error
}

type holderChange struct {
	holder string
	at     time.Time
}

func (c holderChange) String() string {
	h := c.holder
	if h == "" {
		h = `""`
	}
	return c.at.Format("15:04:05.000") + " " + h
}

// watchLease starts a watch on the Lease default/name (which may not
// exist yet) until ctx ends.
func watchLease(ctx context.Context, t *testing.T, h *harness, name string) *leaseWatch {
	t.Helper()
	w, err := h.client.CoordinationV1().Leases(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		t.Fatalf("watching Lease %s: %v", name, err)
	}
	lw := &leaseWatch{changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				lw.fail(fmt.Errorf("watch of Lease %s: %v", name, ev.Object))
				return
			}
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			lw.observe(ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		if ctx.Err() == nil {
			lw.fail(fmt.Errorf("the watch of Lease %s ended", name))
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return lw
}

func (lw *leaseWatch) observe(holder string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if n := len(lw.seen); n > 0 && lw.seen[n-1].holder == holder {
		return // a renewal
	}
	lw.seen = append(lw.seen, holderChange{holder, time.Now()})
	close(lw.changed)
	lw.changed = make(chan struct{})
}

func (lw *leaseWatch) fail(err error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.err = err
	close(lw.changed)
	lw.changed = make(chan struct{})
}

func (lw *leaseWatch) holders() []holderChange {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return append([]holderChange(nil), lw.seen...)
}

// waitHolder waits until the latest holder satisfies ok and returns when
// the watch saw it become the holder.
func (lw *leaseWatch) waitHolder(t *testing.T, what string, ok func(id string) bool) time.Time {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		lw.mu.Lock()
		seen, err, changed := lw.seen, lw.err, lw.changed
		lw.mu.Unlock()
		if n := len(seen); n > 0 && ok(seen[n-1].holder) {
			return seen[n-1].at
		}
		if err != nil {
			t.Fatalf("waiting until %s: %v; holders %v", what, err, seen)
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("waiting until %s: not after %v; holders %v", what, waitTimeout, seen)
		}
	}
}

// released reports whether the Lease was ever released: a holder "" (what
// the elector writes on release).
func (lw *leaseWatch) released() bool {
	return slices.ContainsFunc(lw.holders(), func(c holderChange) bool { return c.holder == "" })
}

// sequence returns the holders in the order they held the Lease.
func (lw *leaseWatch) sequence() []string {
	var out []string
	for _, c := range lw.holders() {
		out = append(out, c.holder)
	}
	return out
}

// assignmentWatch records, per node of a fleet, every value its
// assignment annotation took, as a watch of the Nodes sees it: "old" and
// "new" for the fleet's ConfigMaps.
type assignmentWatch struct {
	mu   sync.Mutex
	seen map[string][]string
	err  error
}

func watchAssignments(ctx context.Context, t *testing.T, f *fleet) *assignmentWatch {
	t.Helper()
	w, err := f.h.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: f.label})
	if err != nil {
		t.Fatalf("watching the Nodes: %v", err)
	}
	aw := &assignmentWatch{seen: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				aw.mu.Lock()
				aw.err = fmt.Errorf("watch of the Nodes: %s %v", ev.Type, ev.Object)
				aw.mu.Unlock()
				return
			}
			aw.observe(n.Name, f.describe(n.Annotations[nodeapi.AssignmentAnnotation]))
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return aw
}

func (f *fleet) describe(annotation string) string {
	var src corev1.NodeConfigSource
	if err := json.Unmarshal([]byte(annotation), &src); err != nil || src.ConfigMap == nil {
		return fmt.Sprintf("%q", annotation)
	}
	switch src.ConfigMap.UID {
	case f.oldCM.UID:
		return "old"
	case f.newCM.UID:
		return "new"
	}
	return src.ConfigMap.Name
}

func (aw *assignmentWatch) observe(node, value string) {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if s := aw.seen[node]; len(s) == 0 || s[len(s)-1] != value {
		aw.seen[node] = append(s, value)
	}
}

// check fails the test for every node whose assignments were not want,
// once the watch has caught up with what the caller saw (a short wait).
func (aw *assignmentWatch) check(t *testing.T, f *fleet, want ...string) {
	t.Helper()
	var bad []string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		aw.mu.Lock()
		err := aw.err
		bad = bad[:0]
		for _, name := range f.names {
			if got := aw.seen[name]; !slices.Equal(got, want) {
				bad = append(bad, fmt.Sprintf("node %s was assigned %v", name, got))
			}
		}
		aw.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) == 0 || time.Now().After(end) {
			break
		}
	}
	for _, b := range bad {
		t.Errorf("%s, want %v", b, want)
	}
}

// logRolloutOnFailure logs the rollout's history and records when the test
// fails.
func logRolloutOnFailure(ctx context.Context, t *testing.T, f *fleet, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ro, err := f.get(context.WithoutCancel(ctx), name)
		if err != nil {
			t.Logf("ConfigRollout %s: %v", name, err)
			return
		}
		logHistory(t, ro)
		for name, c := range f.claims(context.WithoutCancel(ctx), ro) {
			t.Logf("  claim on %s: step %d assigned %s %s", name, c.Step, c.AssignedAt.Format("15:04:05"), c.Failed)
		}
	})
}
