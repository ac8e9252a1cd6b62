//go:build linux

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// drainNamespace holds the workloads of TestStockKubeletDrainClassRollout.
const drainNamespace = "shop"

// drainApps are the test's Deployments, each with a PodDisruptionBudget of
// its own.
var drainApps = []string{"web", "api"}

// TestStockKubeletDrainClassRollout is the drain-class change of issue 31
// end to end: cpuManagerPolicy none -> static (CPU 0 reserved) by a
// ConfigRollout to the real kubelet, then static -> none by another, each
// while PodDisruptionBudget-guarded pods run on the node, then one whose
// drain cannot finish.
//
// The cluster runs the upstream control plane (cluster.Options.ControlPlane:
// the disruption controller computes the budgets' status, the scheduler
// places the pods, the ReplicaSet controller replaces evicted pods, the
// DaemonSet controller runs a pod on every node) with the Node authorizer
// and NodeRestriction, so the run role evicts and cordons with the node's own
// credentials as on a real node. Three hollow kubelets are where evicted
// pods land; the rollouts select the real node alone.
//
// Two Deployments, web and api, of two replicas each, one per node
// (required pod anti-affinity on the hostname), start on the real node and
// hollow-0 (the other hollows cordoned); each has a PodDisruptionBudget
// minAvailable 1, so one eviction at a time. A DaemonSet runs a pod on every
// node. hollow-1 is then uncordoned: the only place an evicted pod fits.
// The rollouts select the real node alone.
//
// Leg 1, none -> static: the node is cordoned, the two app pods on it are
// evicted (deleted before the kubelet's first start on static) and their
// replacements run on hollow-1, the kubelet starts once, on static, with
// cpu_manager_state reset (it names static afterwards), the config is
// promoted, and the node is uncordoned. The DaemonSet's pod on the node
// stays (same UID, never deleted).
//
// Between the legs, with only the real node schedulable, web and api get a
// third replica (minAvailable 2) and a third Deployment, queue, two
// replicas with no spread (minAvailable 1), lands both on the real node.
// Leg 2, static -> none, takes the same path back with the planner's budget
// rule off (spec.podDisruptionBudgets Ignore: the planner would hold a node
// with two of queue's pods against one allowed for good, although a drain
// evicts them one at a time), so that the drain's evictions alone keep the
// budgets: queue's second pod goes only after a replacement of the first
// is Ready elsewhere (the Eviction API refuses it, and the drain retries, or
// holds it while the budget's status changes under it).
//
// Leg 3, a drain that cannot finish: pinned, one replica bound to the real
// node, minAvailable 1. The run role (--drain-timeout drainTimeout) gives
// up, uncordons, and stays on none without a restart; ConfigOK says why;
// the rollout completes with the node "not applied here", not failed.
//
// Two watchers run throughout: the budgets' status as the disruption
// controller writes it (currentHealthy below desiredHealthy), and each app's
// Ready pods not being deleted, counted from the pods' own events, against
// the budget's minimum. Both must record nothing.
func TestStockKubeletDrainClassRollout(t *testing.T) {
	// Seen failing before the drain-class path: "rollout cpu-static:
	// Halted with 0 promoted (halted: 1 nodes failed, more than maxFailures
	// 0: realnode-1396: kubelet reports RolledBack: crash loop detected
	// with current ...)".
	cl, n := drainClassNode(t, true, fmt.Sprintf("--drain-timeout=%v", drainTimeout))
	// The watches end before the cluster stops (cleanups run last first).
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// What the run role needs beyond the kubelet's grants to drain (get
	// DaemonSets: kubectl's drain keeps a DaemonSet's pod only once it has
	// read the DaemonSet). Seen failing without it: "pods that kubectl
	// drain would not evict either: cannot delete daemonsets.apps "agent"
	// is forbidden: User "system:node:..." cannot get resource
	// "daemonsets"", and the node not applying the config.
	if _, err := cl.ApplyManifests(ctx, filepath.Join("..", "..", "deploy", "kubelet-drain-rbac.yaml")); err != nil {
		t.Fatal(err)
	}

	f := n.startFleet(ctx, 3)
	h0, h1, h2 := f.hollow[0], f.hollow[1], f.hollow[2]
	n.setUnschedulable(h1, true)
	n.setUnschedulable(h2, true)
	n.startDrainWorkloads(ctx)
	n.eventually("each app Ready on the real node and "+h0, n.appsPlaced(map[string]int{n.name: 1, h0: 1}))
	agent := n.agentPod()
	n.eventually("each budget allowing 1 disruption", n.budgetsAllow(1))
	w := n.watchDisruption(ctx)
	n.setUnschedulable(h1, false)

	static := n.configMap("cpu-static", "maxPods: 40\n"+staticPolicyPayload, trial, threshold)
	n.drainLeg(ctx, f, w, static, 40, "static", false)
	n.eventually("web and api Ready on "+h0+" and "+h1, n.appsPlaced(map[string]int{h0: 1, h1: 1}))

	// Back onto the real node for the second leg, the only node left
	// schedulable: a third replica of web and api each (minAvailable 2:
	// one eviction at a time), and queue, two replicas with no spread and
	// minAvailable 1.
	n.setUnschedulable(h0, true)
	n.setUnschedulable(h1, true)
	w.setMin("web", 2)
	w.setMin("api", 2)
	for _, app := range drainApps {
		n.patch(ctx, "PodDisruptionBudget "+app, func() error {
			_, err := n.cl.Client.PolicyV1().PodDisruptionBudgets(drainNamespace).Patch(ctx, app, types.MergePatchType,
				[]byte(`{"spec":{"minAvailable":2}}`), metav1.PatchOptions{})
			return err
		})
		n.patch(ctx, "Deployment "+app, func() error {
			_, err := n.cl.Client.AppsV1().Deployments(drainNamespace).Patch(ctx, app, types.MergePatchType,
				[]byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
			return err
		})
	}
	n.createApp(ctx, queueApp, 2, 1, false)
	n.eventually("web's and api's third replica Ready on the real node", n.appsPlaced(map[string]int{n.name: 1, h0: 1, h1: 1}))
	n.eventually("queue's two replicas Ready on the real node", n.readyOn(queueApp, n.name, 2))
	n.eventually("each budget allowing 1 disruption", n.budgetsAllow(1, append(drainApps, queueApp)...))
	for _, h := range f.hollow {
		n.setUnschedulable(h, false)
	}

	// Leg 2 ignores the budgets in the planner: it counts a restart as the
	// disruption of every pod on the node at once, so queue's two pods
	// against one allowed would hold the node for good, although a drain
	// evicts them one at a time. Here the drain's evictions alone keep the
	// budgets.
	none := n.configMap("cpu-none", "maxPods: 50\n", trial, threshold)
	var queued []types.UID
	for _, p := range n.appPodsOn(n.name) {
		if p.Labels["app"] == queueApp {
			queued = append(queued, p.UID)
		}
	}
	refusalsBefore := strings.Count(readFile(n.followLog), budgetRefusal)
	n.drainLeg(ctx, f, w, none, 50, "none", true)
	n.eventually("web and api Ready on "+h0+", "+h1+" and "+h2, n.appsPlaced(map[string]int{h0: 1, h1: 1, h2: 1}))
	// One of queue's pods at a time: the later of the two was deleted only
	// after a replacement was Ready elsewhere.
	first, second, replaced := w.serialized(queueApp, queued)
	if replaced.IsZero() || !replaced.Before(second) {
		t.Fatalf("%s: queue's pods on the real node were deleted at %v and %v, its first replacement Ready at %v: both went before a replacement was Ready",
			none.Name, first.Format(stamp), second.Format(stamp), replaced.Format(stamp))
	}
	t.Logf("%s: queue's pods deleted at %s and %s, a replacement Ready at %s in between; the drain was refused %d evictions by a budget (the API server also holds an eviction while the budget's status changes under it)",
		none.Name, first.Format(stamp), second.Format(stamp), replaced.Format(stamp), strings.Count(readFile(n.followLog), budgetRefusal)-refusalsBefore)

	if got := n.agentPod(); got.UID != agent.UID {
		t.Errorf("the DaemonSet's pod on the real node was replaced (%s, then %s): a drain leaves DaemonSet pods", agent.UID, got.UID)
	}

	// 3. A drain that cannot finish: pinned, one replica bound to the real
	// node with minAvailable 1, can never be evicted. The drain gives up
	// after its timeout; the node stays on none, uncordoned, not
	// restarted, and the rollout counts it as not applied here, not as
	// failed.
	n.createApp(ctx, pinnedApp, 1, 1, true)
	n.eventually("pinned Ready on the real node", n.readyOn(pinnedApp, n.name, 1))
	n.eventually("pinned's budget allowing none", n.budgetsAllow(0, pinnedApp))
	pinned := n.appPodsOn(n.name)
	before := len(n.sup.startsSoFar())
	refusalsBefore = strings.Count(readFile(n.followLog), budgetRefusal)
	blocked := n.configMap("cpu-static-blocked", "maxPods: 40\n"+staticPolicyPayload, trial, threshold)
	t3 := time.Now()
	r := f.rolloutWith(ctx, blocked, []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromString("100%"))}}, 1, func(r *v1alpha1.ConfigRollout) {
		r.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: n.name}}
		r.Spec.PodDisruptionBudgets = v1alpha1.DisruptionBudgetsIgnore
	}, v1alpha1.PhaseCompleted, v1alpha1.PhaseHalted, v1alpha1.PhaseReverted)
	if r.Status.Phase != v1alpha1.PhaseCompleted || r.Status.Promoted != 0 || r.Status.Failed != 0 || !strings.Contains(r.Status.Message, "not applied here") {
		t.Fatalf("rollout %s: %s, %d promoted, %d failed (%s): want Completed with the real node not applied here, not failed\n%s",
			blocked.Name, r.Status.Phase, r.Status.Promoted, r.Status.Failed, r.Status.Message, n.more())
	}
	n.eventually(blocked.Name+" not applied here", n.notAppliedHere(blocked, none, "the drain did not finish", budgetRefusal))
	if st := n.sup.startsSoFar(); len(st) != before {
		t.Fatalf("%s: %d kubelet starts, want none\n%s", blocked.Name, len(st)-before, n.more())
	}
	if got := n.appPodsOn(n.name); len(got) != 1 || got[0].UID != pinned[0].UID || !podReady(&got[0]) {
		t.Fatalf("%s: the pinned pod on the real node changed: %v, then %v", blocked.Name, pinned, got)
	}
	// The drain kept asking for its whole timeout (kubectl's drain asks
	// again every 5 s): not cut short by the run role's sync step (10 s),
	// as it was before (2 refusals, "global timeout reached: 40s" after
	// 10.2 s).
	if got := strings.Count(readFile(n.followLog), budgetRefusal) - refusalsBefore; got < minRefusals {
		t.Fatalf("%s: the drain was refused %d evictions, want at least %d in its %v: it gave up before its timeout\n%s", blocked.Name, got, minRefusals, drainTimeout, n.more())
	}
	n.lastKnownGoodIs(none)
	n.notMarkedBad(blocked)
	n.cpuPolicyOnDisk("none")
	t.Logf("rollout %s: the drain gave up (pinned's budget allows none), not applied here, %v after the rollout's creation; %q",
		blocked.Name, time.Since(t3).Round(time.Millisecond), r.Status.Message)

	if v := w.takeViolations(); len(v) > 0 {
		t.Errorf("after all legs: %d moments below a budget's minimum:\n%s", len(v), strings.Join(v, "\n"))
	}
}

