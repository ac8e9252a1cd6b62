//go:build linux

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
	"github.com/dynconfig/dynconfig/test/promserver"
)

// startHollowKubelet runs bin/hollow-kubelet (the real kubelet code on a
// fake runtime, on dynconfig) for one Node under a restart loop until the
// test ends, and waits until its Node is Ready on the local config.
func startHollowKubelet(ctx context.Context, t *testing.T, h *harness, name string) *hollowRun {
	t.Helper()
	bin := hollowKubeletBinary(t)
	// The kubelet posts its status every 2s (not every 5m when nothing
	// changed): waitNode wants a Ready heartbeat newer than the process.
	dir, kubeconfig, confDir := hollowKubeletDir(t, h)
	r := &hollowRun{h: h, nodeName: name, stateDir: filepath.Join(dir, "state"), seen: map[int]time.Time{}}
	t.Cleanup(func() { r.saveLogs(t) })
	r.loop = proctest.StartLoop(t, bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--node-name=" + r.nodeName,
		"--dynamic-config-dir=" + r.stateDir,
		"--root-dir=" + filepath.Join(dir, "root"),
		"--config-dir=" + confDir,
		fmt.Sprintf("--port=%d", cluster.FreePort(t)),
	}, nil)
	r.waitNode(ctx, t, "the hollow kubelet's Node Ready on the local config", localDefaultReport(), 110)
	return r
}

