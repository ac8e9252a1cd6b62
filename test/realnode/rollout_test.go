//go:build linux

package realnode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/controller"
	"github.com/dynconfig/dynconfig/test/cluster"
)

const rolloutLabel = "dynconfig.io/test-realnode-rollout"

// fleet is the real node plus hollow kubelets (bin/hollow-kubelet: the
// real kubelet code on dynconfig, a fake runtime), under the rollout
// controller (package rollout/controller, run in the test).
type fleet struct {
	n      *realNode
	hollow []string
	dyn    dynamic.Interface
}

func (n *realNode) startFleet(ctx context.Context, hollows int) *fleet {
	t := n.t
	t.Helper()
	if _, err := n.cl.ApplyManifests(ctx, filepath.Join("..", "..", "deploy", "rollout", "dynconfig.io_configrollouts.yaml")); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(n.cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{Client: n.cl.Client, Dynamic: dyn, StatusInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("rollout controller: %v", err)
		}
	})
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{n: n, dyn: dyn}
	for i := range hollows {
		dir := filepath.Join(n.dir, fmt.Sprintf("hollow-%d", i))
		name := fmt.Sprintf("%s-hollow-%d", n.name, i)
		nc, err := n.cl.NodeConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := cluster.KubeConfigFor(nc)
		if err != nil {
			t.Fatal(err)
		}
		n.write(filepath.Join(dir, "kubeconfig"), string(kc))
		n.write(filepath.Join(dir, "kubelet.conf.d", "10-status.conf"), "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
			"nodeStatusUpdateFrequency: 2s\nnodeStatusReportFrequency: 2s\n")
		proctest.StartLoop(t, filepath.Join(binDir, "hollow-kubelet"), []string{
			"--kubeconfig=" + filepath.Join(dir, "kubeconfig"), "--node-name=" + name,
			"--dynamic-config-dir=" + filepath.Join(dir, "state"), "--root-dir=" + filepath.Join(dir, "root"),
			"--config-dir=" + filepath.Join(dir, "kubelet.conf.d"), fmt.Sprintf("--port=%d", cluster.FreePort(t)),
		}, nil)
		f.hollow = append(f.hollow, name)
	}
	for _, name := range append([]string{n.name}, f.hollow...) {
		n.eventually("Node "+name+" registered", func() (bool, string) {
			patch := []byte(`{"metadata":{"labels":{"` + rolloutLabel + `":"yes"}}}`)
			_, err := n.cl.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err == nil, fmt.Sprint(err)
		})
		// A rollout skips a node whose kubelet has published no status
		// yet (it does not run dynconfig, as far as the rollout can tell).
		n.eventually("the kubelet of "+name+" publishing its config status", func() (bool, string) {
			node, err := n.cl.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			_, ok := node.Annotations[nodeapi.StatusAnnotation]
			return ok, fmt.Sprint(node.Annotations)
		})
	}
	return f
}

// rollout creates a ConfigRollout of cm over the fleet and waits for one of
// the phases.
func (f *fleet) rollout(ctx context.Context, cm *corev1.ConfigMap, steps []v1alpha1.RolloutStep, maxUnavailable int, want ...v1alpha1.RolloutPhase) *v1alpha1.ConfigRollout {
	f.n.t.Helper()
	return f.rolloutWith(ctx, cm, steps, maxUnavailable, nil, want...)
}

// rolloutWith is rollout with edit applied to the ConfigRollout first
// (nil: none).
func (f *fleet) rolloutWith(ctx context.Context, cm *corev1.ConfigMap, steps []v1alpha1.RolloutStep, maxUnavailable int,
	edit func(*v1alpha1.ConfigRollout), want ...v1alpha1.RolloutPhase) *v1alpha1.ConfigRollout {
	t := f.n.t
	t.Helper()
	r := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace},
		Spec: v1alpha1.ConfigRolloutSpec{
			Component: "kubelet", ConfigMapName: cm.Name,
			NodeSelector:            &metav1.LabelSelector{MatchLabels: map[string]string{rolloutLabel: "yes"}},
			Steps:                   steps,
			MaxUnavailable:          ptr.To(intstr.FromInt32(int32(maxUnavailable))),
			ProgressDeadlineSeconds: ptr.To[int32](120),
		},
	}
	if edit != nil {
		edit(r)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	res := f.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(cm.Namespace)
	if _, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.ConfigRollout
	f.n.eventually(fmt.Sprintf("rollout %s in phase %v", r.Name, want), func() (bool, string) {
		u, err := res.Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = v1alpha1.ConfigRollout{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
			return false, err.Error()
		}
		for _, p := range want {
			if got.Status.Phase == p {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s: %s (promoted %d, failed %d)", got.Status.Phase, got.Status.Message, got.Status.Promoted, got.Status.Failed)
	})
	return &got
}

func (f *fleet) capacity(ctx context.Context, name string) int64 {
	node, err := f.n.cl.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.n.t.Fatal(err)
	}
	return node.Status.Capacity.Pods().Value()
}

// rollouts: a ConfigRollout over the real node and the hollow kubelets
// completes; one whose config the real kubelet refuses halts, and the
// real node is put back on the config it had, running again.
func (n *realNode) rollouts(ctx context.Context) {
	t := n.t
	f := n.startFleet(ctx, 2)
	t0 := time.Now()
	good := n.configMap("rollout-60", "maxPods: 60\n", "5s", threshold)
	r := f.rollout(ctx, good, []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromInt32(1))}, {Nodes: ptr.To(intstr.FromString("100%"))}}, 2, v1alpha1.PhaseCompleted)
	if r.Status.Promoted != 3 {
		t.Fatalf("rollout %s completed with %d nodes promoted, want 3", good.Name, r.Status.Promoted)
	}
	for _, name := range append([]string{n.name}, f.hollow...) {
		n.eventually("capacity 60 on "+name, func() (bool, string) {
			c := f.capacity(ctx, name)
			return c == 60, fmt.Sprint(c)
		})
	}
	t.Logf("rollout %s: completed over the real node and %d hollow kubelets in %v", good.Name, len(f.hollow), time.Since(t0).Round(time.Millisecond))

	t1 := time.Now()
	before := len(n.sup.startsSoFar())
	bad := n.configMap("rollout-bad", "maxPods: 70\n"+refusedConfig, "5s", threshold)
	r = f.rollout(ctx, bad, []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromString("100%"))}}, 3, v1alpha1.PhaseHalted, v1alpha1.PhaseReverted)
	if r.Status.Failed < 1 {
		t.Fatalf("rollout %s halted with no failed node: %+v", bad.Name, r.Status)
	}
	n.eventually("the real node's assignment reverted", func() (bool, string) {
		node, err := n.node()
		if err != nil {
			return false, err.Error()
		}
		a := node.Annotations["dynconfig.io/config-source"]
		return strings.Contains(a, string(good.UID)), a
	})
	n.eventually("the real node Ready on the reverted config", n.ready(60, time.Now()))
	n.eventually("ConfigOK True on the reverted config", n.configOK(corev1.ConditionTrue, string(good.UID), ""))
	st := n.sup.startsSoFar()[before:]
	if len(st) != threshold+2 || !strings.Contains(st[len(st)-1].dropIn, string(good.UID)) {
		t.Fatalf("rollout %s: %d kubelet starts, want %d (threshold+1 on it, then last-known-good)\n%s", bad.Name, len(st), threshold+2, n.more())
	}
	t.Logf("rollout %s: halted, real node reverted and Ready in %v", bad.Name, time.Since(t1).Round(time.Millisecond))
}