// The apps of the second and third leg (drainApps are in all).
const (
	queueApp  = "queue"
	pinnedApp = "pinned"
)

// allApps are the apps the watchers follow, and appSelector selects their
// pods.
var (
	allApps     = append(slices.Clone(drainApps), queueApp, pinnedApp)
	appSelector = "app in (" + strings.Join(allApps, ",") + ")"
)

// stamp formats the watchers' times in messages.
const stamp = "15:04:05.000"

// budgetRefusal is what kubectl's drain prints (the run role logs it) when
// the Eviction API refuses an eviction for a PodDisruptionBudget
// (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go).
const budgetRefusal = "violate the pod's disruption budget"

// drainTimeout is the run role's --drain-timeout in
// TestStockKubeletDrainClassRollout: long enough for two evictions a
// budget spaces out (kubectl's drain asks again every 5 s) on a busy
// machine, short enough to wait out in the third leg.
const drainTimeout = 40 * time.Second

// minRefusals is the least number of refusals a drain blocked by a budget
// logs in drainTimeout, one every 5 s (kubectl's retry delay) with room
// for a slow machine: more than a drain cut short at 10 s logs (2).
const minRefusals = 4

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// drainLeg rolls cm out to the real node alone (ignoring the budgets in
// the planner if ignoreBudgets) and checks the drain-class path: cordoned,
// the app pods on it evicted before the kubelet's start on cm and Ready
// elsewhere, one kubelet start, on cm, with the CPU manager state reset to
// policy, promoted, uncordoned, no budget below its minimum.
func (n *realNode) drainLeg(ctx context.Context, f *fleet, w *disruptionWatch, cm *corev1.ConfigMap, maxPods int64, policy string, ignoreBudgets bool) {
	t := n.t
	t.Helper()
	evicted := n.appPodsOn(n.name)
	if len(evicted) == 0 {
		t.Fatalf("%s: no app pod on the real node before the rollout", cm.Name)
	}
	w.take()
	before := len(n.sup.startsSoFar())
	t0 := time.Now()
	r := f.rolloutWith(ctx, cm, []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromString("100%"))}}, 1, func(r *v1alpha1.ConfigRollout) {
		r.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: n.name}}
		if ignoreBudgets {
			r.Spec.PodDisruptionBudgets = v1alpha1.DisruptionBudgetsIgnore
		}
	}, v1alpha1.PhaseCompleted, v1alpha1.PhaseHalted, v1alpha1.PhaseReverted)
	if r.Status.Phase != v1alpha1.PhaseCompleted || r.Status.Promoted != 1 {
		t.Fatalf("rollout %s: %s with %d promoted (%s), want Completed with the real node\n%s", cm.Name, r.Status.Phase, r.Status.Promoted, r.Status.Message, n.more())
	}
	t.Logf("rollout %s (cpuManagerPolicy %s): completed in %v", cm.Name, policy, time.Since(t0).Round(time.Millisecond))
	n.eventually("the real node Ready with capacity "+fmt.Sprint(maxPods), n.ready(maxPods, t0))
	n.eventually(cm.Name+" promoted", n.phase(nodeapi.PhasePromoted, cm))
	n.lastKnownGoodIs(cm)
	n.eventually("the real node uncordoned", n.uncordoned())
	n.cpuPolicyOnDisk(policy)

	// One start, on cm, after the drain.
	st := n.sup.startsSoFar()[before:]
	if len(st) != 1 || !strings.Contains(st[0].dropIn, string(cm.UID)) {
		t.Fatalf("%s: %d kubelet starts, want exactly 1, on it (no refused start)\n%s", cm.Name, len(st), n.more())
	}
	began := st[0].began
	cordoned, ok := w.cordonedAt(t0)
	if !ok || !cordoned.Before(began) {
		t.Fatalf("%s: the real node was not seen cordoned before the kubelet's start on it (%v, seen: %t at %v)", cm.Name, began, ok, cordoned)
	}
	for _, p := range evicted {
		at, ok := w.deletedAt(p.UID)
		if !ok || !at.Before(began) {
			t.Fatalf("%s: pod %s on the real node was not deleted before the kubelet's start on %s (seen: %t at %v, start %v)", cm.Name, p.Name, cm.Name, ok, at, began)
		}
	}
	// Nothing of the apps left on the real node, every app whole again.
	n.eventually("every app Ready again, none of it on the real node", func() (bool, string) {
		if on := n.appPodsOn(n.name); len(on) != 0 {
			return false, fmt.Sprintf("%d app pods still on the real node", len(on))
		}
		for _, app := range allApps {
			d, err := n.cl.Client.AppsV1().Deployments(drainNamespace).Get(ctx, app, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil || d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
				return false, fmt.Sprintf("%s: %v %+v", app, err, d.Status)
			}
		}
		return true, ""
	})
	if v := w.takeViolations(); len(v) > 0 {
		t.Fatalf("%s: %d moments below a budget's minimum:\n%s", cm.Name, len(v), strings.Join(v, "\n"))
	}
	t.Logf("%s: cordoned %v, kubelet started %v, after the rollout's creation; %d pods evicted and Ready elsewhere; 0 moments below a budget",
		cm.Name, cordoned.Sub(t0).Round(time.Millisecond), began.Sub(t0).Round(time.Millisecond), len(evicted))
}

