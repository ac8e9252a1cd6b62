package integration

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// TestCtlStatus runs the real dynconfigctl against a real API server: it
// assigns with assign, the components' status is written by the real
// NodeReporter (condition and ConfigStatus in one PATCH of nodes/status),
// and status shows the fleet as a table, with a label selector and -o wide;
// an undecodable status annotation is shown and named (exit 1); render
// --node renders what the node's assignment names.
func TestCtlStatus(t *testing.T) {
	c := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := dynconfigctlBin.Build(t)
	kubeconfig := writeKubeConfig(t, c.Config)

	const ns = "kube-system"
	mkCM := func(name, key, payload string) *corev1.ConfigMap {
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{key: payload}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	kcm := mkCM("kubelet-a", "kubelet", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 77\n")
	pcm := mkCM("proxy-p", "config.conf", kubeProxyPayload("10.9.0.0/16"))
	for _, n := range []struct{ name, pool string }{{"node-a", "blue"}, {"node-b", "blue"}, {"node-c", "green"}} {
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.name, Labels: map[string]string{"pool": n.pool}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctl := func(args ...string) string {
		t.Helper()
		return runCtl(t, bin, append(args, "--kubeconfig="+kubeconfig)...)
	}
	ctl("assign", "--node=node-a", "--configmap="+ns+"/kubelet-a")
	ctl("assign", "--node=node-b", "--configmap=kubelet-a", "--namespace="+ns)
	ctl("assign", "--node=node-a", "--configmap="+ns+"/proxy-p", "--component=kube-proxy")

	// The components report: the kubelet of node-a runs kubelet-a and
	// promoted it; its kube-proxy is in its trial. node-b reports nothing.
	srcOf := func(cm *corev1.ConfigMap, key string) *corev1.NodeConfigSource {
		return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: key}}
	}
	trialEnds := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, r := range []struct {
		component string
		cs        nodeapi.ConfigStatus
	}{
		{nodeapi.DefaultComponent, nodeapi.ConfigStatus{Assigned: srcOf(kcm, "kubelet"), Active: srcOf(kcm, "kubelet"), LastKnownGood: srcOf(kcm, "kubelet"), Phase: nodeapi.PhasePromoted}},
		{"kube-proxy", nodeapi.ConfigStatus{Assigned: srcOf(pcm, "config.conf"), Active: srcOf(pcm, "config.conf"), Phase: nodeapi.PhaseTrial, TrialEnds: &trialEnds}},
	} {
		rep, err := status.NewNodeReporter(status.NodeReporterOptions{Client: c.Client, NodeName: "node-a", Component: r.component})
		if err != nil {
			t.Fatal(err)
		}
		cs := r.cs
		if err := rep.ReportConfigOK(ctx, status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed, Config: &cs}); err != nil {
			t.Fatal(err)
		}
	}

	got := ctl("status", "--selector=pool=blue")
	want := `NODE     COMPONENT    ASSIGNED                ACTIVE                  LKG                     CONDITION                PHASE
node-a   kubelet      kube-system/kubelet-a   kube-system/kubelet-a   kube-system/kubelet-a   ConfigOK=True            Promoted
node-a   kube-proxy   kube-system/proxy-p     kube-system/proxy-p     local                   KubeProxyConfigOK=True   Trial
node-b   kubelet      kube-system/kubelet-a   <none>                  <none>                  <none>                   <none>
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status --selector=pool=blue (-want +got):\n%s", diff)
	}
	wide := ctl("status", "node-a", "-o", "wide", "--component", "kube-proxy")
	for _, s := range []string{"kube-system/proxy-p@" + pcm.ResourceVersion, "2030-01-02T03:04:05Z", status.ReasonAllChecksPassed} {
		if !strings.Contains(wide, s) {
			t.Errorf("status -o wide does not show %q:\n%s", s, wide)
		}
	}

	// A new assignment the kubelet has not reported yet is pending.
	kcm2 := mkCM("kubelet-b", "kubelet", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 88\n")
	ctl("assign", "--node=node-a", "--configmap="+ns+"/kubelet-b")
	if got := ctl("status", "node-a", "--component=kubelet"); !strings.Contains(got, "kube-system/kubelet-b (pending)   kube-system/kubelet-a") {
		t.Errorf("status after a new assignment:\n%s", got)
	}

	// render --node: the config node-a would run, from its assignment.
	rendered := ctl("render", "--node=node-a")
	for _, s := range []string{
		"# Base: configmap kube-system/kubelet-b key kubelet (UID " + string(kcm2.UID) + ", resourceVersion " + kcm2.ResourceVersion + "), assigned to node node-a\n",
		"\nmaxPods: 88\n", "\n#   maxPods: configmap kube-system/kubelet-b key kubelet\n",
	} {
		if !strings.Contains(rendered, s) {
			t.Errorf("render --node does not contain %q:\n%s", s, rendered)
		}
	}

	// A status annotation nobody can decode: the row is shown, the error
	// names node and annotation, exit 1.
	patch := []byte(`{"metadata":{"annotations":{"dynconfig.io/config-status":"{\"phase\":\"Trial\",\"phase\":\"Sleeping\"}"}}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, "node-c", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "status", "--kubeconfig="+kubeconfig, "-l", "pool=green")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("status on an undecodable annotation: %v, want exit code 1\n%s%s", err, stdout.String(), stderr.String())
	}
	wantOut := `NODE     COMPONENT   ASSIGNED   ACTIVE      LKG         CONDITION   PHASE
node-c   kubelet     local      <invalid>   <invalid>   <none>      <invalid>
`
	wantErr := `dynconfigctl: node "node-c" annotation dynconfig.io/config-status: decoding the config status: duplicate field "phase"` + "\n"
	if diff := cmp.Diff(wantOut, stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantErr, stderr.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
