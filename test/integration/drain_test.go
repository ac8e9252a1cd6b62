//go:build linux

package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/kubeletdropin"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// dropinComponent is the component name the stock kubelet's roles run
// under in this test: the hollow kubelet beside them reports as "kubelet".
const dropinComponent = "kubelet-dropin"

// configNamespaceName is deploy/config-namespace.yaml's namespace: the
// only one whose ConfigMaps a node may read.
const configNamespaceName = "dynconfig-configs"

// dropinNode is the stock kubelet's two roles (kubeletdropin) on a hollow
// kubelet's Node, with the node's own credentials (system:node:<name>, as
// dynconfig-kubelet run has), a fake systemd (Restart runs the pre-start
// role, as ExecStartPre does) and a healthz that answers ok. The hollow
// kubelet runs the pods; the drain evicts them.
type dropinNode struct {
	t        *testing.T
	name     string
	common   kubeletdropin.Common
	mu       sync.Mutex
	restarts []string // what the Node looked like at each restart
	client   kubernetes.Interface
}

func startDropinRoles(ctx context.Context, t *testing.T, cl *cluster.Cluster, node string, drainTimeout time.Duration) *dropinNode {
	t.Helper()
	dir := t.TempDir()
	files := kubeletdropin.Files{Config: filepath.Join(dir, "config.yaml"), ConfigDir: filepath.Join(dir, "conf.d")}
	if err := os.MkdirAll(files.ConfigDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.Config, []byte(kubeletHead+"maxPods: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "kubelet-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := cl.NodeConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	d := &dropinNode{t: t, name: node, client: newClient(t, cfg, 50, 100), common: kubeletdropin.Common{
		Files: files, StateDir: filepath.Join(dir, "state"), KubeletVersion: componentVersion,
		KubeletRootDir: root, Component: dropinComponent,
	}}
	d.preStart(ctx) // the kubelet's first start
	healthz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(healthz.Close)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		err := kubeletdropin.Run(klog.NewContext(ctx, klog.Background().WithName(node)), kubeletdropin.RunOptions{
			Common: d.common, Client: d.client, NodeName: node,
			Restarter:  dynconfig.RestarterFunc(d.restart),
			HealthzURL: healthz.URL, PollInterval: 200 * time.Millisecond, StartTimeout: 20 * time.Second, ResyncPeriod: 2 * time.Second,
			Drain: kubeletdropin.DrainOptions{Timeout: drainTimeout, EvictRetryDelay: time.Second},
		})
		if err != nil {
			t.Errorf("run role of %s: %v", node, err)
		}
	}()
	return d
}

const kubeletHead = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func (d *dropinNode) preStart(ctx context.Context) {
	res, err := kubeletdropin.PreStart(ctx, d.common, 0)
	if err != nil {
		d.t.Errorf("pre-start role of %s: %v (%s)", d.name, err, res.Fallback)
	}
}

// restart is the fake systemd's RestartUnit: it notes the Node as the run
// role left it, then runs the pre-start role (the kubelet itself, the
// hollow one, goes on).
func (d *dropinNode) restart(ctx context.Context) error {
	n, err := d.client.CoreV1().Nodes().Get(ctx, d.name, metav1.GetOptions{})
	note := fmt.Sprintf("read failed: %v", err)
	if err == nil {
		_, ours := n.Annotations[nodeapi.CordonAnnotation]
		note = fmt.Sprintf("unschedulable=%v cordon-annotation=%v", n.Spec.Unschedulable, ours)
	}
	d.mu.Lock()
	d.restarts = append(d.restarts, note)
	d.mu.Unlock()
	d.preStart(ctx)
	return nil
}

func (d *dropinNode) restartNotes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.restarts...)
}

// dropinStatus reads the ConfigStatus the roles publish.
func dropinStatus(ctx context.Context, client kubernetes.Interface, node string) (*corev1.Node, *nodeapi.ConfigStatus, error) {
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	s, err := nodeapi.ReadConfigStatus(n, dropinComponent)
	return n, s, err
}

