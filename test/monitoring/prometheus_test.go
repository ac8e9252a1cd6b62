package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// TestPrometheusAlertFires: a real Prometheus (Debian's), loaded with the
// PrometheusRule's groups, scrapes the real rollout controller the way the
// ServiceMonitor says (HTTPS, its ServiceAccount token, authorized by
// deploy/rollout/metrics-auth.yaml's binding), and DynconfigRolloutHalted
// fires once a rollout halts on the real API server (its ConfigMap deleted
// mid-rollout).
func TestPrometheusAlertFires(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver, the controller and Prometheus")
	}
	prom := testenv.LookPath(t, "prometheus", "apt-get install prometheus")
	cl := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := cl.ApplyManifests(ctx, "../../deploy/rollout/dynconfig.io_configrollouts.yaml", "../../deploy/rollout/metrics-auth.yaml"); err != nil {
		t.Fatal(err)
	}
	admin := cl.Client
	for _, ns := range []string{"cfg", "monitoring"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-k8s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The nodes run kube-proxy (a rollout skips a node that reports no
	// status for its component): each says it runs its local config.
	local, err := (&nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal}).MarshalAnnotation()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n,
			Annotations: map[string]string{nodeapi.StatusAnnotationFor("kube-proxy"): local}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := admin.CoreV1().ConfigMaps("cfg").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy-v2"}, Data: map[string]string{"config.conf": "mode: iptables\n"},
		Immutable: ptr.To(true), // a rollout starts on an immutable ConfigMap only
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	bin := rolloutBin.Build(t)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	write(t, kubeconfig, string(cl.KubeConfig))
	ctlAddr, promAddr := cluster.FreeAddr(t), cluster.FreeAddr(t)
	ctl := proctest.Start(t, bin, []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false",
		"--metrics-address=" + ctlAddr, "--metrics-auth=delegated", "--status-heartbeat-interval=1s"}, nil)

	// Prometheus as the ServiceMonitor configures it: job dynconfig-rollout
	// (the Service's name), https, its ServiceAccount's token.
	sa, err := cl.ServiceAccountConfig(ctx, "monitoring", "prometheus-k8s")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "token"), sa.BearerToken)
	write(t, filepath.Join(dir, "rules.yaml"), string(ruleGroups(t)))
	write(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
- job_name: dynconfig-rollout
  scheme: https
  bearer_token_file: token
  tls_config: {insecure_skip_verify: true}
  static_configs:
  - targets: [%q]
`, ctlAddr))
	p := proctest.Start(t, prom, []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + promAddr}, nil)
	api := func(path string, q url.Values) (json.RawMessage, error) {
		resp, err := http.Get("http://" + promAddr + path + "?" + q.Encode())
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var r struct {
			Status string          `json:"status"`
			Data   json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
			return nil, fmt.Errorf("%s: %s (%v)", path, body, err)
		}
		return r.Data, nil
	}

	// The scrape is authorized: up is 1 (a 401/403 would make it 0).
	var last string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		d, err := api("/api/v1/query", url.Values{"query": {`up{job="dynconfig-rollout"}`}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = string(d)
		return strings.Contains(last, `"1"]`), nil
	}); err != nil {
		t.Fatalf("Prometheus never scraped the controller (up = %s)\nprometheus:\n%s\ncontroller:\n%s", last, proctest.Tail(p.Stderr(), 20), proctest.Tail(ctl.Stderr(), 20))
	}

	// A rollout that halts: started on the ConfigMap, which is then deleted.
	one := intstr.FromInt32(1)
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "cfg"},
		Spec:       v1alpha1.ConfigRolloutSpec{Component: "kube-proxy", ConfigMapName: "proxy-v2", Steps: []v1alpha1.RolloutStep{{Nodes: &one}}},
	}
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	ri := dynamic.NewForConfigOrDie(cl.Config).Resource(v1alpha1.GroupVersionResource()).Namespace("cfg")
	if _, err := ri.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	phase := func() string {
		u, err := ri.Get(ctx, "r1", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		s, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return s
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return phase() == string(v1alpha1.PhaseProgressing), nil
	}); err != nil {
		t.Fatalf("the rollout never started: phase %q\n%s", phase(), proctest.Tail(ctl.Stderr(), 20))
	}
	// The heartbeat: while the rollout waits for its node (nothing else
	// changes), status.lastReconcileTime moves on every second, one status
	// write each, and Prometheus sees it as
	// dynconfig_rollout_last_reconcile_timestamp_seconds.
	beat := func() (time.Time, float64) {
		u, err := ri.Get(ctx, "r1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, _, _ := unstructured.NestedString(u.Object, "status", "lastReconcileTime")
		at, _ := time.Parse(time.RFC3339, s)
		d, err := api("/api/v1/query", url.Values{"query": {`sum(dynconfig_rollout_status_writes_total{result="ok"})`}})
		if err != nil {
			t.Fatal(err)
		}
		var v []struct {
			Value [2]any `json:"value"`
		}
		var r struct {
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(d, &r)
		_ = json.Unmarshal(r.Result, &v)
		var writes float64
		if len(v) == 1 {
			_, _ = fmt.Sscan(fmt.Sprint(v[0].Value[1]), &writes)
		}
		return at, writes
	}
	time.Sleep(3 * time.Second) // the start's writes scraped
	at0, w0 := beat()
	time.Sleep(8 * time.Second)
	at1, w1 := beat()
	if moved := at1.Sub(at0); moved < 5*time.Second {
		t.Errorf("status.lastReconcileTime moved %v in 8s at --status-heartbeat-interval=1s", moved)
	}
	// Scraped every second: the 8 s hold about 8 heartbeat writes.
	t.Logf("heartbeat: lastReconcileTime moved %v, status writes %v in 8s at 1s (Prometheus' count)", at1.Sub(at0), w1-w0)
	if n := w1 - w0; n < 4 || n > 12 {
		t.Errorf("%v status writes in 8s at a 1s heartbeat, want about 8", n)
	}
	if d, err := api("/api/v1/query", url.Values{"query": {`time() - dynconfig_rollout_last_reconcile_timestamp_seconds{namespace="cfg",name="r1"} < 5`}}); err != nil || !strings.Contains(string(d), `"name":"r1"`) {
		t.Errorf("Prometheus does not see a fresh heartbeat: %s %v", d, err)
	}

	// Not halted yet: the alert is quiet.
	if d, err := api("/api/v1/alerts", nil); err != nil || strings.Contains(string(d), "DynconfigRolloutHalted") {
		t.Fatalf("DynconfigRolloutHalted before the halt: %s %v", d, err)
	}
	// Its data cannot change (immutable), and a label edit is no new
	// config; deleting the ConfigMap under an active rollout halts it.
	if err := admin.CoreV1().ConfigMaps("cfg").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		d, err := api("/api/v1/alerts", nil)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var alerts struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := json.Unmarshal(d, &alerts); err != nil {
			return false, err
		}
		last = string(d)
		for _, a := range alerts.Alerts {
			if a.Labels["alertname"] == "DynconfigRolloutHalted" && a.State == "firing" && a.Labels["namespace"] == "cfg" && a.Labels["name"] == "r1" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("DynconfigRolloutHalted never fired (phase %q); alerts: %s", phase(), last)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
