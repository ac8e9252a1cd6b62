package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
)

const (
	nodeName  = "node-a"
	component = "node-greeter"
	namespace = "greeter-config"
)

// configMap is a ConfigMap holding a NodeGreeterConfiguration with greeting.
func configMap(name string, uid types.UID, greeting string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid, ResourceVersion: "1"},
		Data: map[string]string{Profile{}.PayloadKey(): "apiVersion: greeter.example.com/v1alpha1\nkind: NodeGreeterConfiguration\n" +
			"greeting: " + greeting + "\ninterval: 200ms\n"},
	}
}

// assignment is the JSON of a NodeConfigSource naming cm.
func assignment(t *testing.T, cm *corev1.ConfigMap) string {
	t.Helper()
	data, err := json.Marshal(corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: Profile{}.PayloadKey()}})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitFor polls cond every 20ms for up to 15s.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// greeting reads the greeting /configz serves at addr.
func greeting(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/configz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var z struct {
		Config *NodeGreeterConfiguration `json:"node-greeter"`
	}
	if err := json.Unmarshal(body, &z); err != nil || z.Config == nil {
		return "", fmt.Errorf("/configz %s: %v", body, err)
	}
	return z.Config.Greeting, nil
}

// TestOwnConditionAndAnnotations runs the node-greeter in process against a
// fake API server, on a Node that also carries a kubelet's assignment (to a
// ConfigMap that is not a NodeGreeterConfiguration) and a kubelet's ConfigOK
// condition. The greeter takes its config from its own annotation,
// dynconfig.io/config-source.node-greeter, reports NodeGreeterConfigOK and
// its own ConfigStatus annotation, leaves the kubelet's condition alone,
// and reloads in process when it is assigned another ConfigMap.
func TestOwnConditionAndAnnotations(t *testing.T) {
	first := configMap("greeting-1", "c0000000-0000-4000-8000-000000000001", "Hi")
	second := configMap("greeting-2", "c0000000-0000-4000-8000-000000000002", "Bonjour")
	// A short trial: the reloaded config is promoted once its trial ran,
	// with the health mark the command gives after each reload.
	second.Annotations = map[string]string{components.TrialDurationAnnotation: "1s"}
	kubeletCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "kubelet", UID: "c0000000-0000-4000-8000-0000000000ff", ResourceVersion: "1"},
		Data:       map[string]string{"kubelet": "not a greeter config"},
	}
	kubeletCondition := corev1.NodeCondition{Type: nodeapi.ConditionType, Status: corev1.ConditionTrue, Reason: "kubelet's own"}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, ResourceVersion: "1", Annotations: map[string]string{
			nodeapi.AssignmentAnnotation:               assignment(t, kubeletCM),
			nodeapi.AssignmentAnnotationFor(component): assignment(t, first),
		}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{kubeletCondition}},
	}
	client := fake.NewClientset(node, first, second, kubeletCM)

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var stdout, stderr proctest.SyncBuffer
	done := make(chan int, 1)
	cmd := newCommand(func(c *app.Component[NodeGreeterConfiguration]) {
		c.NewClient = func(string) (kubernetes.Interface, error) { return client, nil }
	})
	go func() {
		done <- app.Execute(ctx, cmd, []string{"--dynamic-config-dir=" + t.TempDir(), "--kubeconfig=fake",
			"--node-name=" + nodeName, "--port=0"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != app.ExitOK {
			t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr.String())
		}
	}()

	var addr string
	waitFor(t, "serving", func() (bool, string) {
		sc := bufio.NewScanner(strings.NewReader(stdout.String()))
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				addr = a
				return true, ""
			}
		}
		return false, "stdout " + stdout.String() + ", stderr " + stderr.String()
	})
	if got, err := greeting(addr); err != nil || got != "Hi" {
		t.Fatalf("/configz greeting %q, %v; want Hi, from its own assignment", got, err)
	}

	// nodeState returns the Node's conditions by type and the greeter's
	// ConfigStatus.
	nodeState := func() (map[corev1.NodeConditionType]corev1.NodeCondition, *nodeapi.ConfigStatus, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		conds := map[corev1.NodeConditionType]corev1.NodeCondition{}
		for _, c := range n.Status.Conditions {
			conds[c.Type] = c
		}
		cs, err := nodeapi.ReadConfigStatus(n, component)
		return conds, cs, err
	}
	const ownType corev1.NodeConditionType = "NodeGreeterConfigOK"
	if got := nodeapi.ConditionTypeFor(component); got != ownType {
		t.Fatalf("ConditionTypeFor(%q) = %s, want %s", component, got, ownType)
	}
	wantAssigned := func(cm *corev1.ConfigMap) func() (bool, string) {
		return func() (bool, string) {
			conds, cs, err := nodeState()
			if err != nil {
				return false, err.Error()
			}
			own, ok := conds[ownType]
			if !ok || own.Status != corev1.ConditionTrue || cs == nil || cs.Assigned == nil || cs.Assigned.ConfigMap == nil ||
				cs.Assigned.ConfigMap.UID != cm.UID || (cs.Phase != nodeapi.PhaseTrial && cs.Phase != nodeapi.PhasePromoted) {
				return false, fmt.Sprintf("conditions %+v, config status %+v", conds, cs)
			}
			if kc := conds[nodeapi.ConditionType]; kc.Reason != kubeletCondition.Reason {
				t.Fatalf("the kubelet's ConfigOK condition changed: %+v", kc)
			}
			return true, ""
		}
	}
	waitFor(t, "NodeGreeterConfigOK and the greeter's ConfigStatus for "+first.Name, wantAssigned(first))

	// Assign the second ConfigMap: the greeter reloads in process.
	n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Annotations[nodeapi.AssignmentAnnotationFor(component)] = assignment(t, second)
	n.ResourceVersion = "2"
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload onto "+second.Name, func() (bool, string) {
		got, err := greeting(addr)
		return err == nil && got == "Bonjour", fmt.Sprintf("greeting %q, %v", got, err)
	})
	waitFor(t, "NodeGreeterConfigOK and the greeter's ConfigStatus for "+second.Name, wantAssigned(second))
	waitFor(t, second.Name+" promoted after its trial (RequireHealthy with Reload)", func() (bool, string) {
		_, cs, err := nodeState()
		return err == nil && cs != nil && cs.Phase == nodeapi.PhasePromoted &&
			cs.LastKnownGood != nil && cs.LastKnownGood.ConfigMap.UID == second.UID, fmt.Sprintf("config status %+v, %v", cs, err)
	})

	events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Error("no Events; want the config change recorded")
	}
	for _, ev := range events.Items {
		if ev.Source.Component != component {
			t.Errorf("event %s %q from %q, want from %s", ev.Reason, ev.Message, ev.Source.Component, component)
		}
	}
}

// TestHelp checks that the greeter's help names its own annotation and
// its config kind, and that --version works with no version given.
func TestHelp(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var stdout, stderr bytes.Buffer
	if code := app.Execute(ctx, newCommand(nil), []string{"--help"}, &stdout, &stderr); code != app.ExitOK {
		t.Fatalf("exit code %d, stderr %s", code, stderr.String())
	}
	for _, want := range []string{"dynconfig.io/config-source.node-greeter annotation", "(a NodeGreeterConfiguration, YAML or JSON)",
		"--greeting string", "--feature-gates mapStringBool"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stdout.String())
		}
	}
}
