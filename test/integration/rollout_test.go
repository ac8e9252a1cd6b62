package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/controller"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// rolloutCRD is the checked-in CRD the tests install.
const rolloutCRD = "../../deploy/rollout/dynconfig.io_configrollouts.yaml"

// rolloutTrial is the trial duration of the rollouts' ConfigMaps: short, so
// that a step waits for real promotions without making the test slow.
const rolloutTrial = "1s"

// TestRollout runs ConfigRollouts against a real API server, over
// simulated nodes: each a real dynconfig Controller in reload mode (as in
// TestScale) on its own Node, reporting its ConfigStatus.
func TestRollout(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 15*time.Minute)
	installRolloutCRD(ctx, t, h)

	t.Run("good config in steps", func(t *testing.T) {
		n := 100
		if testing.Short() {
			n = 20
		}
		ctx := testContext(t, 10*time.Minute)
		f := startFleet(ctx, t, h, "good", n, nil)
		rc := startRolloutController(ctx, t, h, "a", nil)
		ro := f.rollout("good", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("10%")),
				nodesStep(intstr.FromString("50%")), nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromString("10%"))
		})
		maxU := max(1, n/10)
		start := time.Now()
		watch := f.watchInvariants(ctx, ro, maxU)
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		if err := watch(); err != nil {
			t.Error(err)
		}
		took := time.Since(start)
		if got.Status.Promoted != int32(n) || got.Status.Failed != 0 || len(got.Status.Nodes) != 0 || len(f.claims(ctx, got)) != n {
			t.Fatalf("completed with %+v, %d nodes claimed", countsOf(got), len(f.claims(ctx, got)))
		}
		f.wantAll(ctx, f.newCM)
		st := rc.Stats()
		assigns, reverts := rc.patches()
		t.Logf("%d nodes, steps 1, 10%%, 50%%, 100%%, maxUnavailable %d, trial %s: completed in %v; %d assignment patches, %d reverts, %d status writes (%.2f writes per node), %v planning and writing",
			n, maxU, rolloutTrial, took.Round(time.Millisecond), assigns, reverts, st.StatusWrites,
			float64(st.Assignments+st.Reverts+st.StatusWrites)/float64(n), st.ReconcileTime.Round(time.Millisecond))
		if assigns != n || reverts != 0 {
			t.Errorf("%d assignment patches and %d reverts for %d nodes, want one assignment each", assigns, reverts, n)
		}

		// Undo of the completed rollout: every node back on the old one.
		f.patchSpec(ctx, ro, `{"spec":{"undo":true}}`)
		got = f.waitPhase(ctx, ro, v1alpha1.PhaseReverted)
		f.waitAll(ctx, f.oldCM)
		f.waitReleased(ctx, ro)
		if _, reverts := rc.patches(); reverts != n {
			t.Errorf("undo made %d reverts, want %d", reverts, n)
		}
	})

	t.Run("canary fails", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "canary", 6, func(node string) bool { return true })
		rc := startRolloutController(ctx, t, h, "a", nil)
		ro := f.rollout("canary", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		if !strings.Contains(got.Status.Message, "1 nodes failed, more than maxFailures 0") ||
			!strings.Contains(got.Status.Message, f.names[0]) {
			t.Errorf("halt message %q", got.Status.Message)
		}
		got = f.waitReleased(ctx, ro)
		if len(got.Status.Failures) != 1 || got.Status.Failures[0].Node != f.names[0] {
			t.Fatalf("failures %+v, want the canary only", got.Status.Failures)
		}
		f.waitAll(ctx, f.oldCM)
		if assigns, reverts := rc.patches(); assigns != 1 || reverts != 1 {
			t.Errorf("%d assignments and %d reverts, want 1 and 1 (the canary)", assigns, reverts)
		}
		f.wantEvent(ctx, ro, "Halted")
		f.wantEvent(ctx, ro, "Reverting")
	})

	t.Run("canary crash-loops (real processes)", func(t *testing.T) {
		if testing.Short() {
			t.Skip("real processes: skipped with -short")
		}
		ctx := testContext(t, 8*time.Minute)
		bin := kubeletLikeBin.Build(t)
		dir := t.TempDir()
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, h.cl.KubeConfig, 0o600); err != nil {
			t.Fatal(err)
		}
		const threshold = 1
		f := &fleet{t: t, h: h, dyn: dynamic.NewForConfigOrDie(h.cl.Config), label: "rollout-test-crash", prefix: "crash"}
		f.oldCM = h.createTrialConfigMap(ctx, t, objectName(t, "old"), kubeletPayload(42), "1s", threshold)
		f.newCM = h.createTrialConfigMap(ctx, t, objectName(t, "crash"),
			kubeletPayload(77)+"providerID: "+demoCrashProviderID+"\n", "10m", threshold)
		loops := map[string]*proctest.RestartLoop{}
		for i := range 3 {
			name := fmt.Sprintf("ro-crash-%03d", i)
			f.names = append(f.names, name)
			if _, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{f.label: "true"},
				Annotations: map[string]string{nodeapi.AssignmentAnnotation: assignmentFor(f.oldCM)},
			}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			loops[name] = proctest.StartLoop(t, bin, []string{
				"--kubeconfig=" + kubeconfig, "--node-name=" + name, "--dynamic-config-dir=" + filepath.Join(dir, name),
				"--port=0", "--status-file=" + filepath.Join(dir, name+".json"),
			}, nil)
		}
		f.waitAll(ctx, f.oldCM)
		starts := map[string]int{}
		for name, l := range loops {
			starts[name] = len(l.All())
		}
		rc := startRolloutController(ctx, t, h, "a", nil)
		ro := f.rollout("crash", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
			s.ProgressDeadlineSeconds = ptr.To(int32(300))
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		if !strings.Contains(got.Status.Message, f.names[0]) || !strings.Contains(got.Status.Message, "RolledBack") {
			t.Errorf("halt message %q: want the canary %s rolled back by its component", got.Status.Message, f.names[0])
		}
		got = f.waitReleased(ctx, ro)
		if len(got.Status.Failures) != 1 || got.Status.Failures[0].Node != f.names[0] {
			t.Fatalf("failures %+v, want the canary only", got.Status.Failures)
		}
		f.waitAll(ctx, f.oldCM)
		if assigns, reverts := rc.patches(); assigns != 1 || reverts != 1 {
			t.Errorf("%d assignments and %d reverts, want 1 and 1 (the canary)", assigns, reverts)
		}
		if n := len(loops[f.names[0]].All()) - starts[f.names[0]]; n < threshold+2 {
			t.Errorf("the canary started %d times after the assignment, want at least %d (a crash loop)", n, threshold+2)
		}
		for _, name := range f.names[1:] {
			if n := len(loops[name].All()); n != starts[name] {
				t.Errorf("node %s was started %d times more: it should never have seen the crash config\n%s",
					name, n-starts[name], proctest.DescribeProcs(loops[name].All()))
			}
		}
	})

	t.Run("maxFailures 2 halts on the third failure", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		// Nodes 1-4 cannot apply the new config; node 0 (the canary) can.
		bad := map[int]bool{1: true, 2: true, 3: true, 4: true}
		var f *fleet
		f = startFleet(ctx, t, h, "maxfail", 12, func(node string) bool { return bad[f.index(node)] })
		rc := startRolloutController(ctx, t, h, "a", nil)
		ro := f.rollout("maxfail", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("50%")), nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromInt32(5))
			s.MaxFailures = 2
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		if got.Status.Failed < 3 || !strings.Contains(got.Status.Message, "more than maxFailures 2") {
			t.Errorf("halted with %d failures: %q", got.Status.Failed, got.Status.Message)
		}
		got = f.waitReleased(ctx, ro)
		f.waitAll(ctx, f.oldCM)
		for _, fl := range got.Status.Failures {
			if i := f.index(fl.Node); i < 1 || i > 4 {
				t.Errorf("node %s failed: %s; want only nodes 1-4", fl.Node, fl.Reason)
			}
		}
		if assigns, reverts := rc.patches(); assigns != 6 || reverts != 6 {
			t.Errorf("%d assignments, %d reverts; want 6 and 6", assigns, reverts)
		}
	})

	t.Run("pause and resume, then abort", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "pause", 6, nil)
		startRolloutController(ctx, t, h, "a", nil)
		ro := f.rollout("pause", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), {Pause: &v1alpha1.RolloutPause{}},
				nodesStep(intstr.FromInt32(3)), nodesStep(intstr.FromString("100%"))}
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhasePaused)
		if got.Status.CurrentStep != 1 || got.Status.Promoted != 1 {
			t.Fatalf("paused at step %d with %d promoted, want step 1 after the canary", got.Status.CurrentStep, got.Status.Promoted)
		}
		f.stays(ctx, ro, 3*time.Second, func(r *v1alpha1.ConfigRollout) bool { return r.Status.Assigned == 1 })
		f.patchSpec(ctx, ro, `{"spec":{"resumedStep":1}}`)
		f.waitFor(ctx, ro, "3 nodes promoted", func(r *v1alpha1.ConfigRollout) bool { return r.Status.Promoted >= 3 })
		f.patchSpec(ctx, ro, `{"spec":{"paused":true}}`)
		got = f.waitPhase(ctx, ro, v1alpha1.PhasePaused)
		held := got.Status.Assigned
		f.stays(ctx, ro, 3*time.Second, func(r *v1alpha1.ConfigRollout) bool { return r.Status.Assigned == held })
		f.patchSpec(ctx, ro, `{"spec":{"abort":true}}`)
		got = f.waitPhase(ctx, ro, v1alpha1.PhaseAborted)
		claimed := f.claims(ctx, got)
		if len(claimed) != int(held) {
			t.Errorf("abort changed the claims: %d nodes claimed, %d were assigned", len(claimed), held)
		}
		f.stays(ctx, ro, 2*time.Second, func(r *v1alpha1.ConfigRollout) bool { return r.Status.Assigned == held })
		// What was done stays.
		for name := range claimed {
			f.waitNode(ctx, name, f.newCM)
		}
		// The CRD refuses to take abort back.
		err := f.tryPatchSpec(ctx, ro, `{"spec":{"abort":false}}`)
		if err == nil || !strings.Contains(err.Error(), "abort cannot be undone") {
			t.Errorf("abort: false was accepted or refused for another reason: %v", err)
		}
	})

	t.Run("overlapping rollout refused; a metadata edit of the immutable ConfigMap does not halt", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "overlap", 4, nil)
		startRolloutController(ctx, t, h, "a", nil)
		first := f.rollout("first", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), {Pause: &v1alpha1.RolloutPause{}}, nodesStep(intstr.FromString("100%"))}
		})
		f.waitPhase(ctx, first, v1alpha1.PhasePaused)
		other := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "other"), maxPods: 77, trial: rolloutTrial, immutable: true})
		second := f.rolloutOf("second", other.Name, func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		})
		got := f.waitFor(ctx, second, "Conflict", func(r *v1alpha1.ConfigRollout) bool {
			return conditionTrue(r, v1alpha1.ConditionConflict)
		})
		if got.Status.Phase != v1alpha1.PhasePending || len(f.claims(ctx, got)) != 0 || !strings.Contains(got.Status.Message, first) {
			t.Errorf("second rollout: phase %s, %d nodes claimed, message %q", got.Status.Phase, len(f.claims(ctx, got)), got.Status.Message)
		}
		f.stays(ctx, second, 2*time.Second, func(r *v1alpha1.ConfigRollout) bool { return r.Status.Assigned == 0 })

		// The first rollout's ConfigMap is immutable: its config cannot be
		// edited under it. Editing its metadata (a new resourceVersion) is
		// no new config: the rollout neither halts nor reverts the canary.
		cm, err := h.client.CoreV1().ConfigMaps(namespace).Get(ctx, f.newCM.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edited := cm.DeepCopy()
		edited.Data[kubelet.PayloadKey] = kubeletPayload(55)
		if _, err := h.client.CoreV1().ConfigMaps(namespace).Update(ctx, edited, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Fatalf("editing the data of an immutable ConfigMap: %v, want Invalid", err)
		}
		cm.Labels = map[string]string{"edited": "true"}
		if _, err := h.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.stays(ctx, first, 3*time.Second, func(r *v1alpha1.ConfigRollout) bool {
			return r.Status.Phase == v1alpha1.PhasePaused && r.Status.Assigned == 1 && !conditionTrue(r, v1alpha1.ConditionHalted)
		})
		f.patchSpec(ctx, first, `{"spec":{"resumedStep":1}}`)
		f.waitPhase(ctx, first, v1alpha1.PhaseCompleted)
		// The first one is no longer active: the second starts (and may
		// take the first one's nodes at once).
		f.waitPhase(ctx, second, v1alpha1.PhaseCompleted)
		f.waitAll(ctx, other)
	})

	t.Run("least-privilege identity", func(t *testing.T) {
		// The controller on the ServiceAccount and grants of
		// deploy/overlays/cluster-wide/rbac.yaml, holding the Lease it names.
		ctx := testContext(t, 5*time.Minute)
		if _, err := h.cl.ApplyManifests(ctx, rolloutRBAC); err != nil {
			t.Fatal(err)
		}
		cfg, err := h.cl.ServiceAccountConfig(ctx, "kube-system", "dynconfig-rollout")
		if err != nil {
			t.Fatal(err)
		}
		waitAllowed(ctx, t, cfg)
		f := startFleet(ctx, t, h, "lp", 4, func(node string) bool { return strings.HasSuffix(node, "-001") })
		rc := startRolloutControllerAs(ctx, t, cfg, replica{leaseNamespace: "kube-system", lease: "dynconfig-rollout", identity: "lp"})
		ro := f.rollout("lp", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		if !strings.Contains(got.Status.Message, f.names[1]) {
			t.Errorf("halt message %q, want node %s", got.Status.Message, f.names[1])
		}
		f.waitReleased(ctx, ro)
		f.waitAll(ctx, f.oldCM)
		f.wantEvent(ctx, ro, "Halted")
		if assigns, reverts := rc.patches(); assigns != 2 || reverts != 2 {
			t.Errorf("%d assignments, %d reverts; want 2 and 2", assigns, reverts)
		}
	})

	t.Run("deletion", func(t *testing.T) { testRolloutDeletion(t, h) })

	t.Run("status of 50000 nodes", func(t *testing.T) { testRolloutStatusSize(t, h) })

	t.Run("a controller of another namespace is refused", func(t *testing.T) { testRolloutClaimConflict(t, h) })

	t.Run("failover", func(t *testing.T) {
		ctx := testContext(t, 5*time.Minute)
		f := startFleet(ctx, t, h, "failover", 8, nil)
		cut := &cuttable{}
		a := startRolloutController(ctx, t, h, "a", cut)
		ro := f.rollout("failover", func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(2)), nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		})
		f.waitFor(ctx, ro, "4 assigned", func(r *v1alpha1.ConfigRollout) bool { return r.Status.Assigned >= 4 })
		// Replica a loses the API server (as if killed or partitioned); b
		// takes the Lease when it expires.
		cut.cut.Store(true)
		b := startRolloutController(ctx, t, h, "b", nil)
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		aa, ar := a.patches()
		ba, br := b.patches()
		if aa+ba != 8 || ar+br != 0 {
			t.Errorf("assignments: %d by a, %d by b (want 8 in all, each node once); reverts %d, %d", aa, ba, ar, br)
		}
		if ba == 0 {
			t.Errorf("b made no assignment: the failover was not exercised")
		}
		if n := len(f.claims(ctx, got)); n != 8 {
			t.Errorf("%d nodes claimed, want 8", n)
		}
		f.wantAll(ctx, f.newCM)
		// The revert records survived the failover: undo puts every node back.
		f.patchSpec(ctx, ro, `{"spec":{"undo":true}}`)
		f.waitReleased(ctx, ro)
		f.waitAll(ctx, f.oldCM)
	})
}