// drainClassNode starts the test's cluster (with the upstream control
// plane if controlPlane), the real node's containerd and its kubelet under
// the supervisor, waits until the Node is Ready on its own config, and
// starts the run role, until ConfigOK says so. Both roles are told the
// kubelet's root dir (--kubelet-root-dir), where the state files a
// drain-class change resets are; runFlags go to the run role too.
func drainClassNode(t *testing.T, controlPlane bool, runFlags ...string) (*cluster.Cluster, *realNode) {
	t.Helper()
	needsTwoCPUs(t)
	kubeletBin := requirements(t)
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true, ControlPlane: controlPlane})
	if _, err := cl.ApplyManifests(context.Background(), filepath.Join("..", "..", "deploy", "config-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	n := newRealNode(t, cl, kubeletBin)
	n.startContainerd(true)
	t0 := time.Now()
	n.startSupervisor("--kubelet-root-dir=" + n.rootDir)
	n.eventually("Node Ready on the local config", n.ready(110, t0))
	n.startFollow(append([]string{"--kubelet-root-dir=" + n.rootDir}, runFlags...)...)
	n.eventually("ConfigOK True on the local config", n.configOK(corev1.ConditionTrue, "init", ""))
	n.cpuPolicyOnDisk("none")
	return cl, n
}

// setUnschedulable cordons or uncordons a node, as kubectl cordon does,
// with the admin's credentials.
func (n *realNode) setUnschedulable(node string, on bool) {
	n.t.Helper()
	n.patch(context.Background(), "Node "+node, func() error {
		_, err := n.cl.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on), metav1.PatchOptions{})
		return err
	})
}

