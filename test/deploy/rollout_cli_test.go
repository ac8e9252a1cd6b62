package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// rolloutNS is where the default overlay lets the controller run rollouts.
const rolloutNS = "dynconfig-configs"

// TestRolloutOnAPIServer checks, on one real API server with deploy/ and
// the default overlay applied: the CRD's printer columns as the API server
// serves them to kubectl (a Table request); dynconfigctl installed as the
// kubectl plugin kubectl-dynconfig (list, get, -o, status -w following a
// watch, delete); and the controller's authenticated /metrics with the
// shipped RBAC.
func TestRolloutOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	cl := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	disk := filesys.MakeFsOnDisk()
	for _, dir := range []string{".", "overlays/one-namespace"} {
		path := writeBuild(t, build(t, disk, abs(t, dir)))
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = cl.ApplyManifests(ctx, path)
			return last == nil, nil
		}); err != nil {
			t.Fatalf("applying kustomize build %s: %v", dir, last)
		}
	}
	dyn := dynamic.NewForConfigOrDie(cl.Config)
	ri := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(rolloutNS)

	// r1: Progressing at index 1 of 3 steps, last reconciled 10 minutes
	// ago (no controller runs yet); done: Completed.
	beat := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	create(ctx, t, ri, "r1", v1alpha1.ConfigRolloutStatus{
		Phase: v1alpha1.PhaseProgressing, CurrentStep: 1, Message: "step 2 of 3: target 20 of 40 nodes, 10 assigned, 5 promoted",
		Selected: 40, Assigned: 10, InTrial: 5, Promoted: 5, LastReconcileTime: &beat,
	})
	create(ctx, t, ri, "done", v1alpha1.ConfigRolloutStatus{
		Phase: v1alpha1.PhaseCompleted, CurrentStep: 3, Message: "completed: 40 nodes promoted", Selected: 40, Assigned: 40, Promoted: 40,
	})

	t.Run("printer columns", func(t *testing.T) { printerColumns(ctx, t, cl) })
	t.Run("kubectl-dynconfig", func(t *testing.T) { plugin(ctx, t, cl, ri) })
	t.Run("metrics auth", func(t *testing.T) { metricsAuth(ctx, t, cl) })
}

func create(ctx context.Context, t *testing.T, ri dynamic.ResourceInterface, name string, st v1alpha1.ConfigRolloutStatus) {
	t.Helper()
	one, half, all := intstr.FromInt32(1), intstr.FromString("50%"), intstr.FromString("100%")
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rolloutNS},
		Spec: v1alpha1.ConfigRolloutSpec{Component: "kube-proxy", ConfigMapName: "kube-proxy-v1",
			Steps: []v1alpha1.RolloutStep{{Nodes: &one}, {Nodes: &half}, {Nodes: &all}}},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		t.Fatal(err)
	}
	u, err := ri.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus(ctx, t, ri, u, st)
}