// testRolloutDeletion: deleting an active rollout puts its nodes back
// before the object goes (the finalizer stays until then); a completed
// one drops its finalizer, and deleting it patches no Node (its whole
// life: at most 1.1 Node PATCHes a node, as the API server counts them);
// its claims stay, stale, and the next rollout takes the nodes over.
func testRolloutDeletion(t *testing.T, h *harness) {
	ctx := testContext(t, 5*time.Minute)
	f := startFleet(ctx, t, h, "delete", 6, nil)
	rc := startRolloutController(ctx, t, h, "a", nil)
	ri := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace)
	finalizers := func(name string) []string {
		t.Helper()
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetFinalizers()
	}
	waitGone := func(name string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := ri.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("ConfigRollout %s was not deleted: %v (finalizers %v)", name, err, finalizers(name))
		}
	}

	active := f.rollout("active", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(2)), {Pause: &v1alpha1.RolloutPause{}}, nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})
	f.waitPhase(ctx, active, v1alpha1.PhasePaused)
	if got := finalizers(active); !slices.Contains(got, plan.Finalizer) {
		t.Fatalf("an active rollout's finalizers are %v, want %s", got, plan.Finalizer)
	}
	if err := ri.Delete(ctx, active, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitAll(ctx, f.oldCM)
	waitGone(active)
	f.wantEvent(ctx, active, "Deleted")
	if assigns, reverts := rc.patches(); assigns != 2 || reverts != 2 {
		t.Errorf("%d assignments, %d reverts; want 2 and 2", assigns, reverts)
	}

	// A rollout's whole life, as the API server counts it: one Node PATCH
	// a node to roll it out, none to delete it once it completed.
	nodePatches := func() float64 {
		t.Helper()
		c, _, err := scrape(ctx, h.client)
		if err != nil {
			t.Fatal(err)
		}
		return c[requestKey{"PATCH", "nodes", ""}] // the components write nodes/status
	}
	start := nodePatches()
	done := f.rollout("done", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	})
	got := f.waitPhase(ctx, done, v1alpha1.PhaseCompleted)
	// Its nodes carry its claim (undo works while it exists); it ended,
	// so it needs its finalizer no more.
	if n := len(f.claims(ctx, got)); n != 6 {
		t.Fatalf("completed: %d nodes claimed, want 6", n)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return !slices.Contains(finalizers(done), plan.Finalizer), nil
	}); err != nil {
		t.Fatalf("a completed rollout keeps its finalizer: %v", finalizers(done))
	}
	rolledOut := nodePatches()
	if err := ri.Delete(ctx, done, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(done)
	f.wantAll(ctx, f.newCM)
	// Nothing the controller would do is left: it planned the deletion
	// (or had nothing to plan) well within this.
	time.Sleep(2 * time.Second)
	deleted := nodePatches()
	t.Logf("Node PATCHes for a rollout of %d nodes: %.0f to roll it out, %.0f to delete it", len(f.names), rolledOut-start, deleted-rolledOut)
	if perNode := (deleted - start) / float64(len(f.names)); perNode > 1.1 {
		t.Errorf("the rollout's whole life took %.2f Node PATCHes a node (%.0f to roll out, %.0f to delete), want at most 1.1",
			perNode, rolledOut-start, deleted-rolledOut)
	}
	// Its claims stay, stale: the next rollout takes the nodes.
	if n := len(f.claims(ctx, got)); n != 6 {
		t.Errorf("%d nodes carry the deleted rollout's claim, want 6 (left stale)", n)
	}
	back := f.rolloutOf("back", f.oldCM.Name, func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	})
	backRO := f.waitPhase(ctx, back, v1alpha1.PhaseCompleted)
	f.wantAll(ctx, f.oldCM)
	if n := len(f.claims(ctx, backRO)); n != 6 {
		t.Errorf("the next rollout claims %d nodes, want 6 (the stale claims taken over)", n)
	}
	if assigns, reverts := rc.patches(); assigns != 14 || reverts != 2 {
		t.Errorf("%d assignments, %d reverts in all; want 14 and 2 (deleting a completed rollout reverts nothing)", assigns, reverts)
	}
}