func (n *realNode) patch(ctx context.Context, what string, do func() error) {
	n.t.Helper()
	if err := do(); err != nil {
		n.t.Fatalf("patch %s: %v", what, err)
	}
}

// startDrainWorkloads creates the namespace, the DaemonSet agent and, per
// app of drainApps, a Deployment of two replicas spread one per node and a
// PodDisruptionBudget minAvailable 1.
func (n *realNode) startDrainWorkloads(ctx context.Context) {
	t := n.t
	t.Helper()
	c := n.cl.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: drainNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agentLabels := map[string]string{"app": "agent"}
	ds := podTemplate(agentLabels)
	ds.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if _, err := c.AppsV1().DaemonSets(drainNamespace).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agentLabels}, Template: ds},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, app := range drainApps {
		n.createApp(ctx, app, 2, 1, false)
	}
}

// podTemplate is the pods' template: the test's busybox image (present on
// the real node, "pulled" by the hollow kubelets' fake runtime), an exec
// readiness probe every second.
func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: appImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: sleeper,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "true"}}},
					PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
				},
			}},
		},
	}
}

// createApp creates a Deployment of replicas and a PodDisruptionBudget of
// minAvailable, both named app. The apps of drainApps spread one pod per
// node (required pod anti-affinity on the hostname); pinned binds the pods
// to the real node (a node selector on its hostname).
func (n *realNode) createApp(ctx context.Context, app string, replicas, minAvailable int32, pinned bool) {
	t := n.t
	t.Helper()
	labels := map[string]string{"app": app}
	tmpl := podTemplate(labels)
	if slices.Contains(drainApps, app) {
		tmpl.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname,
			}},
		}}
	}
	if pinned {
		tmpl.Spec.NodeSelector = map[string]string{corev1.LabelHostname: n.name}
	}
	c := n.cl.Client
	if _, err := c.AppsV1().Deployments(drainNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets(drainNamespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(minAvailable)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readyOn: app has want Ready pods on node.
func (n *realNode) readyOn(app, node string, want int) func() (bool, string) {
	return func() (bool, string) {
		got := 0
		for _, p := range n.appPodsOn(node) {
			if p.Labels["app"] == app && podReady(&p) && p.DeletionTimestamp == nil {
				got++
			}
		}
		return got == want, fmt.Sprintf("%d Ready pods of %s on %s", got, app, node)
	}
}

// appPods lists the pods of the apps (not the agent's).
func (n *realNode) appPods() []corev1.Pod {
	n.t.Helper()
	list, err := n.cl.Client.CoreV1().Pods(drainNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: appSelector})
	if err != nil {
		n.t.Fatal(err)
	}
	return list.Items
}

// appPodsOn lists the app pods bound to node.
func (n *realNode) appPodsOn(node string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range n.appPods() {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// appsPlaced: each app of drainApps has exactly want[node] Ready pods on
// each node of want, and no other pod.
func (n *realNode) appsPlaced(want map[string]int) func() (bool, string) {
	return func() (bool, string) {
		got := map[string]map[string]int{}
		total := 0
		for _, p := range n.appPods() {
			app := p.Labels["app"]
			if !slices.Contains(drainApps, app) {
				continue
			}
			if got[app] == nil {
				got[app] = map[string]int{}
			}
			if podReady(&p) && p.DeletionTimestamp == nil {
				got[app][p.Spec.NodeName]++
			}
			total++
		}
		need := 0
		for _, c := range want {
			need += c
		}
		for _, app := range drainApps {
			for node, c := range want {
				if got[app][node] != c {
					return false, fmt.Sprintf("Ready pods per app and node: %v (%d pods in all)", got, total)
				}
			}
		}
		return total == need*len(drainApps), fmt.Sprintf("Ready pods per app and node: %v (%d pods in all)", got, total)
	}
}

// agentPod returns the DaemonSet's pod on the real node, Running.
func (n *realNode) agentPod() corev1.Pod {
	n.t.Helper()
	var pod corev1.Pod
	n.eventually("the DaemonSet's pod Running on the real node", func() (bool, string) {
		list, err := n.cl.Client.CoreV1().Pods(drainNamespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: "app=agent", FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
		})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 1 || !podRunning(&list.Items[0]) {
			return false, fmt.Sprintf("%d pods", len(list.Items))
		}
		pod = list.Items[0]
		return true, ""
	})
	return pod
}

// budgetsAllow: the budget of each app (default: drainApps) is observed
// and allows exactly allowed disruptions.
func (n *realNode) budgetsAllow(allowed int32, apps ...string) func() (bool, string) {
	if len(apps) == 0 {
		apps = drainApps
	}
	return func() (bool, string) {
		var out []string
		ok := true
		for _, app := range apps {
			p, err := n.cl.Client.PolicyV1().PodDisruptionBudgets(drainNamespace).Get(context.Background(), app, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ok = ok && p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == allowed
			out = append(out, fmt.Sprintf("%s: %+v", app, p.Status))
		}
		return ok, strings.Join(out, "; ")
	}
}

// disruptionWatch records, from watches of the API server:
//   - every status of an app's PodDisruptionBudget, as the disruption
//     controller writes it, whose currentHealthy is below its
//     desiredHealthy;
//   - every moment an app has fewer Ready pods not being deleted than its
//     budget's minimum (the pods' own events: nothing lags behind a
//     controller);
//   - when each pod was first seen deleted, and when the real node was
//     seen cordoned.
type disruptionWatch struct {
	node string

	mu         sync.Mutex
	min        map[string]int // per app: its budget's minAvailable
	pods       map[types.UID]*corev1.Pod
	deleted    map[types.UID]time.Time
	readyAt    map[types.UID]time.Time // when each pod was first seen healthy
	cordons    []time.Time
	violations []string
	// seenHealthy: the app had its minimum once; an app still starting
	// is below it by nature.
	seenHealthy map[string]bool
	// budgetHealthy: the budget's status had its minimum once.
	budgetHealthy map[string]bool
}

// watchDisruption starts the watches, with every app's minimum 1.
func (n *realNode) watchDisruption(ctx context.Context) *disruptionWatch {
	t := n.t
	t.Helper()
	w := &disruptionWatch{node: n.name, min: map[string]int{}, pods: map[types.UID]*corev1.Pod{}, deleted: map[types.UID]time.Time{}, readyAt: map[types.UID]time.Time{},
		seenHealthy: map[string]bool{}, budgetHealthy: map[string]bool{}}
	for _, app := range allApps {
		w.min[app] = 1
	}
	c := n.cl.Client
	run := func(lw cache.ListerWatcher, obj runtime.Object, h cache.ResourceEventHandlerFuncs) {
		_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: lw, ObjectType: obj, Handler: h})
		go ctrl.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
			t.Fatalf("the watch of %T did not sync", obj)
		}
	}
	run(cache.NewListWatchFromClient(c.PolicyV1().RESTClient(), "poddisruptionbudgets", drainNamespace, fields.Everything()), &policyv1.PodDisruptionBudget{},
		cache.ResourceEventHandlerFuncs{AddFunc: w.budget, UpdateFunc: func(_, o any) { w.budget(o) }})
	run(cache.NewFilteredListWatchFromClient(c.CoreV1().RESTClient(), "pods", drainNamespace, func(o *metav1.ListOptions) {
		o.LabelSelector = appSelector
	}), &corev1.Pod{}, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.pod(o, false) },
		UpdateFunc: func(_, o any) { w.pod(o, false) },
		DeleteFunc: func(o any) { w.pod(o, true) },
	})
	run(cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "nodes", "", fields.OneTermEqualSelector("metadata.name", n.name)), &corev1.Node{},
		cache.ResourceEventHandlerFuncs{AddFunc: w.nodeSeen, UpdateFunc: func(_, o any) { w.nodeSeen(o) }})
	if v := w.takeViolations(); len(v) > 0 {
		t.Fatalf("below a budget's minimum before any change:\n%s", strings.Join(v, "\n"))
	}
	return w
}

