package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/kubeletdropin"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// preflightNode says how one node of a pre-flight fleet differs.
type preflightNode struct {
	// dropIn, when set, is a node drop-in, zz-local.conf, that sorts after
	// dynconfig's file (99-dynconfig.conf) in the node's config dir.
	dropIn string
	// old: an agent older than the pre-flight check, which never reads
	// the request.
	old bool
}

// startPreflightFleet is startFleet with nodes whose layers are the stock
// kubelet's (kubeletdropin: the candidate in dynconfig's place among the
// node's drop-ins) and whose source reads the pre-flight request, unless
// the node is old.
func startPreflightFleet(ctx context.Context, t *testing.T, h *harness, prefix string, nodes []preflightNode) *fleet {
	t.Helper()
	f := &fleet{t: t, h: h, dyn: dynamic.NewForConfigOrDie(h.cl.Config), label: "preflight-test-" + prefix, prefix: prefix}
	f.oldCM = h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "old"), maxPods: 100, trial: rolloutTrial, immutable: true})
	f.newCM = h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "new"), maxPods: 101, trial: rolloutTrial, immutable: true})
	old := assignmentFor(f.oldCM)
	quiet := klog.NewContext(ctx, klog.Background().V(10))
	runCtx, stop := context.WithCancel(quiet)
	var running sync.WaitGroup
	var controllers []*dynconfig.Controller[kubeletConfig]
	t.Cleanup(func() {
		stop()
		running.Wait()
		for _, c := range controllers {
			_ = c.Close()
		}
	})
	root := t.TempDir()
	for i, pn := range nodes {
		name := fmt.Sprintf("pf-%s-%d", prefix, i)
		f.names = append(f.names, name)
		if _, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{f.label: "true"},
			Annotations: map[string]string{nodeapi.AssignmentAnnotation: old},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		confDir := filepath.Join(root, name, "kubelet.conf.d")
		if err := os.MkdirAll(confDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if pn.dropIn != "" {
			if err := os.WriteFile(filepath.Join(confDir, "zz-local.conf"), []byte(pn.dropIn), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		client, err := kubernetes.NewForConfig(limited(h.cl.Config, 50, 100))
		if err != nil {
			t.Fatal(err)
		}
		layers, err := kubeletdropin.NewLayers(kubeletdropin.Files{ConfigDir: confDir}, klog.Background().V(10))
		if err != nil {
			t.Fatal(err)
		}
		opts := source.NodeOptions{Client: client, NodeName: name, PayloadKey: kubelet.PayloadKey}
		if !pn.old {
			opts.PreflightAnnotation = nodeapi.PreflightAnnotationFor("kubelet")
		}
		remote, err := source.NewNode(opts)
		if err != nil {
			t.Fatal(err)
		}
		reporter, err := status.NewNodeReporter(status.NodeReporterOptions{Client: client, NodeName: name})
		if err != nil {
			t.Fatal(err)
		}
		c, err := dynconfig.New(dynconfig.Options[kubeletConfig]{
			Profile: kubelet.Profile{}, Layers: layers, StateDir: filepath.Join(root, name, "state"), ComponentVersion: componentVersion,
			Remote: remote, Reporter: reporter, Reload: func(context.Context, *kubeletConfig) error { return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		controllers = append(controllers, c)
		if _, err := c.Bootstrap(quiet); err != nil {
			t.Fatalf("node %s: Bootstrap: %v", name, err)
		}
	}
	for _, c := range controllers {
		running.Go(func() { _ = c.Run(runCtx) })
	}
	f.waitAll(ctx, f.oldCM)
	return f
}

// nodeWrites counts the writes (every request but GET, LIST and WATCH)
// a client makes on each Node, by node name.
type nodeWrites struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *nodeWrites) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/"); ok && r.Method != http.MethodGet {
			name, _, _ := strings.Cut(rest, "/")
			w.mu.Lock()
			if w.n == nil {
				w.n = map[string]int{}
			}
			w.n[name]++
			w.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// of returns the writes on each of names.
func (w *nodeWrites) of(names []string) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, len(names))
	for i, name := range names {
		out[i] = w.n[name]
	}
	return out
}

func allEqual(got []int, want int) bool {
	for _, v := range got {
		if v != want {
			return false
		}
	}
	return true
}

// TestPreflight runs the pre-flight check (spec.preflight) on the real API
// server, over in-process nodes with the stock kubelet's layers: one node
// has a drop-in that sorts after dynconfig's file and sets maxPods, a
// field the candidate sets. Required halts before any node applies the
// config, naming that node and the field; Warn goes on and names it; Off
// writes nothing more than before. A node whose agent is older than the
// check never answers: Warn goes on at the timeout naming it, Required
// halts naming it. The controller writes at most one request more per
// node than without the check, counted on the wire.
func TestPreflight(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 10*time.Minute)
	installRolloutCRD(ctx, t, h)
	const override = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 70\n"
	steps := func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
		s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	}
	start := func(t *testing.T, identity string) (*rolloutController, *nodeWrites) {
		w := &nodeWrites{}
		rc := startRolloutControllerAs(ctx, t, h.cl.Config, replica{leaseNamespace: metav1.NamespaceDefault, lease: objectName(t, "lease"), identity: identity, wrap: w.wrap})
		return rc, w
	}

	t.Run("Required halts before any node applies, naming the overridden node and field", func(t *testing.T) {
		f := startPreflightFleet(ctx, t, h, "req", []preflightNode{{}, {dropIn: override}, {}, {}})
		rc, writes := start(t, "req")
		ro := f.rollout("req", func(s *v1alpha1.ConfigRolloutSpec) { steps(s); s.Preflight = v1alpha1.PreflightRequired })
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		halted := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionHalted)
		field := "maxPods (by " // the file is the node's zz-local.conf
		if halted == nil || halted.Reason != "PreflightFailed" || !strings.Contains(halted.Message, "node "+f.names[1]+" Overridden: "+field) ||
			!strings.Contains(halted.Message, "zz-local.conf)") {
			t.Fatalf("Halted condition %+v: want PreflightFailed naming %s and maxPods", halted, f.names[1])
		}
		pf := got.Status.Preflight
		if pf == nil || pf.Asked != 4 || pf.Passed != 3 || pf.Overridden != 1 || len(pf.Nodes) != 1 || pf.Nodes[0].Node != f.names[1] {
			t.Fatalf("status.preflight %+v", pf)
		}
		if st := rc.Stats(); st.Assignments != 0 || st.Reverts != 0 || st.PreflightAsks != 4 {
			t.Errorf("%d assignments, %d reverts, %d pre-flight requests; want 0, 0 and 4", st.Assignments, st.Reverts, st.PreflightAsks)
		}
		if claims := f.claims(ctx, got); len(claims) != 0 {
			t.Errorf("nodes claimed: %v", claims)
		}
		f.wantAll(ctx, f.oldCM) // no node ever left the old config
		if w := writes.of(f.names); !allEqual(w, 1) {
			t.Errorf("the controller wrote %v times on the nodes, want once each (the request)", w)
		}
		f.wantEvent(ctx, ro, "Halted")
		f.wantEvent(ctx, ro, "PreflightStarted")
	})

	t.Run("Warn goes on and names the node, its field and an older agent", func(t *testing.T) {
		f := startPreflightFleet(ctx, t, h, "warn", []preflightNode{{}, {dropIn: override}, {}, {old: true}})
		rc, writes := start(t, "warn")
		ro := f.rollout("warn", func(s *v1alpha1.ConfigRolloutSpec) {
			steps(s)
			s.Preflight, s.PreflightTimeoutSeconds = v1alpha1.PreflightWarn, ptr.To(int32(5))
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPreflight)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Warnings" ||
			!strings.Contains(c.Message, "node "+f.names[1]+" Overridden: maxPods (by ") || !strings.Contains(c.Message, "node "+f.names[3]+" NoAnswer") {
			t.Fatalf("Preflight condition %+v: want Warnings naming %s's maxPods and %s's missing answer", c, f.names[1], f.names[3])
		}
		pf := got.Status.Preflight
		if pf.Overridden != 1 || pf.NoAnswer != 1 || pf.Passed != 2 || pf.CompletedAt == nil {
			t.Fatalf("status.preflight %+v", pf)
		}
		// Nothing was assigned before the check completed.
		for name, cl := range f.claims(ctx, got) {
			if cl.AssignedAt.Before(pf.CompletedAt) {
				t.Errorf("node %s assigned at %s, before the check completed at %s", name, cl.AssignedAt, pf.CompletedAt)
			}
		}
		f.wantAll(ctx, f.newCM)
		if st := rc.Stats(); st.Assignments != 4 || st.PreflightAsks != 4 {
			t.Errorf("%d assignments, %d pre-flight requests; want 4 and 4", st.Assignments, st.PreflightAsks)
		}
		if w := writes.of(f.names); !allEqual(w, 2) {
			t.Errorf("the controller wrote %v times on the nodes, want twice each (the request, the assignment)", w)
		}
		f.wantEvent(ctx, ro, "PreflightWarning")
	})

	t.Run("Required halts on an older agent that never answers", func(t *testing.T) {
		f := startPreflightFleet(ctx, t, h, "old", []preflightNode{{}, {old: true}})
		rc, _ := start(t, "old")
		ro := f.rollout("old", func(s *v1alpha1.ConfigRolloutSpec) {
			steps(s)
			s.Preflight, s.PreflightTimeoutSeconds = v1alpha1.PreflightRequired, ptr.To(int32(3))
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		want := "node " + f.names[1] + " NoAnswer: no answer within 3s: its agent is older than the pre-flight check"
		if !strings.Contains(got.Status.Message, want) || !strings.Contains(got.Status.Message, "no node was assigned") {
			t.Fatalf("halt message %q: want %q", got.Status.Message, want)
		}
		if st := rc.Stats(); st.Assignments != 0 {
			t.Errorf("%d assignments before a Required check passed", st.Assignments)
		}
		f.wantAll(ctx, f.oldCM)
	})

	t.Run("Off writes what it wrote before", func(t *testing.T) {
		f := startPreflightFleet(ctx, t, h, "off", []preflightNode{{}, {dropIn: override}})
		rc, writes := start(t, "off")
		ro := f.rollout("off", steps)
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		if got.Status.Preflight != nil || meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPreflight) != nil {
			t.Errorf("Off: status.preflight %+v, conditions %+v", got.Status.Preflight, got.Status.Conditions)
		}
		if st := rc.Stats(); st.PreflightAsks != 0 || st.Assignments != 2 {
			t.Errorf("%d pre-flight requests, %d assignments; want 0 and 2", st.PreflightAsks, st.Assignments)
		}
		if w := writes.of(f.names); !allEqual(w, 1) {
			t.Errorf("the controller wrote %v times on the nodes, want once each (the assignment)", w)
		}
		f.wantAll(ctx, f.newCM)
	})

	t.Run("the CRD refuses an unknown policy", func(t *testing.T) {
		f := &fleet{t: t, h: h, dyn: dynamic.NewForConfigOrDie(h.cl.Config), label: "preflight-test-crd", prefix: "crd"}
		ro := f.rolloutOf("crd", "no-such-configmap", steps)
		err := f.tryPatchSpec(ctx, ro, `{"spec":{"preflight":"Sometimes"}}`)
		if err == nil || !strings.Contains(err.Error(), "preflight") {
			t.Errorf("spec.preflight Sometimes: %v, want the schema's refusal", err)
		}
		if err := f.tryPatchSpec(ctx, ro, `{"spec":{"preflightTimeoutSeconds":0}}`); err == nil {
			t.Errorf("spec.preflightTimeoutSeconds 0 was accepted")
		}
	})
}
