package deploy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"slices"

	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/test/cluster"
)

const readme = "../../README.md"

// section returns the lines of the first fenced block of lang under the
// README heading "## title".
func section(t *testing.T, title, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	var lines []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(rest))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "```"+lang:
			in = true
		case in && line == "```":
			return lines
		case in:
			lines = append(lines, line)
		}
	}
	t.Fatalf("README.md, section %q: no ```%s block", title, lang)
	return nil
}

func writeKubeconfig(t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	data, err := cluster.KubeConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits until node carries condition typ True, naming want
// in its message when want is set.
func waitCondition(ctx context.Context, t *testing.T, cl *cluster.Cluster, node string, typ corev1.NodeConditionType, want string, procs ...*proctest.Proc) {
	t.Helper()
	var last *corev1.NodeCondition
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cl.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i, c := range n.Status.Conditions {
			if c.Type == typ {
				last = &n.Status.Conditions[i]
				return c.Status == corev1.ConditionTrue && strings.Contains(c.Message, want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		for _, p := range procs {
			t.Logf("process stderr:\n%s", proctest.Tail(p.Stderr(), 40))
		}
		t.Fatalf("Node %s: condition %s never True with %q: last %+v", node, typ, want, last)
	}
}

// TestREADMEUnit runs the ExecStart line of the README's systemd unit
// (Operations), with its paths moved under the test's dir, on the kubelet's
// credentials against a real API server: the component must report ConfigOK
// on its Node. The unit of earlier READMEs had neither --kubeconfig nor
// --node-name, and its component never wrote to the cluster.
func TestREADMEUnit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	var exec string
	for _, l := range section(t, "Operations", "ini") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			exec = v
		}
	}
	fields := strings.Fields(exec)
	if len(fields) == 0 || fields[0] != "/usr/bin/kubelet-like" {
		t.Fatalf("README's unit: ExecStart %q, want /usr/bin/kubelet-like ...", exec)
	}
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cl.ApplyManifests(ctx, writeBuild(t, build(t, filesys.MakeFsOnDisk(), abs(t, ".")))); err != nil {
		t.Fatal(err)
	}
	const node = "worker-1"
	if _, err := cl.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nodeCfg, err := cl.NodeConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	writeKubeconfig(t, nodeCfg, filepath.Join(dir, "kubelet.conf"))
	if err := os.WriteFile(filepath.Join(dir, "kubelet.yaml"),
		[]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repl := strings.NewReplacer(
		"/usr/bin/kubelet-like", kubeletLikeBin.Build(t),
		"/etc/kubernetes/", dir+"/",
		"/var/lib/kubelet/dynamic-config", filepath.Join(dir, "dynamic-config"),
		"%l", node,
	)
	args := strings.Fields(repl.Replace(exec))
	// Not in the unit: serve on a free port (the default one may be taken
	// on a test machine).
	p := proctest.Start(t, args[0], append(args[1:], "--port=0"), nil)
	waitCondition(ctx, t, cl, node, nodeapi.ConditionType, "", p)
}

// TestREADMEInstall follows the README's Install section against a real
// API server (Node,RBAC, NodeRestriction): every command of its block
// runs, `kubectl apply -k` through kustomize's library and a server-side
// apply as kubectl does, `kubectl create configmap` through client-go,
// dynconfigctl as built, on the operator group the README names. The
// upstream control plane runs (cluster.Options.ControlPlane): the
// DaemonSet controller makes kube-proxy-like's Pod and the scheduler binds
// it to the Node (kept alive by cluster.HeartbeatNode, as no kubelet
// runs). The rollout controller and kube-proxy-like run as their Pods
// would: the arguments of the Deployment and DaemonSet just applied, the
// tokens of their ServiceAccounts (kube-proxy-like's bound to the
// DaemonSet's Pod on the Node).
func TestREADMEInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true, ControlPlane: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const node = "node-1"
	if _, err := cl.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.HeartbeatNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	opCfg, err := cl.UserConfig("operator-alice", "dynconfig:operators")
	if err != nil {
		t.Fatal(err)
	}
	opKubeconfig := filepath.Join(dir, "operator.kubeconfig")
	writeKubeconfig(t, opCfg, opKubeconfig)
	ctl := dynconfigctlBin.Build(t)
	var procs []*proctest.Proc
	ran := 0

	for _, line := range section(t, "Install", "sh") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, "  #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		line = strings.ReplaceAll(line, "NODE", node)
		f := strings.Fields(line)
		ran++
		switch {
		case line == "make images":
			// test/images builds and runs the images; the processes
			// below run the same binaries.
		case len(f) == 4 && f[0] == "kubectl" && f[1] == "apply" && f[2] == "-k":
			path := writeBuild(t, build(t, filesys.MakeFsOnDisk(), abs(t, strings.TrimPrefix(f[3], "deploy/"))))
			var last error
			if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, last = cl.ApplyManifests(ctx, path)
				return last == nil, nil
			}); err != nil {
				t.Fatalf("%s: %v", line, last)
			}
			switch f[3] {
			case "deploy/overlays/one-namespace":
				p, _ := startController(ctx, t, cl, dir)
				procs = append(procs, p)
			case "deploy/daemonset":
				procs = append(procs, startDaemonSetPod(ctx, t, cl, dir, node))
			}
		case len(f) == 7 && f[0] == "kubectl" && f[1] == "-n" && f[3] == "create" && f[4] == "configmap":
			key, file, ok := strings.Cut(strings.TrimPrefix(f[6], "--from-file="), "=")
			data, err := os.ReadFile(filepath.Join("../..", file))
			if !ok || err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if _, err := cl.Client.CoreV1().ConfigMaps(f[2]).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: f[5], Namespace: f[2]}, Data: map[string]string{key: string(data)},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		case f[0] == "dynconfigctl":
			if f[1] == "status" {
				// What the comment says: the node runs the config
				// (the condition names it by UID).
				cm, err := cl.Client.CoreV1().ConfigMaps("dynconfig-configs").Get(ctx, "kube-proxy-v1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				waitCondition(ctx, t, cl, node, "KubeProxyConfigOK", "using current (UID: "+string(cm.UID)+")", procs...)
			}
			out, err := execOut(ctl, append(f[1:], "--kubeconfig="+opKubeconfig)...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			if f[1] == "status" && (!strings.Contains(out, node) || !strings.Contains(out, "kube-proxy-v1")) {
				t.Errorf("%s printed no %s on kube-proxy-v1:\n%s", line, node, out)
			}
		default:
			t.Fatalf("README Install: %q is a command this test cannot run; teach it", line)
		}
	}
	if ran < 6 {
		t.Fatalf("README Install ran %d commands, want the whole block", ran)
	}
	if len(procs) != 2 {
		t.Fatalf("the README's Install started %d of the controller and the component", len(procs))
	}
}