// bindPods creates n pods bound to a node (no scheduler runs: spec.nodeName
// is set) and waits until every pod of the node the test made is Running
// and Ready.
func bindPods(ctx context.Context, t *testing.T, h *harness, node, prefix string, n int) {
	t.Helper()
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: namespace, Labels: map[string]string{"gates-test": node}},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if _, err := h.client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
		// Pods are admitted in creation order (by creationTimestamp, whole
		// seconds): space them so the order is the same on every start.
		time.Sleep(1100 * time.Millisecond)
	}
	pollUntil(t, fmt.Sprintf("%d pods %s-* Running and Ready on %s", n, prefix, node), func() (bool, string) {
		pods := podsOn(ctx, t, h, node)
		ready := 0
		for _, p := range pods {
			if strings.HasPrefix(p.Name, prefix+"-") && p.Status.Phase == corev1.PodRunning && podIsReady(&p) {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d of %d ready: %s", ready, n, describePods(pods))
	}, func() string { return "" })
}

func podsOn(ctx context.Context, t *testing.T, h *harness, node string) []corev1.Pod {
	t.Helper()
	list, err := h.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		t.Fatalf("listing the pods on %s: %v", node, err)
	}
	return list.Items
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePods(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		s := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
		if p.Status.Reason != "" {
			s += " (" + p.Status.Reason + ")"
		}
		if podIsReady(&p) {
			s += " ready"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// rejected returns the pods on the node that failed with reason.
func rejected(pods []corev1.Pod, reason string) []string {
	var out []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == reason {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestAnalysisHaltsOnBrokenPods: a kubelet config that keeps the kubelet
// alive (it restarts onto it and promotes it) but breaks the node's pods:
// maxPods 2 while 4 pods are bound to the node. The real kubelet code (the
// hollow kubelet) re-admits the bound pods when it starts and rejects the
// ones over maxPods (phase Failed, reason OutOfpods). The canary is the
// hollow kubelet's Node; three simulated nodes follow. The rollout
// controller runs with the grants of deploy/overlays/cluster-wide/rbac.yaml.
//
//  1. With spec.analysis (pods: maxNewFailures 0): the rollout halts at the
//     canary step with the gate's reason, no node beyond the canary is ever
//     claimed or assigned, and the canary is reverted (the kubelet back on
//     its local config, maxPods 110).
//  2. The same config without spec.analysis: the canary promotes (its pods
//     rejected all the same) and the rollout walks on to every node.
func TestAnalysisHaltsOnBrokenPods(t *testing.T) {
	if testing.Short() {
		t.Skip("the hollow kubelet against the API server: skipped with -short")
	}
	h := newHarness(t)
	ctx := testContext(t, 12*time.Minute)
	installRolloutCRD(ctx, t, h)
	f := startFleet(ctx, t, h, "gates", 3, nil)
	hollow := startHollowKubelet(ctx, t, h, objectName(t, "hollow"))
	node := hollow.nodeName
	if _, err := h.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, f.label), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted([]string{node, f.names[0]}) {
		t.Fatalf("the hollow node %s must come first by name (the canary) before %s", node, f.names[0])
	}
	const bound = 4
	bindPods(ctx, t, h, node, "first", bound)
	tight := h.createTrialConfigMap(ctx, t, objectName(t, "maxpods-2"), kubeletPayload(2), "5s", 2)
	steps := []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
	// The controller runs as its ServiceAccount with the grants of
	// deploy/overlays/cluster-wide/rbac.yaml: the pods check lists pods.
	if _, err := h.cl.ApplyManifests(ctx, rolloutRBAC); err != nil {
		t.Fatal(err)
	}
	cfg, err := h.cl.ServiceAccountConfig(ctx, "kube-system", "dynconfig-rollout")
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, cfg)
	rc := startRolloutControllerAs(ctx, t, cfg, replica{leaseNamespace: "kube-system", lease: "dynconfig-rollout", identity: "gates"})

	// 1. With analysis: halts at the canary, reverted.
	gated := f.rolloutOf("gated", tight.Name, func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = steps
		s.ProgressDeadlineSeconds = ptr.To(int32(180))
		s.Analysis = &v1alpha1.RolloutAnalysis{
			Soak: &metav1.Duration{Duration: 20 * time.Second},
			Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(0))},
		}
	})
	watch := f.watchInvariants(ctx, gated, 1)
	got := f.waitPhase(ctx, gated, v1alpha1.PhaseHalted)
	if err := watch(); err != nil {
		t.Error(err)
	}
	logHistory(t, got)
	if len(got.Status.Failures) != 1 || got.Status.Failures[0].Node != node ||
		!strings.Contains(got.Status.Failures[0].Reason, "health gate pods: 2 pods newly failed") ||
		!strings.Contains(got.Status.Failures[0].Reason, "(OutOfpods)") {
		t.Errorf("failures %+v, want the canary %s failed by the pods gate (2 pods OutOfpods)", got.Status.Failures, node)
	}
	if got.Status.CurrentStep != 0 {
		t.Errorf("halted at step %d, want the canary step 0", got.Status.CurrentStep)
	}
	f.wantEvent(ctx, gated, "NodeFailed")
	f.waitReleased(ctx, gated)
	if assigns, reverts := rc.patches(); assigns != 1 || reverts != 1 {
		t.Errorf("%d assignment patches and %d reverts, want the canary assigned and reverted only", assigns, reverts)
	}
	for _, name := range f.names {
		n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if on, _ := nodeOn(n, tight); on || strings.Contains(n.Annotations[nodeapi.AssignmentAnnotation], string(tight.UID)) {
			t.Errorf("node %s beyond the canary was assigned the config", name)
		}
	}
	// The canary is back on its local config: the kubelet restarted onto
	// maxPods 110.
	hollow.waitNode(ctx, t, "the canary reverted to its local config", localDefaultReport(), 110)
	if n := hollow.getNode(ctx, t); n.Annotations[nodeapi.AssignmentAnnotation] != "" {
		t.Errorf("the canary still carries assignment %q", n.Annotations[nodeapi.AssignmentAnnotation])
	}
	t.Logf("with analysis: halted at step %d: %s; pods on the canary: %s", got.Status.CurrentStep, got.Status.Message, describePods(podsOn(ctx, t, h, node)))

	// 2. Without analysis: bind fresh pods (the rejected ones are terminal)
	// and roll the same config out again.
	bindPods(ctx, t, h, node, "second", bound)
	before := len(rejected(podsOn(ctx, t, h, node), "OutOfpods"))
	plain := f.rolloutOf("plain", tight.Name, func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = steps
		s.ProgressDeadlineSeconds = ptr.To(int32(180))
		// The gated rollout halted on this config, so the fleet knows it
		// bad: a new rollout of it must be forced.
		s.AllowKnownBad = true
	})
	got = f.waitPhase(ctx, plain, v1alpha1.PhaseCompleted)
	if got.Status.Promoted != int32(len(f.names)+1) || got.Status.Failed != 0 {
		t.Errorf("without analysis: completed with %+v, want all %d nodes promoted", countsOf(got), len(f.names)+1)
	}
	var after []string
	pollUntil(t, "the kubelet on maxPods 2 rejecting the pods over it", func() (bool, string) {
		pods := podsOn(ctx, t, h, node)
		after = rejected(pods, "OutOfpods")
		return len(after) > before, describePods(pods)
	}, func() string { return "" })
	t.Logf("without analysis: completed (%+v) while the canary's kubelet rejected %d pods: %v", countsOf(got), len(after)-before, after)
}

