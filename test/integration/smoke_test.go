package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// TestSmoke proves the real control plane does what the library relies on:
// Nodes and ConfigMaps are stored, a strategic merge patch of
// status.conditions through the status subresource merges by condition type
// (other conditions untouched, the library's reason wording accepted), and
// everything survives an API server restart on the same etcd with the same
// client.
func TestSmoke(t *testing.T) {
	c := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Times with whole seconds: the API serializes conditions' times in RFC
	// 3339 without fractions.
	created := metav1.Date(2026, time.March, 1, 10, 0, 0, 0, time.UTC)
	ready := corev1.NodeCondition{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             "KubeletReady",
		Message:            "kubelet is posting ready status",
		LastHeartbeatTime:  created,
		LastTransitionTime: created,
	}
	node, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-node"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node: %v", err)
	}
	node.Status.Conditions = []corev1.NodeCondition{ready}
	if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting node Ready condition: %v", err)
	}

	cm, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-config"},
		Data:       map[string]string{"kubelet": "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating configmap: %v", err)
	}
	if cm.UID == "" {
		t.Fatalf("created configmap has no UID")
	}

	first := metav1.Date(2026, time.March, 1, 10, 5, 0, 0, time.UTC)
	second := metav1.Date(2026, time.March, 1, 10, 6, 0, 0, time.UTC)
	report := status.Report{
		Status:  corev1.ConditionTrue,
		Reason:  status.ReasonAllChecksPassed,
		Message: status.CurrentMessage(status.Ref{UID: cm.UID}, status.LocalInit),
	}
	configOK := status.ConfigOK(nil, report, first)
	heartbeat := status.ConfigOK(&configOK, report, second)

	// Two patches: the first adds ConfigOK, the second (a heartbeat) replaces
	// it by type. Ready must stay as it was after both.
	patchConditions(ctx, t, c, node.Name, configOK)
	got := patchConditions(ctx, t, c, node.Name, heartbeat)
	want := []corev1.NodeCondition{ready, {
		Type:               nodeapi.ConditionType,
		Status:             corev1.ConditionTrue,
		Reason:             "all checks passed",
		Message:            "using current (UID: " + string(cm.UID) + ")",
		LastHeartbeatTime:  second,
		LastTransitionTime: first,
	}}
	if diff := cmp.Diff(want, got.Status.Conditions, byType); diff != "" {
		t.Fatalf("node conditions after the patches (-want +got):\n%s", diff)
	}

	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	downCtx, downCancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = c.Client.CoreV1().Nodes().Get(downCtx, node.Name, metav1.GetOptions{})
	downCancel()
	if err == nil {
		t.Fatalf("getting the node with the API server stopped: got no error")
	}

	if err := c.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// The same client: the restarted server must keep the address and the
	// certificates.
	again, err := c.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the node after the restart: %v", err)
	}
	if diff := cmp.Diff(want, again.Status.Conditions, byType); diff != "" {
		t.Errorf("node conditions after the restart (-want +got):\n%s", diff)
	}
	// The kubeconfig handed to processes stays valid across the restart too.
	fromFile, err := clientcmd.RESTConfigFromKubeConfig(c.KubeConfig)
	if err != nil {
		t.Fatalf("loading the cluster's kubeconfig: %v", err)
	}
	fileClient, err := kubernetes.NewForConfig(fromFile)
	if err != nil {
		t.Fatalf("building a client from the kubeconfig: %v", err)
	}
	cmAgain, err := fileClient.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the configmap after the restart: %v", err)
	}
	if cmAgain.UID != cm.UID || cmAgain.ResourceVersion != cm.ResourceVersion {
		t.Errorf("configmap after the restart: uid %s rv %s, want uid %s rv %s",
			cmAgain.UID, cmAgain.ResourceVersion, cm.UID, cm.ResourceVersion)
	}
	if diff := cmp.Diff(cm.Data, cmAgain.Data); diff != "" {
		t.Errorf("configmap data after the restart (-want +got):\n%s", diff)
	}
}

// byType ignores the order of conditions: a strategic merge patch puts the
// patched items first, and nothing reads the order.
var byType = cmpopts.SortSlices(func(a, b corev1.NodeCondition) bool { return a.Type < b.Type })

// patchConditions sends the strategic merge patch the status reporter will
// send: only status.conditions, holding one condition.
func patchConditions(ctx context.Context, t *testing.T, c *cluster.Cluster, node string, cond corev1.NodeCondition) *corev1.Node {
	t.Helper()
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": []corev1.NodeCondition{cond}},
	})
	if err != nil {
		t.Fatalf("encoding patch: %v", err)
	}
	got, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("patching node %s status with %s: %v", node, patch, err)
	}
	return got
}