func installRolloutCRD(ctx context.Context, t testing.TB, h *harness) {
	t.Helper()
	b, err := os.ReadFile(rolloutCRD)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("%s: %v", rolloutCRD, err)
	}
	dyn := dynamic.NewForConfigOrDie(h.cl.Config)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the CRD from %s: %v", rolloutCRD, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("ConfigRollouts never served: %v", err)
	}
}

// fleet is a set of simulated nodes, all on oldCM at the start, and the
// ConfigMap newCM to roll out.
type fleet struct {
	t      *testing.T
	h      *harness
	dyn    dynamic.Interface
	label  string
	names  []string
	oldCM  *corev1.ConfigMap
	newCM  *corev1.ConfigMap
	prefix string
}

// startFleet creates n Nodes labelled for this fleet, each running a
// Controller in reload mode; failsNew(node) makes the node's reload of the
// new config fail (the component cannot apply it).
func startFleet(ctx context.Context, t *testing.T, h *harness, prefix string, n int, failsNew func(node string) bool) *fleet {
	t.Helper()
	f := &fleet{t: t, h: h, dyn: dynamic.NewForConfigOrDie(h.cl.Config), label: "rollout-test-" + prefix, prefix: prefix}
	f.oldCM = h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "old"), maxPods: 100, trial: rolloutTrial, immutable: true})
	f.newCM = h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "new"), maxPods: 101, trial: rolloutTrial, immutable: true})
	for i := range n {
		f.names = append(f.names, fmt.Sprintf("ro-%s-%03d", prefix, i))
	}
	old := assignmentFor(f.oldCM)
	if err := parallel(n, func(i int) error {
		_, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: f.names[i], Labels: map[string]string{f.label: "true"},
			Annotations: map[string]string{nodeapi.AssignmentAnnotation: old},
		}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("creating Nodes: %v", err)
	}
	quiet := klog.NewContext(ctx, klog.Background().V(10))
	runCtx, stop := context.WithCancel(quiet)
	var running sync.WaitGroup
	controllers := make([]*dynconfig.Controller[kubeletConfig], n)
	t.Cleanup(func() {
		stop()
		running.Wait()
		for _, c := range controllers {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	root := t.TempDir()
	if err := parallel(n, func(i int) error {
		name := f.names[i]
		c, err := newScaleController(h, name, filepath.Join(root, name), func(_ context.Context, cfg *kubeletConfig) error {
			if cfg.MaxPods == 101 && failsNew != nil && failsNew(name) {
				return errors.New("simulated: the component cannot apply maxPods 101")
			}
			return nil
		})
		if err != nil {
			return err
		}
		controllers[i] = c
		if _, err := c.Bootstrap(quiet); err != nil {
			return fmt.Errorf("node %s: Bootstrap: %w", name, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range controllers {
		running.Go(func() { _ = c.Run(runCtx) })
	}
	f.waitAll(ctx, f.oldCM)
	return f
}

func (f *fleet) index(node string) int {
	for i, n := range f.names {
		if n == node {
			return i
		}
	}
	return -1
}

func nodesStep(v intstr.IntOrString) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{Nodes: &v}
}

// rollout creates a ConfigRollout of newCM over the fleet.
func (f *fleet) rollout(name string, edit func(*v1alpha1.ConfigRolloutSpec)) string {
	return f.rolloutOf(name, f.newCM.Name, edit)
}

func (f *fleet) rolloutOf(name, configMap string, edit func(*v1alpha1.ConfigRolloutSpec)) string {
	f.t.Helper()
	return f.rolloutIn(namespace, name, configMap, edit)
}

// rolloutIn creates a ConfigRollout in namespace ns of its ConfigMap
// configMap (in ns) over the fleet.
func (f *fleet) rolloutIn(ns, name, configMap string, edit func(*v1alpha1.ConfigRolloutSpec)) string {
	f.t.Helper()
	name = f.prefix + "-" + name
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ConfigRolloutSpec{
			ConfigMapName: configMap,
			NodeSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{f.label: "true"}},
			// A node that takes longer than this has a problem: fail fast.
			ProgressDeadlineSeconds: ptr.To(int32(60)),
		},
	}
	edit(&ro.Spec)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(context.Background(),
		&unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("creating ConfigRollout %s: %v", name, err)
	}
	return name
}

func (f *fleet) get(ctx context.Context, name string) (*v1alpha1.ConfigRollout, error) {
	u, err := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var ro v1alpha1.ConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		return nil, err
	}
	return &ro, nil
}

func (f *fleet) tryPatchSpec(ctx context.Context, name, patch string) error {
	_, err := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (f *fleet) patchSpec(ctx context.Context, name, patch string) {
	f.t.Helper()
	if err := f.tryPatchSpec(ctx, name, patch); err != nil {
		f.t.Fatalf("patching ConfigRollout %s with %s: %v", name, patch, err)
	}
}

// waitFor polls the rollout until cond holds.
func (f *fleet) waitFor(ctx context.Context, name, what string, cond func(*v1alpha1.ConfigRollout) bool) *v1alpha1.ConfigRollout {
	f.t.Helper()
	var last *v1alpha1.ConfigRollout
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		ro, err := f.get(ctx, name)
		if err != nil {
			return false, nil
		}
		last = ro
		return cond(ro), nil
	})
	if err != nil {
		if last != nil {
			logHistory(f.t, last)
			f.t.Fatalf("ConfigRollout %s: never %s: %v; last phase %s (%s), %+v", name, what, err, last.Status.Phase, last.Status.Message, countsOf(last))
		}
		f.t.Fatalf("ConfigRollout %s: never %s: %v", name, what, err)
	}
	return last
}

func (f *fleet) waitPhase(ctx context.Context, name string, phase v1alpha1.RolloutPhase) *v1alpha1.ConfigRollout {
	f.t.Helper()
	return f.waitFor(ctx, name, "phase "+string(phase), func(r *v1alpha1.ConfigRollout) bool { return r.Status.Phase == phase })
}

// waitReleased waits until the rollout ended and no Node carries its
// claim any more: every node it changed is put back (or let go).
func (f *fleet) waitReleased(ctx context.Context, name string) *v1alpha1.ConfigRollout {
	f.t.Helper()
	return f.waitFor(ctx, name, "every node released", func(r *v1alpha1.ConfigRollout) bool {
		return !r.Status.Phase.Active() && r.Status.Reverting == 0 && len(f.claims(ctx, r)) == 0
	})
}

// claims returns the claims the rollout holds on the fleet's Nodes, by node.
func (f *fleet) claims(ctx context.Context, ro *v1alpha1.ConfigRollout) map[string]*nodeapi.Claim {
	f.t.Helper()
	nodes, err := f.h.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: f.label})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*nodeapi.Claim{}
	for i := range nodes.Items {
		c, err := nodeapi.ReadClaim(&nodes.Items[i], ro.Spec.Component)
		if err != nil {
			f.t.Errorf("%v", err)
			continue
		}
		if c != nil && c.UID == ro.UID {
			out[nodes.Items[i].Name] = c
		}
	}
	return out
}

