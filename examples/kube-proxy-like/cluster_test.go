package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// TestReportsItsOwnCondition runs kube-proxy-like in process against a
// fake API server, once on the shared ConfigMap (--configmap) and once on
// its Node's assignment for the component "kube-proxy". Either way it runs
// that ConfigMap, reports KubeProxyConfigOK and its ConfigStatus in
// dynconfig.io/config-status.kube-proxy, and leaves the kubelet's ConfigOK condition and assignment alone (the
// kubelet's assignment names a ConfigMap that is not a
// KubeProxyConfiguration, which it must never read).
func TestReportsItsOwnCondition(t *testing.T) {
	const nodeName = "node-a"
	proxyCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy", UID: "d0000000-0000-4000-8000-000000000001", ResourceVersion: "5"},
		Data:       map[string]string{kubeproxy.Profile{}.PayloadKey(): proxyDoc("clusterCIDR: 10.244.0.0/16")},
	}
	kubeletCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubelet", UID: "d0000000-0000-4000-8000-0000000000ff", ResourceVersion: "5"},
		Data:       map[string]string{"kubelet": "not a KubeProxyConfiguration"},
	}
	assign := func(cm *corev1.ConfigMap, key string) string {
		data, err := json.Marshal(corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: key}})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	kubeletCondition := corev1.NodeCondition{Type: nodeapi.ConditionType, Status: corev1.ConditionTrue, Reason: "the kubelet's own"}
	for _, tc := range []struct {
		name string
		args []string
		// nodeAssigns: the Node's kube-proxy annotation assigns proxyCM.
		nodeAssigns bool
	}{
		{name: "shared ConfigMap", args: []string{"--configmap=kube-system/kube-proxy"}},
		{name: "Node assignment", nodeAssigns: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: nodeName, ResourceVersion: "1",
					Annotations: map[string]string{nodeapi.AssignmentAnnotation: assign(kubeletCM, "kubelet")}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{kubeletCondition}},
			}
			if tc.nodeAssigns {
				node.Annotations[nodeapi.AssignmentAnnotationFor(componentName)] = assign(proxyCM, kubeproxy.Profile{}.PayloadKey())
			}
			client := fake.NewClientset(node, proxyCM, kubeletCM)
			c := component()
			c.NewClient = func(string) (kubernetes.Interface, error) { return client, nil }

			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			var stdout, stderr proctest.SyncBuffer
			done := make(chan int, 1)
			args := append([]string{"--dynamic-config-dir=" + t.TempDir(), "--kubeconfig=fake", "--node-name=" + nodeName, "--port=0"}, tc.args...)
			go func() { done <- app.Execute(ctx, app.NewCommand(c), args, &stdout, &stderr) }()
			defer func() {
				cancel()
				if code := <-done; code != app.ExitOK {
					t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
				}
			}()

			var addr string
			proctest.WaitFor(t, "serving", func() (bool, string) {
				select {
				case code := <-done:
					done <- code
					t.Fatalf("exited with code %d; stderr:\n%s", code, stderr.String())
				default:
				}
				sc := bufio.NewScanner(strings.NewReader(stdout.String()))
				for sc.Scan() {
					if a, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
						addr = a
						return true, ""
					}
				}
				return false, "stdout " + stdout.String()
			}, nil)
			z, err := getConfigz(addr)
			if err != nil {
				t.Fatal(err)
			}
			if z.KubeProxyConfig.ClusterCIDR != "10.244.0.0/16" {
				t.Errorf("/configz clusterCIDR %q, want the ConfigMap's 10.244.0.0/16", z.KubeProxyConfig.ClusterCIDR)
			}

			proctest.WaitFor(t, "KubeProxyConfigOK and the kube-proxy ConfigStatus on the Node", func() (bool, string) {
				n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				var own *corev1.NodeCondition
				for i, cond := range n.Status.Conditions {
					switch cond.Type {
					case "KubeProxyConfigOK":
						own = &n.Status.Conditions[i]
					case nodeapi.ConditionType:
						if cond.Reason != kubeletCondition.Reason {
							t.Fatalf("the kubelet's ConfigOK condition changed: %+v", cond)
						}
					}
				}
				cs, err := nodeapi.ReadConfigStatus(n, componentName)
				if err != nil {
					return false, err.Error()
				}
				if own == nil || own.Status != corev1.ConditionTrue || cs == nil || cs.Assigned == nil || cs.Assigned.ConfigMap == nil ||
					cs.Assigned.ConfigMap.UID != proxyCM.UID {
					return false, fmt.Sprintf("conditions %+v, config status %+v", n.Status.Conditions, cs)
				}
				if kcs, err := nodeapi.ReadConfigStatus(n, nodeapi.DefaultComponent); kcs != nil || err != nil {
					t.Fatalf("a kubelet ConfigStatus appeared: %+v, %v", kcs, err)
				}
				return true, ""
			}, nil)

		})
	}
}
