//go:build linux

package integration

import (
	"context"
	"fmt"
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
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// TestRolloutKeepsPodDisruptionBudgets runs the upstream control plane
// (cluster.Options.ControlPlane: the disruption controller of
// kube-controller-manager computes the budget's status, the scheduler
// places the pods) and two hollow kubelets (the kubelet's code on
// dynconfig, under a restart loop), a Deployment of two replicas, one on
// each node (required pod anti-affinity on the hostname), with an exec
// readiness probe (5 s initial delay), and a PodDisruptionBudget
// minAvailable 1. A watcher records every status of the budget, as the
// disruption controller writes it, whose currentHealthy is below its
// desiredHealthy.
//
// What makes a restart a disruption here: the hollow kubelet's CRI runtime
// is a fake that lives in its process, so a restarted hollow kubelet finds
// no container and starts the pods' containers again; each pod is not
// Ready until its new container runs and passes its readiness probe. That
// is harsher than the readiness reset of KEP-4781 on a real kubelet (the
// containers do restart here), and it is what this test measures.
//
//  1. A rollout over both nodes with maxUnavailable 2, budgets respected
//     (the default): it completes, one node at a time, and the budget is
//     never below its minimum.
//  2. The same kind of rollout (a new config) with
//     spec.podDisruptionBudgets Ignore: both nodes restart at once and the
//     watcher sees the budget below its minimum.
func TestRolloutKeepsPodDisruptionBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("the full control plane and two hollow kubelets: skipped with -short")
	}
	ctx := testContext(t, 12*time.Minute)
	cl := cluster.StartWithOptions(t, cluster.Options{ControlPlane: true})
	h := &harness{cl: cl, client: newClient(t, cl.Config, 200, 400)}
	installRolloutCRD(ctx, t, h)
	// The watches and the readiness resets end before the cluster stops
	// (cleanups run last first): the API server waits for open watches.
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	f := &fleet{t: t, h: h, dyn: dynamic.NewForConfigOrDie(cl.Config), label: "pdb-e2e", prefix: "pdb-e2e"}
	var hollows []*hollowRun
	for i := range 2 {
		r := startHollowKubelet(ctx, t, h, fmt.Sprintf("pdb-e2e-%d", i))
		hollows = append(hollows, r)
		node := r.nodeName
		if _, err := h.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, f.label), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		f.names = append(f.names, node)
	}

	name := "web"
	app := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: app}, TopologyKey: corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{{
						Name: "c", Image: "registry.k8s.io/pause:3.10",
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
							InitialDelaySeconds: 5, PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	if _, err := h.client.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: app}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, controlPlaneWait, "both replicas Ready and the budget allowing 1", func(ctx context.Context) (bool, string) {
		p, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status
		return st.ObservedGeneration == p.Generation && st.ExpectedPods == 2 && st.CurrentHealthy == 2 && st.DisruptionsAllowed == 1,
			fmt.Sprintf("%+v", st)
	}, nil)

	w := watchBudget(ctx, t, h, name)
	pods := watchNotReady(ctx, t, h, app)
	for _, r := range hollows {
		go resetReadinessOnRestart(ctx, t, h, r, app)
	}
	startRolloutController(ctx, t, h, "pdb-e2e", nil)
	gate := "featureGates:\n  ChangeContainerStatusOnKubeletRestart: true\n"
	run := func(step string, maxPods int, policy v1alpha1.DisruptionBudgetPolicy) (violations, notReady []string) {
		cm := h.createTrialConfigMap(ctx, t, objectName(t, step), kubeletPayload(maxPods)+gate, "10s", 3)
		ro := f.rolloutOf(step, cm.Name, func(s *v1alpha1.ConfigRolloutSpec) {
			s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromString("100%"))}
			s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			s.ProgressDeadlineSeconds = ptr.To(int32(180))
			s.PodDisruptionBudgets = policy
		})
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		logHistory(t, got)
		// Both replicas Ready again before the next step.
		waitFor(ctx, t, controlPlaneWait, "both replicas Ready after "+step, func(ctx context.Context) (bool, string) {
			p, err := h.client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.CurrentHealthy == 2, fmt.Sprintf("%+v", p.Status)
		}, nil)
		return w.take(), pods.take()
	}

	respected, down := run("respect", 111, "")
	t.Logf("budgets respected: pods seen not Ready: %s", strings.Join(down, "; "))
	if len(down) < 2 {
		t.Errorf("budgets respected: %d pod statuses not Ready, want each node's pod reset by its restart", len(down))
	}
	if len(respected) > 0 {
		t.Errorf("budgets respected: the budget fell below its minimum %d times: %s", len(respected), strings.Join(respected, "; "))
	}
	ignored, down := run("ignore", 112, v1alpha1.DisruptionBudgetsIgnore)
	t.Logf("budgets ignored: pods seen not Ready: %s", strings.Join(down, "; "))
	if len(ignored) == 0 {
		t.Errorf("budgets ignored: the budget never fell below its minimum, so this test cannot tell the rule from its absence")
	}
	t.Logf("budgets respected: %d moments below the minimum; ignored: %d (%s)", len(respected), len(ignored), strings.Join(ignored, "; "))
}