// stays checks that cond holds for d.
func (f *fleet) stays(ctx context.Context, name string, d time.Duration, cond func(*v1alpha1.ConfigRollout) bool) {
	f.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		ro, err := f.get(ctx, name)
		if err != nil {
			f.t.Fatal(err)
		}
		if !cond(ro) {
			f.t.Fatalf("ConfigRollout %s changed while it should not: phase %s, %+v", name, ro.Status.Phase, countsOf(ro))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeOn reports whether the node is assigned cm and its component reports
// cm promoted.
func nodeOn(n *corev1.Node, cm *corev1.ConfigMap) (bool, string) {
	var src corev1.NodeConfigSource
	err := json.Unmarshal([]byte(n.Annotations[nodeapi.AssignmentAnnotation]), &src)
	if err != nil || src.ConfigMap == nil || src.ConfigMap.UID != cm.UID {
		return false, "assigned " + n.Annotations[nodeapi.AssignmentAnnotation]
	}
	s, err := nodeapi.ReadConfigStatus(n, "kubelet")
	if err != nil || s == nil {
		return false, fmt.Sprintf("status %v %v", s, err)
	}
	if s.Phase != nodeapi.PhasePromoted || s.Active == nil || s.Active.ConfigMap == nil || s.Active.ConfigMap.UID != cm.UID {
		return false, fmt.Sprintf("phase %s, active %s", s.Phase, nodeapi.DescribeSource(s.Active))
	}
	return true, ""
}

func (f *fleet) waitNode(ctx context.Context, name string, cm *corev1.ConfigMap) {
	f.t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := f.h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ok, w := nodeOn(n, cm)
		why = w
		return ok, nil
	})
	if err != nil {
		f.t.Fatalf("node %s never promoted ConfigMap %s: %s", name, cm.Name, why)
	}
}

