package kubeletdropin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// drainWorld is a Node n1 with pods on it, in a fake API server that
// answers like the real one on the kubelet's credentials where the drain
// depends on it: a get of a pod no longer bound to the node is Forbidden
// (the Node authorizer), and an eviction either deletes the pod or is
// refused with 429 and the PodDisruptionBudget's cause.
type drainWorld struct {
	t      *testing.T
	client *fake.Clientset
	// refuse makes every eviction answer 429.
	refuse bool
}

func owned(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
}

func newDrainWorld(t *testing.T, unschedulable bool) *drainWorld {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
	pod := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		mutate(p)
		return p
	}
	objs := []runtime.Object{
		node,
		pod("web-0", func(p *corev1.Pod) { p.OwnerReferences = owned("ReplicaSet", "web") }),
		pod("cache-0", func(p *corev1.Pod) {
			p.OwnerReferences = owned("ReplicaSet", "cache")
			p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}),
		pod("agent-0", func(p *corev1.Pod) { p.OwnerReferences = owned("DaemonSet", "agent") }),
		pod("static-n1", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "agent"}},
	}
	w := &drainWorld{t: t, client: fake.NewClientset(objs...)}
	w.client.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"},
	}}}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	w.client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		g := a.(k8stesting.GetAction)
		if _, err := w.client.Tracker().Get(pods, g.GetNamespace(), g.GetName()); apierrors.IsNotFound(err) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), g.GetName(),
				errNoRelationship)
		}
		return false, nil, nil
	})
	w.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		if w.refuse {
			err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 1 healthy pods and has 1 currently"}}
			return true, nil, err
		}
		return true, nil, w.client.Tracker().Delete(pods, ev.Namespace, ev.Name)
	})
	return w
}

var errNoRelationship = apierrorsNoRelationship{}

type apierrorsNoRelationship struct{}

func (apierrorsNoRelationship) Error() string {
	return "no relationship found between node 'n1' and this object"
}

func (w *drainWorld) node() *corev1.Node {
	w.t.Helper()
	n, err := w.client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *drainWorld) pods() []string {
	w.t.Helper()
	l, err := w.client.CoreV1().Pods("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, p := range l.Items {
		out = append(out, p.Name)
	}
	return out
}

func (w *drainWorld) drainer(s *stateNode, timeout time.Duration) *drainer {
	d := newDrainer(RunOptions{Common: s.c, Client: w.client, NodeName: "n1", Drain: DrainOptions{Timeout: timeout, EvictRetryDelay: 10 * time.Millisecond}})
	return d
}

// A none -> static change of cpuManagerPolicy: the run role cordons the
// Node (with the annotation that says dynconfig did), evicts the pods that
// kubectl drain --ignore-daemonsets --delete-emptydir-data evicts (not the
// DaemonSet's, not the mirror pod), and marks the node drained for the
// pre-start role; Settled uncordons it and clears the mark. A Restart
// change drains nothing.
func TestBeforeRestartDrains(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := newStateNode(t)
	s.prestart(ctx) // records the config the state files are made for
	w := newDrainWorld(t, false)
	d := w.drainer(s, 10*time.Second)

	if err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: chosen(head + "maxPods: 20\n")}); err != nil {
		t.Fatalf("a Restart change: %v", err)
	}
	if n := w.node(); n.Spec.Unschedulable || len(w.pods()) != 4 {
		t.Fatalf("a Restart change cordoned (%v) or evicted (pods %v)", n.Spec.Unschedulable, w.pods())
	}

	if err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: chosen(head + staticPayload)}); err != nil {
		t.Fatalf("a Drain change: %v", err)
	}
	n := w.node()
	if _, ours := n.Annotations[nodeapi.CordonAnnotation]; !n.Spec.Unschedulable || !ours {
		t.Fatalf("Node unschedulable %v, annotations %v: want cordoned by dynconfig", n.Spec.Unschedulable, n.Annotations)
	}
	if got := strings.Join(w.pods(), ","); got != "agent-0,static-n1" {
		t.Fatalf("pods left %s, want the DaemonSet's and the mirror pod", got)
	}
	if m, err := Drained(s.root); err != nil || m == nil || !strings.Contains(m.Config, "ns/c") {
		t.Fatalf("drained mark %+v, %v", m, err)
	}

	if err := d.Settled(ctx); err != nil {
		t.Fatal(err)
	}
	n = w.node()
	if _, ours := n.Annotations[nodeapi.CordonAnnotation]; n.Spec.Unschedulable || ours {
		t.Fatalf("after Settled: unschedulable %v, annotations %v; want uncordoned", n.Spec.Unschedulable, n.Annotations)
	}
	if m, err := Drained(s.root); err != nil || m != nil {
		t.Fatalf("drained mark %+v, %v after the uncordon, want none", m, err)
	}
}

