//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/statusfile"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// kubeProxyLikePackage is the kube-proxy-like example (component
// "kube-proxy": condition KubeProxyConfigOK).
const kubeProxyLikePackage = "github.com/dynconfig/dynconfig/examples/kube-proxy-like"

// component is one example binary under its restart loop on the Node.
type component struct {
	h          *lpHarness
	name       string // nodeapi.ConditionTypeFor(name) is its condition
	loop       *proctest.RestartLoop
	statusPath string
	// assign points the component at a new ConfigMap with data and a 2s
	// trial, and returns it.
	assign func(ctx context.Context, t *testing.T, data map[string]string) *corev1.ConfigMap
}

// startComponent writes the identity's kubeconfig and starts bin under a
// restart loop (Restart=always) on the harness's Node.
func (h *lpHarness) startComponent(t *testing.T, name, bin string, id identity) *component {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kc, err := cluster.KubeConfigFor(id.config)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &component{h: h, name: name, statusPath: filepath.Join(dir, "status.json")}
	c.loop = proctest.StartLoop(t, bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--node-name=" + h.node,
		"--dynamic-config-dir=" + filepath.Join(dir, "state"),
		"--port=0",
		"--status-file=" + c.statusPath,
	}, nil)
	return c
}

// describe lists the processes, for failure messages.
func (c *component) describe() string {
	return c.name + ":\n" + proctest.DescribeProcs(c.loop.All())
}

// conditionOf returns the component's condition on node.
func (c *component) conditionOf(node *corev1.Node) *corev1.NodeCondition {
	return status.FindType(node.Status.Conditions, nodeapi.ConditionTypeFor(c.name))
}

// waitServing waits until the Node's condition of the component is want,
// its status file says the same, and the last process started wrote it
// and serves. It returns that process.
func (c *component) waitServing(ctx context.Context, t *testing.T, what string, want status.Report) *proctest.Proc {
	t.Helper()
	var serving *proctest.Proc
	pollUntil(t, c.name+": "+what, func() (bool, string) {
		if err := c.loop.Failure(); err != nil {
			t.Fatalf("%s restart loop: %v", c.name, err)
		}
		cond := c.conditionOf(c.h.getNode(ctx, t))
		if cond == nil || (status.Report{Status: cond.Status, Reason: cond.Reason, Message: cond.Message}) != want {
			return false, fmt.Sprintf("Node condition %+v", cond)
		}
		f, ok, err := statusfile.Read(c.statusPath)
		if err != nil || !ok {
			return false, fmt.Sprintf("status file: present %t, err %v", ok, err)
		}
		if (status.Report{Status: f.Status, Reason: f.Reason, Message: f.Message}) != want {
			return false, fmt.Sprintf("status file %+v", f)
		}
		procs := c.loop.All()
		last := procs[len(procs)-1]
		if last.PID() != f.PID || last.Exited() || last.ServingAddr() == "" {
			return false, fmt.Sprintf("status file pid %d; last process pid %d, exited %t, serving on %q",
				f.PID, last.PID(), last.Exited(), last.ServingAddr())
		}
		serving = last
		return true, ""
	}, c.describe)
	return serving
}

// sameSource reports whether src names cm at its resourceVersion.
func sameSource(src *corev1.NodeConfigSource, cm *corev1.ConfigMap) bool {
	return src != nil && src.ConfigMap != nil && src.ConfigMap.UID == cm.UID && src.ConfigMap.ResourceVersion == cm.ResourceVersion
}

// waitStatus waits until the component's ConfigStatus annotation has
// phase, assigned, active and last-known-good as given (nil: local).
func (c *component) waitStatus(ctx context.Context, t *testing.T, phase nodeapi.ConfigPhase, assigned, active, lkg *corev1.ConfigMap) *nodeapi.ConfigStatus {
	t.Helper()
	var got *nodeapi.ConfigStatus
	match := func(src *corev1.NodeConfigSource, cm *corev1.ConfigMap) bool {
		if cm == nil {
			return src == nil
		}
		return sameSource(src, cm)
	}
	pollUntil(t, fmt.Sprintf("%s: ConfigStatus phase %s", c.name, phase), func() (bool, string) {
		var err error
		got, err = nodeapi.ReadConfigStatus(c.h.getNode(ctx, t), c.name)
		if err != nil || got == nil {
			return false, fmt.Sprintf("annotation %s: %+v, %v", nodeapi.StatusAnnotationFor(c.name), got, err)
		}
		return got.Phase == phase && match(got.Assigned, assigned) && match(got.Active, active) && match(got.LastKnownGood, lkg),
			mustJSON(got)
	}, c.describe)
	return got
}