func (w *disruptionWatch) record(line string) {
	w.violations = append(w.violations, time.Now().Format(stamp)+": "+line)
}

func (w *disruptionWatch) budget(obj any) {
	p, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok || p.Status.ObservedGeneration != p.Generation {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.Status.CurrentHealthy >= p.Status.DesiredHealthy {
		w.budgetHealthy[p.Name] = true
		return
	}
	if !w.budgetHealthy[p.Name] {
		return // its pods are still starting
	}
	w.record(fmt.Sprintf("budget %s: currentHealthy %d < desiredHealthy %d (resourceVersion %s)", p.Name, p.Status.CurrentHealthy, p.Status.DesiredHealthy, p.ResourceVersion))
}

func (w *disruptionWatch) pod(obj any, gone bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if (gone || p.DeletionTimestamp != nil) && w.deleted[p.UID].IsZero() {
		w.deleted[p.UID] = time.Now()
	}
	if gone {
		delete(w.pods, p.UID)
	} else {
		w.pods[p.UID] = p
	}
	if !gone && servesTraffic(p) && w.readyAt[p.UID].IsZero() {
		w.readyAt[p.UID] = time.Now()
	}
	app := p.Labels["app"]
	healthy := 0
	for _, q := range w.pods {
		if q.Labels["app"] == app && servesTraffic(q) {
			healthy++
		}
	}
	if healthy < w.min[app] && w.seenHealthy[app] {
		var where []string
		for _, q := range w.pods {
			if q.Labels["app"] == app {
				where = append(where, fmt.Sprintf("%s on %s %s ready=%t deleting=%t", q.Name, q.Spec.NodeName, q.Status.Phase, podReady(q), q.DeletionTimestamp != nil))
			}
		}
		slices.Sort(where)
		w.record(fmt.Sprintf("app %s: %d healthy pods < minAvailable %d after pod %s changed: %s", app, healthy, w.min[app], p.Name, strings.Join(where, "; ")))
	}
	if healthy >= w.min[app] {
		w.seenHealthy[app] = true
	}
}

func (w *disruptionWatch) nodeSeen(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok || !node.Spec.Unschedulable {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if k := len(w.cordons); k == 0 || time.Since(w.cordons[k-1]) > time.Second {
		w.cordons = append(w.cordons, time.Now())
	}
}

// servesTraffic: the pod counts as healthy as the disruption controller
// and a Service's endpoints count it: Ready, not being deleted, not ended.
// Not its phase: a hollow kubelet was seen reporting a Ready pod Pending.
func servesTraffic(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && podReady(p) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// setMin sets app's minimum the pod count is held to.
func (w *disruptionWatch) setMin(app string, min int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.min[app] = min
}

// take forgets the cordons seen so far.
func (w *disruptionWatch) take() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cordons = nil
}

// cordonedAt returns when the real node was first seen unschedulable after
// since.
func (w *disruptionWatch) cordonedAt(since time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.cordons {
		if c.After(since) {
			return c, true
		}
	}
	return time.Time{}, false
}

// deletedAt returns when the pod was first seen deleted (or being deleted).
func (w *disruptionWatch) deletedAt(uid types.UID) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.deleted[uid]
	return at, ok
}

// serialized returns when the two pods of app in pods were seen deleted
// (earlier first) and when the first of app's other pods was seen healthy
// after the earlier deletion (zero: none).
func (w *disruptionWatch) serialized(app string, pods []types.UID) (first, second, replaced time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(pods) != 2 {
		return
	}
	first, second = w.deleted[pods[0]], w.deleted[pods[1]]
	if second.Before(first) {
		first, second = second, first
	}
	for uid, at := range w.readyAt {
		p := w.pods[uid]
		if slices.Contains(pods, uid) || at.Before(first) || p == nil || p.Labels["app"] != app {
			continue
		}
		if replaced.IsZero() || at.Before(replaced) {
			replaced = at
		}
	}
	return first, second, replaced
}

// takeViolations returns the moments below a minimum recorded since the
// last call.
func (w *disruptionWatch) takeViolations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.violations
	w.violations = nil
	return out
}