// waitAll waits until every node of the fleet runs cm, promoted.
func (f *fleet) waitAll(ctx context.Context, cm *corev1.ConfigMap) {
	f.t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := f.h.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: f.label})
		if err != nil {
			return false, nil
		}
		ok := 0
		why = ""
		for i := range list.Items {
			if on, w := nodeOn(&list.Items[i], cm); on {
				ok++
			} else if why == "" {
				why = list.Items[i].Name + ": " + w
			}
		}
		return ok == len(f.names), nil
	})
	if err != nil {
		f.t.Fatalf("the fleet never all ran ConfigMap %s promoted: e.g. %s", cm.Name, why)
	}
}

func (f *fleet) wantAll(ctx context.Context, cm *corev1.ConfigMap) {
	f.t.Helper()
	f.waitAll(ctx, cm)
}

func (f *fleet) wantEvent(ctx context.Context, rollout, reason string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := f.h.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == v1alpha1.Kind && e.InvolvedObject.Name == rollout && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		f.t.Errorf("no Event %s on ConfigRollout %s", reason, rollout)
	}
}

// watchInvariants polls the rollout until it stops being active and
// checks, at every look: never more than maxU nodes in trial, and no node
// of a step assigned before every node of the earlier steps settled. The
// returned function stops it and returns the first violation.
func (f *fleet) watchInvariants(ctx context.Context, name string, maxU int) func() error {
	ctx, cancel := context.WithCancel(ctx)
	var first error
	done := make(chan struct{})
	looks := 0
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// The controller writes a step to the status before it claims
			// that step's nodes: read the claims first, then the status,
			// so that a step moving on between the two reads is no
			// violation.
			before, err := f.get(ctx, name)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			claims := f.claims(ctx, before)
			ro, err := f.get(ctx, name)
			if err == nil {
				looks++
				if err := checkRollout(ro, claims, maxU); err != nil && first == nil {
					first = err
				}
				if !ro.Status.Phase.Active() {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() error {
		<-done
		cancel()
		if first == nil && looks < 3 {
			return fmt.Errorf("the invariants were looked at %d times only", looks)
		}
		return first
	}
}

func checkRollout(ro *v1alpha1.ConfigRollout, claims map[string]*nodeapi.Claim, maxU int) error {
	if int(ro.Status.InTrial) > maxU {
		return fmt.Errorf("%d nodes in trial, maxUnavailable %d", ro.Status.InTrial, maxU)
	}
	if len(ro.Status.Nodes) > 0 {
		return fmt.Errorf("%d per-node records in the status", len(ro.Status.Nodes))
	}
	// Nodes are claimed step by step: no node of a later step before
	// the earlier steps are done.
	for name, c := range claims {
		if c.Step > ro.Status.CurrentStep {
			return fmt.Errorf("node %s claimed at step %d while the status is at step %d", name, c.Step, ro.Status.CurrentStep)
		}
	}
	return nil
}

func conditionTrue(ro *v1alpha1.ConfigRollout, t string) bool {
	for _, c := range ro.Status.Conditions {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

type counts struct {
	Phase                                       v1alpha1.RolloutPhase
	Step                                        int32
	Selected, Assigned, InTrial, Promoted, Fail int32
	Reverting                                   int32
}

func countsOf(ro *v1alpha1.ConfigRollout) counts {
	s := ro.Status
	return counts{s.Phase, s.CurrentStep, s.Selected, s.Assigned, s.InTrial, s.Promoted, s.Failed, s.Reverting}
}

func logHistory(t *testing.T, ro *v1alpha1.ConfigRollout) {
	t.Helper()
	var b strings.Builder
	for _, e := range ro.Status.History {
		fmt.Fprintf(&b, "  %s %-14s %s\n", e.Time.Format("15:04:05"), e.Reason, e.Message)
	}
	t.Logf("ConfigRollout %s history:\n%s", ro.Name, b.String())
}

// rolloutController is one replica of the rollout controller.
type rolloutController struct{ *controller.Controller }

// patches returns the assignment and revert patches it made.
func (r *rolloutController) patches() (assign, revert int) {
	st := r.Stats()
	return int(st.Assignments), int(st.Reverts)
}

// cuttable is a transport that fails every request once cut: the replica
// behind it is as good as dead to the API server.
type cuttable struct{ cut atomic.Bool }

func (c *cuttable) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if c.cut.Load() {
			return nil, errors.New("simulated: this replica lost the API server")
		}
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startRolloutController runs a replica as the admin with leader election
// on a short Lease of the test's own until the test ends.
func startRolloutController(ctx context.Context, t *testing.T, h *harness, identity string, cut *cuttable) *rolloutController {
	t.Helper()
	r := replica{leaseNamespace: metav1.NamespaceDefault, lease: objectName(t, "lease"), identity: identity}
	if cut != nil {
		// A replica that is cut off is failed over: a short Lease.
		r.wrap = cut.wrap
		r.leaseDuration = 3 * time.Second
	}
	return startRolloutControllerAs(ctx, t, h.cl.Config, r)
}

// replica is one rollout controller replica of a test.
type replica struct {
	// leaseNamespace, lease: the Lease it holds; identity: its name in it.
	leaseNamespace, lease, identity string
	// namespace is Options.Namespace: "" watches every namespace.
	namespace string
	// wrap, when set, wraps its transport.
	wrap func(http.RoundTripper) http.RoundTripper
	// leaseDuration is its Lease's duration (renewed within 2/3 of it);
	// 0: 15s, so that an API server stalled by a busy machine does not end
	// the replica (at load 14 a 3 s Lease missed its renew deadline and the
	// replica stopped). Only a test that fails replicas over takes a short
	// one.
	leaseDuration time.Duration
}

// startRolloutControllerAs runs a replica on cfg's identity until the test
// ends, with a 15 s Lease unless r.leaseDuration says otherwise.
func startRolloutControllerAs(ctx context.Context, t *testing.T, cfg *rest.Config, r replica) *rolloutController {
	t.Helper()
	cfg = limited(cfg, 100, 200)
	if r.wrap != nil {
		cfg.Wrap(r.wrap)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lease := cmp.Or(r.leaseDuration, 15*time.Second)
	c, err := controller.New(controller.Options{
		Client: client, Dynamic: dyn, Namespace: r.namespace,
		LeaderElection: &controller.LeaderElection{
			Namespace: r.leaseNamespace, Name: r.lease, Identity: r.identity,
			LeaseDuration: lease, RenewDeadline: lease * 2 / 3, RetryPeriod: lease / 6,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, controller.ErrLostLease) {
			t.Errorf("rollout controller %s (namespace %q): %v", r.identity, r.namespace, err)
		}
	})
	return &rolloutController{c}
}

// rolloutRBAC is the controller's identity and grants.
const rolloutRBAC = "../../deploy/overlays/cluster-wide/rbac.yaml"

// waitAllowed waits until RBAC lets cfg's identity do what the controller
// does first (RBAC objects take effect shortly after they are stored).
func waitAllowed(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	client := newClient(t, cfg, 50, 100)
	dyn := dynamic.NewForConfigOrDie(cfg)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return false, nil
		}
		if _, err := client.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			return false, fmt.Errorf("the controller's identity may list Leases: more than its grants say")
		}
		_, err := dyn.Resource(v1alpha1.GroupVersionResource()).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the controller's ServiceAccount never got its grants: %v", err)
	}
}

// testRolloutClaimConflict: two rollout controllers, each watching its own
// namespace, over the same nodes. The second cannot see the first's
// rollout, but it sees the claims on the Nodes: it leaves the claimed
// nodes alone (Conflict, counted Blocked) instead of assigning over them,
// and the first can still undo what it did.
func testRolloutClaimConflict(t *testing.T, h *harness) {
	ctx := testContext(t, 5*time.Minute)
	f := startFleet(ctx, t, h, "claims", 4, nil)
	startRolloutControllerAs(ctx, t, h.cl.Config, replica{leaseNamespace: metav1.NamespaceDefault, lease: objectName(t, "lease-a"), identity: "a", namespace: namespace})
	first := f.rollout("first", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(2)), {Pause: &v1alpha1.RolloutPause{}}, nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})
	got := f.waitPhase(ctx, first, v1alpha1.PhasePaused)
	held := f.claims(ctx, got)
	if len(held) != 2 {
		t.Fatalf("the first rollout claims %d nodes, want 2", len(held))
	}

	other := objectName(t, "other-ns")
	if _, err := h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: other, Annotations: f.newCM.Annotations},
		Data: map[string]string{kubelet.PayloadKey: kubeletPayload(103)}, Immutable: ptr.To(true)}
	if _, err := h.client.CoreV1().ConfigMaps(other).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startRolloutControllerAs(ctx, t, h.cl.Config, replica{leaseNamespace: metav1.NamespaceDefault, lease: objectName(t, "lease-b"), identity: "b", namespace: other})
	second := f.rolloutIn(other, "second", "theirs", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromInt32(4))
	})
	ri := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(other)
	var last v1alpha1.ConfigRollout
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := ri.Get(ctx, second, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &last); err != nil {
			return false, err
		}
		return conditionTrue(&last, v1alpha1.ConditionConflict) && last.Status.Blocked == 2, nil
	})
	if err != nil {
		t.Fatalf("the second rollout never reported the 2 claimed nodes blocked: %v; status %+v", err, last.Status)
	}
	if c := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.ConditionConflict); c == nil || !strings.Contains(c.Message, namespace+"/"+first) {
		t.Errorf("Conflict condition %+v does not name the claimer %s/%s", c, namespace, first)
	}
	// The claimed nodes keep the first rollout's assignment and claim.
	for name := range held {
		f.waitNode(ctx, name, f.newCM)
	}
	got, err = f.get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	for name := range held {
		if c := f.claims(ctx, got)[name]; c == nil {
			t.Errorf("node %s lost the first rollout's claim", name)
		}
	}
	// The first can still put its nodes back (the second is aborted first,
	// so that it does not take the nodes once they are let go).
	if _, err := ri.Patch(ctx, second, types.MergePatchType, []byte(`{"spec":{"abort":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.patchSpec(ctx, first, `{"spec":{"undo":true}}`)
	f.waitReleased(ctx, first)
	for name := range held {
		f.waitNode(ctx, name, f.oldCM)
	}
}