// recorder keeps what a watch saw, one line per moment of interest.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

// watchRecord runs an informer until ctx ends and records, for each object
// added or updated, what note says of it ("": nothing).
func watchRecord(ctx context.Context, t *testing.T, lw cache.ListerWatcher, objType runtime.Object, note func(obj any) string) *recorder {
	t.Helper()
	w := &recorder{}
	check := func(obj any) {
		if line := note(obj); line != "" {
			w.mu.Lock()
			w.lines = append(w.lines, time.Now().Format("15:04:05.000")+": "+line)
			w.mu.Unlock()
		}
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: objType,
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) }},
	})
	go ctrl.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
		t.Fatalf("the watch of %T did not sync", objType)
	}
	return w
}

// take returns the lines recorded since the last take.
func (w *recorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.lines
	w.lines = nil
	return out
}

// watchBudget records every status of a PodDisruptionBudget, as the
// disruption controller writes it, whose currentHealthy is below its
// desiredHealthy.
func watchBudget(ctx context.Context, t *testing.T, h *harness, name string) *recorder {
	t.Helper()
	lw := cache.NewListWatchFromClient(h.client.PolicyV1().RESTClient(), "poddisruptionbudgets", namespace, fields.OneTermEqualSelector("metadata.name", name))
	return watchRecord(ctx, t, lw, &policyv1.PodDisruptionBudget{}, func(obj any) string {
		p, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok || p.Status.ObservedGeneration != p.Generation || p.Status.CurrentHealthy >= p.Status.DesiredHealthy {
			return ""
		}
		return fmt.Sprintf("currentHealthy %d < desiredHealthy %d (resourceVersion %s)", p.Status.CurrentHealthy, p.Status.DesiredHealthy, p.ResourceVersion)
	})
}

// watchNotReady records every pod status of the app, as the kubelets (and
// resetReadinessOnRestart) write them, that is not Ready.
func watchNotReady(ctx context.Context, t *testing.T, h *harness, app map[string]string) *recorder {
	t.Helper()
	lw := cache.NewFilteredListWatchFromClient(h.client.CoreV1().RESTClient(), "pods", namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: app})
	})
	return watchRecord(ctx, t, lw, &corev1.Pod{}, func(obj any) string {
		p, ok := obj.(*corev1.Pod)
		if !ok || podIsReady(p) || p.Status.Phase != corev1.PodRunning {
			return ""
		}
		return fmt.Sprintf("%s on %s Running, not Ready", p.Name, p.Spec.NodeName)
	})
}

// resetReadinessOnRestart plays the part of KEP-4781 that the hollow
// kubelet does not: each time the node's kubelet process restarts (a new
// process in its restart loop), the test writes Ready False on the app's
// pods on the node, as a kubelet before v1.35 (or v1.37 with
// ChangeContainerStatusOnKubeletRestart) does when it starts; the
// restarted kubelet writes its own status back (its status manager
// reconciles what differs from what it knows), which ends the window.
func resetReadinessOnRestart(ctx context.Context, t *testing.T, h *harness, r *hollowRun, app map[string]string) {
	seen := len(r.loop.All())
	for ctx.Err() == nil {
		time.Sleep(pollInterval)
		n := len(r.loop.All())
		if n == seen {
			continue
		}
		seen = n
		list, err := h.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: app}),
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", r.nodeName).String(),
		})
		if err != nil {
			continue
		}
		for i := range list.Items {
			p := &list.Items[i]
			for j := range p.Status.Conditions {
				if c := &p.Status.Conditions[j]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
					c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.Now()
				}
			}
			if _, err := h.client.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
				t.Logf("resetting the readiness of pod %s on %s: %v", p.Name, r.nodeName, err)
			}
		}
	}
}