func setStatus(ctx context.Context, t *testing.T, ri dynamic.ResourceInterface, u *unstructured.Unstructured, st v1alpha1.ConfigRolloutStatus) {
	t.Helper()
	s, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = s
	if _, err := ri.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// printerColumns asks for the rollouts as kubectl get does (a Table) and
// checks the columns and cells the CRD declares.
func printerColumns(ctx context.Context, t *testing.T, cl *cluster.Cluster) {
	body, err := cl.Client.CoreV1().RESTClient().Get().
		AbsPath("/apis/dynconfig.io/v1alpha1/namespaces", rolloutNS, "configrollouts").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("Table request: %v: %s", err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range table.ColumnDefinitions {
		got = append(got, fmt.Sprintf("%s/%d", c.Name, c.Priority))
	}
	want := []string{"Name/0", "Phase/0", "ConfigMap/1", "Component/1", "Selected/1", "Assigned/0", "In Trial/0", "Promoted/0", "Failed/0", "Reconciled/1", "Age/0", "Message/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("columns (name/priority) %v, want %v", got, want)
	}
	for _, row := range table.Rows {
		if row.Cells[0] != "r1" {
			continue
		}
		cells := fmt.Sprint(row.Cells[1], "|", row.Cells[5], "|", row.Cells[6], "|", row.Cells[11])
		if wantCells := "Progressing|10|5|step 2 of 3: target 20 of 40 nodes, 10 assigned, 5 promoted"; cells != wantCells {
			t.Errorf("r1's phase|assigned|in trial|message = %q, want %q", cells, wantCells)
		}
		if age, _ := row.Cells[9].(string); age != "10m" {
			t.Errorf("r1's Reconciled = %v, want 10m", row.Cells[9])
		}
		return
	}
	t.Fatalf("no row for r1 in %s", body)
}

// plugin runs dynconfigctl installed as kubectl-dynconfig, as kubectl runs
// a plugin: the same binary under that name, with the arguments after
// `kubectl dynconfig`.
func plugin(ctx context.Context, t *testing.T, cl *cluster.Cluster, ri dynamic.ResourceInterface) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-dynconfig")
	data, err := os.ReadFile(dynconfigctlBin.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cl.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", kubeconfig, "-n", rolloutNS)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl dynconfig %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}

	out := run("rollout", "list")
	for _, want := range []string{"NAME", "STEP", "IN TRIAL", "r1", "2/3", "STALE: controller not seen for 10m", "done", "Completed", "3/3"} {
		if !strings.Contains(out, want) {
			t.Errorf("rollout list: no %q in\n%s", want, out)
		}
	}
	if out := run("rollout", "get", "r1", "-o", "wide"); !strings.Contains(out, "RECONCILED") || !strings.Contains(out, "kube-proxy-v1") {
		t.Errorf("rollout get -o wide:\n%s", out)
	}
	if out := run("rollout", "get", "r1", "-o", "jsonpath={.status.assigned}"); out != "10" {
		t.Errorf("-o jsonpath: %q", out)
	}
	if out := run("rollout", "list", "-o", "name"); out != "configrollout.dynconfig.io/done\nconfigrollout.dynconfig.io/r1\n" {
		t.Errorf("-o name: %q", out)
	}
	var ro v1alpha1.ConfigRollout
	if err := json.Unmarshal([]byte(run("rollout", "status", "r1", "-o", "json")), &ro); err != nil || ro.Status.Assigned != 10 {
		t.Errorf("status -o json: %v, %+v", err, ro.Status)
	}
	if out := run("rollout", "list", "--help"); !strings.Contains(out, "kubectl dynconfig rollout list [flags]") {
		t.Errorf("help does not say kubectl dynconfig:\n%s", out)
	}

	// status -w follows the watch: a change shows, the end ends it.
	cmd := exec.CommandContext(ctx, bin, "rollout", "status", "r1", "-w", "--kubeconfig", kubeconfig, "-n", rolloutNS)
	var wout, werr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &wout, &werr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	time.Sleep(2 * time.Second) // let it watch; a change before is in its first view anyway
	u, err := ri.Get(ctx, "r1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	setStatus(ctx, t, ri, u, v1alpha1.ConfigRolloutStatus{
		Phase: v1alpha1.PhaseCompleted, CurrentStep: 3, Message: "completed: 40 nodes promoted", Selected: 40, Assigned: 40, Promoted: 40, LastReconcileTime: &now,
	})
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("status -w: %v\n%s", err, werr.String())
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("status -w did not end when the rollout completed:\n%s", wout.String())
	}
	if !strings.Contains(wout.String(), "r1: Progressing") || !strings.Contains(wout.String(), "r1: Completed") {
		t.Errorf("status -w did not show both states:\n%s", wout.String())
	}

	if out := run("rollout", "delete", "r1", "done"); out != "configrollout.dynconfig.io/r1 deleted\nconfigrollout.dynconfig.io/done deleted\n" {
		t.Errorf("delete: %q", out)
	}
	if l, err := ri.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("after delete (it waits): %v, %d left", err, len(l.Items))
	}
}

// metricsAuth runs the controller as the Deployment does (its arguments,
// its ServiceAccount's token, the overlay's RBAC) and scrapes /metrics:
// without a token 401, with the token of a ServiceAccount that is not
// bound 403, with the token of the Prometheus the shipped binding names
// 200; the health checks stay open.
func metricsAuth(ctx context.Context, t *testing.T, cl *cluster.Cluster) {
	dir := t.TempDir()
	d, err := cl.Client.AppsV1().Deployments("kube-system").Get(ctx, "dynconfig-rollout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--metrics-auth=delegated") {
		t.Fatalf("the Deployment does not serve authenticated metrics: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	_, addr := startController(ctx, t, cl, dir)
	base, hc := metricsClient([]string{"--metrics-auth=delegated"}, addr)

	sa := func(ns, name string) string {
		t.Helper()
		for _, obj := range []any{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		} {
			var err error
			switch o := obj.(type) {
			case *corev1.Namespace:
				_, err = cl.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ServiceAccount:
				_, err = cl.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
			}
			if err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatal(err)
			}
		}
		cfg, err := cl.ServiceAccountConfig(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.BearerToken
	}
	scrape := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, err := cl.Client.RbacV1().ClusterRoleBindings().Get(ctx, "dynconfig:metrics-reader", metav1.GetOptions{}); err != nil {
		t.Fatalf("the overlay did not ship the reader's binding: %v", err)
	}
	stranger, prometheus := sa("default", "stranger"), sa("monitoring", "prometheus-k8s")
	for _, tc := range []struct {
		what, path, token string
		code              int
		body              string
	}{
		{"no token", "/metrics", "", 401, "bearer token is required"},
		{"a token the API server does not know", "/metrics", "not-a-token", 401, "Unauthorized"},
		{"an unbound ServiceAccount", "/metrics", stranger, 403, `cannot get path "/metrics"`},
		{"the Prometheus the binding names", "/metrics", prometheus, 200, "dynconfig_rollout_reconcile_duration_seconds"},
		{"the kubelet's probe", "/readyz", "", 200, ""},
		{"the kubelet's probe", "/livez", "", 200, ""},
	} {
		if code, body := scrape(tc.path, tc.token); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s, GET %s: %d %.200q, want %d and %q", tc.what, tc.path, code, body, tc.code, tc.body)
		}
	}
	// The reader's role: bound to the stranger, it is served (after the
	// deny cache of 30s).
	if _, err := cl.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "stranger-reads-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "dynconfig:metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stranger", Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		code, _ := scrape("/metrics", stranger)
		return code == 200, nil
	}); err != nil {
		t.Errorf("the stranger, bound to dynconfig:metrics-reader, is still refused after 90s")
	}
}