// A drain that a PodDisruptionBudget blocks past the drain timeout: the
// config is not applied (an error that names the pod and the budget's
// message), the Node is uncordoned, and the node is not marked drained. A
// Node an administrator cordoned stays cordoned, then and after Settled.
func TestBeforeRestartDrainTimesOut(t *testing.T) {
	for _, adminCordoned := range []bool{false, true} {
		t.Run(map[bool]string{false: "schedulable", true: "cordoned by an admin"}[adminCordoned], func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s := newStateNode(t)
			s.prestart(ctx)
			w := newDrainWorld(t, adminCordoned)
			w.refuse = true
			d := w.drainer(s, 300*time.Millisecond)
			err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: chosen(head + staticPayload)})
			if err == nil {
				t.Fatal("no error from a drain that cannot finish")
			}
			for _, want := range []string{"pod shop/web-0", "The disruption budget web needs 1 healthy pods", "drain timeout 300ms", "2 of 2 pods still on the node"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			var ce *lkg.ConfigError
			if errorsAs(err, &ce) {
				t.Errorf("error %v is a ConfigError: a drain that times out is no verdict on the config", err)
			}
			n := w.node()
			if _, ours := n.Annotations[nodeapi.CordonAnnotation]; n.Spec.Unschedulable != adminCordoned || ours {
				t.Fatalf("unschedulable %v, annotations %v; want it as it was (%v), no dynconfig annotation", n.Spec.Unschedulable, n.Annotations, adminCordoned)
			}
			if m, err := Drained(s.root); err != nil || m != nil {
				t.Fatalf("drained mark %+v, %v; want none", m, err)
			}
			if err := d.Settled(ctx); err != nil || w.node().Spec.Unschedulable != adminCordoned {
				t.Fatalf("Settled: %v; unschedulable %v, want %v", err, w.node().Spec.Unschedulable, adminCordoned)
			}
		})
	}
}

// A rollback onto a config whose change needs a drain, while dynconfig
// still keeps the Node cordoned: no second drain (nothing was scheduled
// there since), the node is marked drained again.
func TestBeforeRestartRollbackWhileCordoned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := newStateNode(t)
	s.prestart(ctx)
	w := newDrainWorld(t, false)
	d := w.drainer(s, 10*time.Second)
	if err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: chosen(head + staticPayload)}); err != nil {
		t.Fatal(err)
	}
	if err := ClearDrained(s.root); err != nil {
		t.Fatal(err)
	}
	w.refuse = true // a drain now would fail
	if err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: chosen(head + staticPayload), Rollback: true}); err != nil {
		t.Fatalf("rollback while cordoned: %v", err)
	}
	if m, err := Drained(s.root); err != nil || m == nil {
		t.Fatalf("drained mark %+v, %v; want one", m, err)
	}
}

// A Refuse change (systemCgroups) is refused without a restart, as a
// validation failure naming the field; a rollback is never refused.
func TestBeforeRestartRefuses(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := newStateNode(t)
	s.prestart(ctx)
	w := newDrainWorld(t, false)
	d := w.drainer(s, time.Second)
	to := chosen(head + "systemCgroups: /system.slice\ncgroupRoot: /\n")
	err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: to})
	var ce *lkg.ConfigError
	if !errorsAs(err, &ce) || ce.Stage != lkg.StageValidate || !strings.Contains(err.Error(), "systemCgroups") {
		t.Fatalf("BeforeRestart = %v, want a validation ConfigError naming systemCgroups", err)
	}
	if err := d.BeforeRestart(ctx, dynconfig.RestartPlan{To: to, Rollback: true}); err != nil {
		t.Fatalf("a rollback refused: %v", err)
	}
	if w.node().Spec.Unschedulable {
		t.Fatal("a refused config cordoned the Node")
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