// nodeAssigner assigns configs through the Node annotation of component:
// a new ConfigMap per config, as a rollout does.
func (h *lpHarness) nodeAssigner(component, prefix string) func(context.Context, *testing.T, map[string]string) *corev1.ConfigMap {
	n := 0
	return func(ctx context.Context, t *testing.T, data map[string]string) *corev1.ConfigMap {
		t.Helper()
		n++
		cm, err := h.admin.CoreV1().ConfigMaps(configNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, n), Namespace: configNamespace,
				Annotations: map[string]string{components.TrialDurationAnnotation: "2s"}},
			Data: data,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating ConfigMap %s-%d: %v", prefix, n, err)
		}
		h.operatorAssign(ctx, t, component, cm)
		return cm
	}
}

// requireNodeAssignment reads kube-proxy-like's flags and fails the test
// unless it follows its Node's dynconfig.io/config-source.kube-proxy
// annotation when given --kubeconfig alone (before package app it only
// ran a fixed --configmap, which cannot give one Node its own config).
func requireNodeAssignment(t *testing.T, bin string) {
	t.Helper()
	code, stdout, stderr := proctest.RunToExit(t, bin, "--help")
	if code != 0 {
		t.Fatalf("kube-proxy-like --help: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, nodeapi.AssignmentAnnotationFor(proxyComponent)) {
		t.Fatalf("kube-proxy-like --help does not mention %s: it cannot take its own assignment from the Node\n%s",
			nodeapi.AssignmentAnnotationFor(proxyComponent), stdout)
	}
}

// brokenYAML is a payload neither component can decode.
const brokenYAML = "this is: [not yaml\n"

// TestComponentsShareANode runs the kubelet-like binary (on the Node's
// client certificate) and the kube-proxy-like binary (on its
// ServiceAccount's token) as real processes on one Node of an API server
// with Node,RBAC authorization and deploy/ applied. Each gets its own
// ConfigMap; each ConfigMap also carries, under the other component's
// key, a payload the other could not decode, so a component that read the
// other's key would fail. A bad config for one rolls that one back alone:
// the other keeps its process, its config, its condition (not even a new
// transition) and its ConfigStatus, and both conditions and both
// ConfigStatus annotations stay on the Node through every report.
func TestComponentsShareANode(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes against the API server: skipped with -short")
	}
	bins := map[string]string{kubeletLikePackage: kubeletLikeBin.Build(t), kubeProxyLikePackage: kubeProxyLikeBin.Build(t)}
	ctx := testContext(t, 10*time.Minute)
	h := newLPHarness(ctx, t)

	kl := h.startComponent(t, nodeapi.DefaultComponent, bins[kubeletLikePackage], h.kubelet)
	kl.assign = h.nodeAssigner(nodeapi.DefaultComponent, "kubelet")
	requireNodeAssignment(t, bins[kubeProxyLikePackage])
	kp := h.startComponent(t, proxyComponent, bins[kubeProxyLikePackage], h.proxy)
	kp.assign = h.nodeAssigner(proxyComponent, "kube-proxy")
	kubeletKey, proxyKey := kubelet.PayloadKey, kubeproxy.Profile{}.PayloadKey()

	// 1. A good config each, with the other's key holding a payload the
	// other cannot decode; both run and are promoted.
	kGood := kl.assign(ctx, t, map[string]string{kubeletKey: kubeletPayload(42), proxyKey: brokenYAML})
	pGood := kp.assign(ctx, t, map[string]string{proxyKey: kubeProxyPayload("10.1.0.0/16"), kubeletKey: brokenYAML})
	kl.waitServing(ctx, t, "the good kubelet config", currentReport(kGood))
	proxyProc := kp.waitServing(ctx, t, "the good kube-proxy config", currentReport(pGood))
	kl.waitStatus(ctx, t, nodeapi.PhasePromoted, kGood, kGood, kGood)
	kp.waitStatus(ctx, t, nodeapi.PhasePromoted, pGood, pGood, pGood)
	if got := wantClusterCIDR(t, proxyProc.ServingAddr()); got != "10.1.0.0/16" {
		t.Errorf("kube-proxy-like /configz clusterCIDR %q, want 10.1.0.0/16", got)
	}

	// 2. A bad kubelet config: the kubelet-like restarts onto it and rolls
	// back to its last-known-good; kube-proxy-like is untouched.
	proxyCond := kp.conditionOf(h.getNode(ctx, t))
	kBad := kl.assign(ctx, t, map[string]string{kubeletKey: kubeletPayload(42) + "maxPods: 43\n"})
	kl.waitServing(ctx, t, "the kubelet rollback", status.Report{Status: corev1.ConditionFalse,
		Reason: status.DecodeFailedReason(kBad.UID), Message: status.LastKnownGoodMessage(status.Ref{UID: kGood.UID}, status.LocalDefault)})
	kl.waitStatus(ctx, t, nodeapi.PhaseRolledBack, kBad, kGood, kGood)
	h.wantUntouched(ctx, t, kp, proxyCond, proxyProc)
	kp.waitStatus(ctx, t, nodeapi.PhasePromoted, pGood, pGood, pGood)

	// 3. A bad kube-proxy config: kube-proxy-like rolls back in process;
	// the kubelet-like keeps its rollback.
	kubeletCond := kl.conditionOf(h.getNode(ctx, t))
	kubeletProcs := len(kl.loop.All())
	pBad := kp.assign(ctx, t, map[string]string{proxyKey: kubeProxyPayload("10.1.0.0/16") + "clusterCIDR: 10.9.0.0/16\n"})
	kp.waitServing(ctx, t, "the kube-proxy rollback", status.Report{Status: corev1.ConditionFalse,
		Reason: status.DecodeFailedReason(pBad.UID), Message: status.LastKnownGoodMessage(status.Ref{UID: pGood.UID}, status.LocalDefault)})
	kp.waitStatus(ctx, t, nodeapi.PhaseRolledBack, pBad, pGood, pGood)
	if got := wantClusterCIDR(t, proxyProc.ServingAddr()); got != "10.1.0.0/16" {
		t.Errorf("kube-proxy-like /configz clusterCIDR after its rollback %q, want the good 10.1.0.0/16", got)
	}
	kubeletProc := kl.loop.All()[kubeletProcs-1]
	h.wantUntouched(ctx, t, kl, kubeletCond, kubeletProc)
	kl.waitStatus(ctx, t, nodeapi.PhaseRolledBack, kBad, kGood, kGood)

	// 4. Both recover with new good configs; both conditions and both
	// ConfigStatus annotations are on the Node.
	kGood2 := kl.assign(ctx, t, map[string]string{kubeletKey: kubeletPayload(44)})
	pGood2 := kp.assign(ctx, t, map[string]string{proxyKey: kubeProxyPayload("10.2.0.0/16")})
	kl.waitServing(ctx, t, "the second good kubelet config", currentReport(kGood2))
	kp.waitServing(ctx, t, "the second good kube-proxy config", currentReport(pGood2))
	kl.waitStatus(ctx, t, nodeapi.PhasePromoted, kGood2, kGood2, kGood2)
	kp.waitStatus(ctx, t, nodeapi.PhasePromoted, pGood2, pGood2, pGood2)
	node := h.getNode(ctx, t)
	var condTypes []corev1.NodeConditionType
	for _, c := range node.Status.Conditions {
		condTypes = append(condTypes, c.Type)
	}
	if diff := cmp.Diff([]corev1.NodeConditionType{nodeapi.ConditionTypeFor(nodeapi.DefaultComponent), nodeapi.ConditionTypeFor(proxyComponent)}, condTypes,
		cmpSortTypes); diff != "" {
		t.Errorf("Node conditions after every report (-want +got):\n%s", diff)
	}

	// kube-proxy-like applied every config in its one process; the
	// kubelet-like restarted onto each new config.
	if got := proctest.ExitCodes(kp.loop.All()); !cmp.Equal(got, []string{"running"}) {
		t.Errorf("kube-proxy-like processes %v, want one, still running\n%s", got, kp.describe())
	}
	t.Logf("kubelet-like processes: %v", proctest.ExitCodes(kl.loop.All()))
}