// TestAnalysisPrometheusGate runs a real Prometheus (Debian's package)
// that scrapes a metrics endpoint the test serves, with one gauge per node,
// and a rollout whose Prometheus check bounds that node's gauge: the canary
// (gauge 0) passes and promotes, the next node (gauge 7) fails the gate and
// halts the rollout with the query's value in its reason.
func TestAnalysisPrometheusGate(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Prometheus and API server: skipped with -short")
	}
	h := newHarness(t)
	ctx := testContext(t, 8*time.Minute)
	installRolloutCRD(ctx, t, h)
	f := startFleet(ctx, t, h, "prom", 3, nil)
	t.Run("schema", func(t *testing.T) { testAnalysisSchema(ctx, t, f) })
	values := map[string]float64{f.names[0]: 0, f.names[1]: 7, f.names[2]: 0}
	metrics := promserver.ServeMetrics(t, func() string {
		var b strings.Builder
		b.WriteString("# TYPE node_config_errors gauge\n")
		for _, n := range f.names {
			fmt.Fprintf(&b, "node_config_errors{node=%q} %g\n", n, values[n])
		}
		return b.String()
	})
	prom := promserver.Start(ctx, t, metrics)
	prom.WaitSeries(ctx, t, fmt.Sprintf(`node_config_errors{node=%q}`, f.names[1]))
	rc := startRolloutController(ctx, t, h, "a", nil)

	ro := f.rollout("prom", func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
		s.Analysis = &v1alpha1.RolloutAnalysis{
			Node: &v1alpha1.NodeAnalysis{Disabled: true}, // simulated Nodes carry no conditions
			Prometheus: []v1alpha1.PrometheusCheck{{
				ExternalCheck: v1alpha1.ExternalCheck{Name: "config-errors", Interval: &metav1.Duration{Duration: 2 * time.Second}},
				Address:       prom.URL,
				Query:         `max(node_config_errors{node="$node"})`,
				Max:           ptr.To("1"),
			}},
		}
	})
	got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
	logHistory(t, got)
	if len(got.Status.Steps) != 1 {
		t.Errorf("steps done %+v, want the canary step done (its node passed the gate)", got.Status.Steps)
	}
	want := fmt.Sprintf(`health gate prometheus config-errors: max(node_config_errors{node=%q}) is 7, outside [-Inf, 1]`, f.names[1])
	var reasons []string
	for _, fl := range got.Status.Failures {
		reasons = append(reasons, fl.Node+": "+fl.Reason)
	}
	if !slices.Contains(reasons, f.names[1]+": "+want) || slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, f.names[0]+":") }) {
		t.Errorf("failures %q, want %s failed with %q and the canary %s not", reasons, f.names[1], want, f.names[0])
	}
	f.waitReleased(ctx, ro)
	if assigns, _ := rc.patches(); assigns < 2 {
		t.Errorf("%d assignments, want the canary and at least the next node", assigns)
	}
}

// testAnalysisSchema: the API server refuses a spec.analysis the
// controller could not run, and says which field.
func testAnalysisSchema(ctx context.Context, t *testing.T, f *fleet) {
	check := func(name string) v1alpha1.ExternalCheck { return v1alpha1.ExternalCheck{Name: name} }
	for _, tc := range []struct {
		name string
		an   v1alpha1.RolloutAnalysis
		want string
	}{
		{"pods without a bound", v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{}}, "set maxUnready, maxNewFailures or both"},
		{"negative maxNewFailures", v1alpha1.RolloutAnalysis{Pods: &v1alpha1.PodAnalysis{MaxNewFailures: ptr.To(int32(-1))}}, "spec.analysis.pods.maxNewFailures"},
		{"query without bounds", v1alpha1.RolloutAnalysis{Prometheus: []v1alpha1.PrometheusCheck{{ExternalCheck: check("q"), Address: "http://p:9090", Query: "up"}}}, "set min, max or both"},
		{"a bound that is no number", v1alpha1.RolloutAnalysis{Prometheus: []v1alpha1.PrometheusCheck{{ExternalCheck: check("q"), Address: "http://p:9090", Query: "up", Max: ptr.To("1e")}}}, "spec.analysis.prometheus[0].max"},
		{"a webhook that is not HTTP", v1alpha1.RolloutAnalysis{Webhooks: []v1alpha1.WebhookCheck{{ExternalCheck: check("w"), URL: "file:///etc/passwd"}}}, "spec.analysis.webhooks[0].url"},
		{"two checks of one name", v1alpha1.RolloutAnalysis{Webhooks: []v1alpha1.WebhookCheck{{ExternalCheck: check("w"), URL: "http://a"}, {ExternalCheck: check("w"), URL: "http://b"}}}, "Duplicate value"},
		{"an error limit of 0", v1alpha1.RolloutAnalysis{Webhooks: []v1alpha1.WebhookCheck{{ExternalCheck: v1alpha1.ExternalCheck{Name: "w", ConsecutiveErrorLimit: ptr.To(int32(0))}, URL: "http://a"}}}, "consecutiveErrorLimit"},
	} {
		ro := &v1alpha1.ConfigRollout{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: "schema", Namespace: namespace},
			Spec: v1alpha1.ConfigRolloutSpec{ConfigMapName: f.newCM.Name, Steps: []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1))},
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"nothing": "here"}}, Analysis: &tc.an},
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err == nil {
			_ = f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace).Delete(ctx, "schema", metav1.DeleteOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: created: %v, want a refusal naming %q", tc.name, err, tc.want)
		}
	}
}