func createDrainConfigMap(ctx context.Context, t *testing.T, client kubernetes.Interface, name, payload string) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(configNamespaceName).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: configNamespaceName, Annotations: map[string]string{components.TrialDurationAnnotation: "2s"}},
		Data:       map[string]string{"kubelet": kubeletHead + payload},
		Immutable:  ptr.To(true),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func podsOfApp(ctx context.Context, t *testing.T, client kubernetes.Interface, app string) []corev1.Pod {
	t.Helper()
	l, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func describePlaces(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		s := fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += " terminating"
		}
		if podIsReady(&p) {
			s += " ready"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

func setUnschedulable(ctx context.Context, t *testing.T, client kubernetes.Interface, node string, on bool) {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"unschedulable":%v}}`, on), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deployOn creates a Deployment of replicas pods labelled app=name and a
// PodDisruptionBudget minAvailable min over them, with every pod on node
// (the other nodes are cordoned while they are scheduled), and waits for
// them Ready and for the disruption controller to allow allowed
// disruptions.
func deployOn(ctx context.Context, t *testing.T, h *harness, name, node string, others []string, replicas, minAvailable, allowed int32) {
	t.Helper()
	for _, o := range others {
		setUnschedulable(ctx, t, h.client, o, true)
	}
	app := map[string]string{"app": name}
	if _, err := h.client.AppsV1().Deployments(namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(minAvailable)), Selector: &metav1.LabelSelector{MatchLabels: app}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, controlPlaneWait, fmt.Sprintf("%d pods of %s Ready on %s, the budget allowing %d", replicas, name, node, allowed), func(ctx context.Context) (bool, string) {
		pods := podsOfApp(ctx, t, h.client, name)
		ready := 0
		for _, p := range pods {
			if p.Spec.NodeName == node && podIsReady(&p) {
				ready++
			}
		}
		p, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status
		return ready == int(replicas) && st.ObservedGeneration == p.Generation && st.DisruptionsAllowed == allowed && st.CurrentHealthy == replicas,
			fmt.Sprintf("pods: %s; budget %+v", describePlaces(pods), st)
	}, nil)
	for _, o := range others {
		setUnschedulable(ctx, t, h.client, o, false)
	}
}

// TestKubeletDrain runs the stock kubelet's run role (kubeletdropin, on the
// node's own credentials, deploy/ applied: RBAC and admission as shipped)
// on a hollow kubelet's Node, with the upstream control plane (the
// disruption controller computes the budgets, the scheduler places the
// replacements, the ReplicaSet controller makes them) and a second hollow
// kubelet for the replacements to land on.
//
//  1. A drain-class change (cpuManagerPolicy none -> static): the run role
//     cordons the Node, evicts the Deployment's two pods through the
//     Eviction API one at a time as its budget (minAvailable 1) allows
//     (the second eviction is refused until the first pod's replacement is
//     Ready elsewhere), leaves the DaemonSet's pod, restarts the kubelet
//     only then, promotes the config and uncordons the Node. A watcher of
//     the budget sees it never below its minimum.
//  2. A drain-class change back (static -> none) through a ConfigRollout
//     with maxFailures 0 (and podDisruptionBudgets Ignore: the planner
//     would otherwise hold the node), while another Deployment's only pod
//     is guarded by a budget that allows nothing: the drain times out, the Node is
//     uncordoned and stays on its config (not marked bad), ConfigOK and the
//     ConfigStatus (NotApplied) name the pod and the budget, and the
//     rollout completes without halting or reverting, naming the node in
//     its NotApplied condition.
func TestKubeletDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("the full control plane and two hollow kubelets: skipped with -short")
	}
	ctx := testContext(t, 10*time.Minute)
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true, ControlPlane: true})
	h := &harness{cl: cl, client: newClient(t, cl.Config, 200, 400)}
	if _, err := cl.ApplyKustomization(ctx, deployDir); err != nil {
		t.Fatal(err)
	}
	installRolloutCRD(ctx, t, h)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	drained := startHollowKubelet(ctx, t, h, "drain-0")
	other := startHollowKubelet(ctx, t, h, "drain-1")

	// A DaemonSet: its pod stays on the drained node.
	agent := map[string]string{"app": "agent"}
	if _, err := h.client.AppsV1().DaemonSets(namespace).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: agent},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: agent},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deployOn(ctx, t, h, "web", drained.nodeName, []string{other.nodeName}, 2, 1, 1)
	waitFor(ctx, t, controlPlaneWait, "the DaemonSet's pod on "+drained.nodeName, func(ctx context.Context) (bool, string) {
		pods := podsOfApp(ctx, t, h.client, "agent")
		for _, p := range pods {
			if p.Spec.NodeName == drained.nodeName && p.Status.Phase == corev1.PodRunning {
				return true, ""
			}
		}
		return false, describePlaces(pods)
	}, nil)
	budget := watchBudget(ctx, t, h, "web")
	// Evictions through the budget: the Eviction API lists the pods it
	// evicted in the budget's status (a plain delete would not).
	lw := cache.NewListWatchFromClient(h.client.PolicyV1().RESTClient(), "poddisruptionbudgets", namespace, fields.OneTermEqualSelector("metadata.name", "web"))
	spent := watchRecord(ctx, t, lw, &policyv1.PodDisruptionBudget{}, func(obj any) string {
		if p, ok := obj.(*policyv1.PodDisruptionBudget); ok && len(p.Status.DisruptedPods) > 0 {
			return fmt.Sprintf("disrupted %v, %d allowed", p.Status.DisruptedPods, p.Status.DisruptionsAllowed)
		}
		return ""
	})

	if p, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Logf("before the drain: budget web %+v; pods: %s", p.Status, describePlaces(podsOfApp(ctx, t, h.client, "web")))
	}
	d := startDropinRoles(ctx, t, cl, drained.nodeName, 90*time.Second)
	waitFor(ctx, t, waitTimeout, "the run role's first status", func(ctx context.Context) (bool, string) {
		_, s, err := dropinStatus(ctx, h.client, drained.nodeName)
		return err == nil && s != nil && s.Phase == nodeapi.PhaseLocal, fmt.Sprintf("%+v, %v", s, err)
	}, nil)

	// 1. none -> static, assigned by hand.
	static := createDrainConfigMap(ctx, t, h.client, "cpu-static", "cpuManagerPolicy: static\nkubeReserved: {cpu: \"1\"}\n")
	assign := func(cm *corev1.ConfigMap) {
		if _, err := h.client.CoreV1().Nodes().Patch(ctx, drained.nodeName, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, nodeapi.AssignmentAnnotationFor(dropinComponent), assignmentFor(cm)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	assign(static)
	waitFor(ctx, t, 3*time.Minute, "the static config promoted and the Node uncordoned", func(ctx context.Context) (bool, string) {
		n, s, err := dropinStatus(ctx, h.client, drained.nodeName)
		if err != nil || s == nil {
			return false, fmt.Sprintf("%v", err)
		}
		_, ours := n.Annotations[nodeapi.CordonAnnotation]
		return s.Phase == nodeapi.PhasePromoted && s.Active != nil && s.Active.ConfigMap.UID == static.UID && !n.Spec.Unschedulable && !ours,
			fmt.Sprintf("status %+v; unschedulable %v, cordon annotation %v; restarts %v", s, n.Spec.Unschedulable, ours, d.restartNotes())
	}, func() string { return describePlaces(podsOfApp(ctx, t, h.client, "web")) })
	if notes := d.restartNotes(); len(notes) != 1 || notes[0] != "unschedulable=true cordon-annotation=true" {
		t.Errorf("restarts %v, want one, with the Node cordoned by dynconfig", notes)
	}
	for _, p := range podsOfApp(ctx, t, h.client, "web") {
		if p.Spec.NodeName == drained.nodeName {
			t.Errorf("pod %s still on the drained node", p.Name)
		}
	}
	agentOn := false
	for _, p := range podsOfApp(ctx, t, h.client, "agent") {
		agentOn = agentOn || p.Spec.NodeName == drained.nodeName && p.DeletionTimestamp == nil
	}
	if !agentOn {
		t.Error("the DaemonSet's pod left the drained node")
	}
	dropIn, err := os.ReadFile(d.common.Files.Path())
	if err != nil || !strings.Contains(string(dropIn), "cpuManagerPolicy: static") {
		t.Errorf("drop-in %q, %v: want the static config", dropIn, err)
	}
	if v := budget.take(); len(v) > 0 {
		t.Errorf("the budget fell below its minimum during the drain: %s", strings.Join(v, "; "))
	}
	if v := spent.take(); len(v) == 0 {
		t.Error("the budget's status never listed an evicted pod: the pods did not go through the Eviction API")
	} else {
		t.Logf("the budget during the drain: %s", strings.Join(v, "; "))
	}

	// The node may cordon itself, and change nothing else in its spec.
	for _, tc := range []struct {
		patch, wantErr string
	}{
		{`{"spec":{"unschedulable":true}}`, ""},
		{`{"spec":{"providerID":"fake://elsewhere"}}`, "may change only spec.unschedulable"},
		{`{"spec":{"podCIDR":"10.99.0.0/24"}}`, "may change only spec.unschedulable"},
	} {
		_, err := d.client.CoreV1().Nodes().Patch(ctx, drained.nodeName, types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("the node's dry-run patch %s: %v, want %q", tc.patch, err, tc.wantErr)
		}
	}

	// 2. static -> none through a rollout, while a budget allows nothing.
	deployOn(ctx, t, h, "stuck", drained.nodeName, []string{other.nodeName}, 1, 1, 0)
	startRolloutController(ctx, t, h, "drain", nil)
	label := "drain-e2e"
	if _, err := h.client.CoreV1().Nodes().Patch(ctx, drained.nodeName, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, label), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	none := createDrainConfigMap(ctx, t, h.client, "cpu-none", "maxPods: 10\n")
	f := &fleet{t: t, h: h, dyn: dynamic.NewForConfigOrDie(cl.Config), label: label, prefix: "drain"}
	ro := f.rolloutIn(configNamespaceName, "back", none.Name, func(s *v1alpha1.ConfigRolloutSpec) {
		s.Component, s.PayloadKey = dropinComponent, "kubelet"
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
		s.ProgressDeadlineSeconds = ptr.To(int32(300))
		// The planner would hold the node for the budget that allows
		// nothing (a restart is a disruption); here the node is assigned
		// and its drain meets the budget.
		s.PodDisruptionBudgets = v1alpha1.DisruptionBudgetsIgnore
	})
	getRollout := func(ctx context.Context) (*v1alpha1.ConfigRollout, error) {
		u, err := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(configNamespaceName).Get(ctx, ro, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		var r v1alpha1.ConfigRollout
		return &r, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
	}
	var got *v1alpha1.ConfigRollout
	waitFor(ctx, t, 4*time.Minute, "the rollout to end", func(ctx context.Context) (bool, string) {
		r, err := getRollout(ctx)
		if err != nil {
			return false, err.Error()
		}
		got = r
		return !r.Status.Phase.Active(), fmt.Sprintf("%s: %s", r.Status.Phase, r.Status.Message)
	}, nil)
	logHistory(t, got)
	n, s, err := dropinStatus(ctx, h.client, drained.nodeName)
	if err != nil || s == nil {
		t.Fatalf("status: %v", err)
	}
	if s.Phase != nodeapi.PhaseNotApplied || s.Assigned == nil || s.Assigned.ConfigMap.UID != none.UID ||
		s.Active == nil || s.Active.ConfigMap.UID != static.UID || s.LastKnownGood == nil || s.LastKnownGood.ConfigMap.UID != static.UID {
		t.Errorf("status %+v: want NotApplied for %s, running and last-known-good %s", s, none.Name, static.Name)
	}
	for _, want := range []string{"stuck-", "disruption budget"} {
		if !strings.Contains(s.Error, want) {
			t.Errorf("status error %q does not name %q", s.Error, want)
		}
	}
	if _, ours := n.Annotations[nodeapi.CordonAnnotation]; n.Spec.Unschedulable || ours {
		t.Errorf("Node unschedulable %v, cordon annotation %v after the drain timed out: want uncordoned", n.Spec.Unschedulable, ours)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == nodeapi.ConditionTypeFor(dropinComponent) && (c.Status != corev1.ConditionFalse || !strings.Contains(c.Reason, "not applied")) {
			t.Errorf("%s %s %q: want False, saying the config was not applied", c.Type, c.Status, c.Reason)
		}
	}
	if got.Status.Phase != v1alpha1.PhaseCompleted || got.Status.Failed != 0 || !conditionTrue(got, plan.ConditionNotApplied) {
		t.Errorf("rollout %s (%s), failed %d, NotApplied condition %v: want Completed, no failure, the condition True",
			got.Status.Phase, got.Status.Message, got.Status.Failed, conditionTrue(got, plan.ConditionNotApplied))
	}
	if !strings.Contains(got.Status.Message, drained.nodeName) {
		t.Errorf("rollout message %q does not name %s", got.Status.Message, drained.nodeName)
	}
	if a := n.Annotations[nodeapi.AssignmentAnnotationFor(dropinComponent)]; !strings.Contains(a, string(none.UID)) {
		t.Errorf("assignment %s: the rollout reverted the node", a)
	}
	if dropIn, err := os.ReadFile(d.common.Files.Path()); err != nil || !strings.Contains(string(dropIn), "cpuManagerPolicy: static") {
		t.Errorf("drop-in %q, %v: want the static config still", dropIn, err)
	}
	if notes := d.restartNotes(); len(notes) != 1 {
		t.Errorf("restarts %v: the config not applied restarted the kubelet", notes)
	}
	for _, p := range podsOfApp(ctx, t, h.client, "stuck") {
		if p.Spec.NodeName != drained.nodeName || p.DeletionTimestamp != nil {
			t.Errorf("pod %s: %s; want it left on %s", p.Name, describePlaces([]corev1.Pod{p}), drained.nodeName)
		}
	}
}