// cmpSortTypes compares condition types as a set.
var cmpSortTypes = cmp.Transformer("sort", func(in []corev1.NodeConditionType) map[corev1.NodeConditionType]int {
	out := map[corev1.NodeConditionType]int{}
	for _, t := range in {
		out[t]++
	}
	return out
})

// wantUntouched checks that c's condition is still before (same status,
// reason, message and transition time: no report changed it) and that
// proc, the process that serves it, still runs.
func (h *lpHarness) wantUntouched(ctx context.Context, t *testing.T, c *component, before *corev1.NodeCondition, proc *proctest.Proc) {
	t.Helper()
	got := c.conditionOf(h.getNode(ctx, t))
	if got == nil || before == nil {
		t.Fatalf("%s condition before %+v, now %+v: want it kept", c.name, before, got)
	}
	if got.Status != before.Status || got.Reason != before.Reason || got.Message != before.Message ||
		!got.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("%s condition changed by the other component's config (-before +now):\n%s", c.name, cmp.Diff(before, got))
	}
	if procs := c.loop.All(); proc.Exited() || procs[len(procs)-1] != proc {
		t.Errorf("%s process %d exited or was replaced while the other component changed config\n%s", c.name, proc.PID(), c.describe())
	}
}

// wantClusterCIDR returns clusterCIDR from kube-proxy-like's /configz.
func wantClusterCIDR(t *testing.T, addr string) string {
	t.Helper()
	z, err := proctest.GetConfigz[struct {
		Config *kubeproxyv1alpha1.KubeProxyConfiguration `json:"kubeproxy.config.k8s.io"`
	}](addr)
	if err != nil || z.Config == nil {
		t.Fatalf("kube-proxy-like /configz at %s: %+v, %v", addr, z, err)
	}
	return z.Config.ClusterCIDR
}