func execOut(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// startController runs dynconfig-rollout as the Deployment's Pod would:
// its arguments, its ServiceAccount, POD_NAME and POD_NAMESPACE; metrics on
// a free loopback port. It waits for /readyz.
func startController(ctx context.Context, t *testing.T, cl *cluster.Cluster, dir string) (*proctest.Proc, string) {
	t.Helper()
	d, err := cl.Client.AppsV1().Deployments("kube-system").Get(ctx, "dynconfig-rollout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	saCfg, err := cl.ServiceAccountConfig(ctx, d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "controller.kubeconfig")
	writeKubeconfig(t, saCfg, kubeconfig)
	addr := cluster.FreeAddr(t)
	args := []string{"--kubeconfig=" + kubeconfig}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--metrics-address=") {
			a = "--metrics-address=" + addr
		}
		args = append(args, a)
	}
	p := proctest.Start(t, rolloutBin.Build(t), args,
		[]string{"POD_NAME=dynconfig-rollout-0", "POD_NAMESPACE=" + d.Namespace})
	url, hc := metricsClient(args, addr)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := hc.Get(url + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("the controller, run with the Deployment's arguments %v, never became ready:\n%s", args, proctest.Tail(p.Stderr(), 40))
	}
	return p, addr
}

// startDaemonSetPod runs kube-proxy-like as the DaemonSet's Pod on node
// would: the Pod the DaemonSet controller made and the scheduler bound to
// the Node, its bound ServiceAccount token in the kubeconfig the manifest
// mounts, the manifest's arguments with the downward API's values.
func startDaemonSetPod(ctx context.Context, t *testing.T, cl *cluster.Cluster, dir, node string) *proctest.Proc {
	t.Helper()
	ds, err := cl.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy-like", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := daemonSetPodOn(ctx, t, cl, ds, node)
	podCfg, err := cl.PodTokenConfig(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "pod.kubeconfig")
	writeKubeconfig(t, podCfg, kubeconfig)
	state := filepath.Join(dir, "state")
	var args []string
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--kubeconfig="):
			a = "--kubeconfig=" + kubeconfig
		case strings.HasPrefix(a, "--dynamic-config-dir="):
			a = "--dynamic-config-dir=" + state
		case strings.HasPrefix(a, "--port="):
			a = "--port=0"
		}
		a = strings.NewReplacer("$(NODE_NAME)", node, "$(POD_IP)", "127.0.0.1").Replace(a)
		args = append(args, a)
	}
	return proctest.Start(t, kubeProxyLikeBin.Build(t), args, nil)
}

// daemonSetPodOn waits for the Pod of ds that the DaemonSet controller
// made for node (owned by ds) and the scheduler bound to it.
func daemonSetPodOn(ctx context.Context, t *testing.T, cl *cluster.Cluster, ds *appsv1.DaemonSet, node string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	last := "no Pod"
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cl.Client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		if err != nil {
			return false, nil // the last listing says more than a timeout
		}
		last = fmt.Sprintf("%d Pods", len(list.Items))
		for i := range list.Items {
			p := &list.Items[i]
			last = fmt.Sprintf("Pod %s on %q, owner %v", p.Name, p.Spec.NodeName, metav1.GetControllerOf(p))
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == ds.UID && p.Spec.NodeName == node {
				pod = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		if got, err := cl.Client.AppsV1().DaemonSets(ds.Namespace).Get(context.WithoutCancel(ctx), ds.Name, metav1.GetOptions{}); err == nil {
			last += fmt.Sprintf("; DaemonSet status %+v", got.Status)
		}
		t.Fatalf("waiting for DaemonSet %s/%s's Pod on Node %s: %v; last: %s", ds.Namespace, ds.Name, node, err, last)
	}
	return pod
}

// metricsClient is the base URL of a controller run with args on addr, and
// a client for it: HTTPS with its self-signed certificate when
// --metrics-auth=delegated, else HTTP.
func metricsClient(args []string, addr string) (string, *http.Client) {
	if slices.Contains(args, "--metrics-auth=delegated") {
		return "https://" + addr, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	return "http://" + addr, http.DefaultClient
}
