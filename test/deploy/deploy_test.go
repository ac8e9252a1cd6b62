package deploy

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/dynconfig/dynconfig/test/cluster"
)

// deployDir is the repository's deploy/.
const deployDir = "../../deploy"

// The kustomizations an operator applies, in the order the README's
// Install section applies them.
var overlays = []string{
	".",                      // config namespace, component RBAC, admission policies
	"overlays/one-namespace", // the rollout controller, the default
	"daemonset",              // kube-proxy-like on every node
	"monitoring",             // alerts, scrape targets, dashboard
	"overlays/cluster-wide",  // the variant, applied over the default
}

// build runs kustomize on dir of fsys, as `kubectl apply -k` does.
func build(t *testing.T, fsys filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return out
}

// find returns the one object of kind and name, failing the test if it is
// not there.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}

// as converts u to a typed object.
func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func abs(t *testing.T, dir string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(deployDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOverlaysBuild(t *testing.T) {
	disk := filesys.MakeFsOnDisk()

	t.Run("one namespace is the default and least privileged", func(t *testing.T) {
		objs := build(t, disk, abs(t, "overlays/one-namespace"))
		d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "dynconfig-rollout"))
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--namespace=dynconfig-configs") {
			t.Errorf("Deployment args %v: want --namespace=dynconfig-configs", c.Args)
		}
		// Its roles, with every other shipped one: TestShippedRolesLeastPrivilege.
		checkController(t, objs, d)
	})

	t.Run("cluster-wide is the variant", func(t *testing.T) {
		objs := build(t, disk, abs(t, "overlays/cluster-wide"))
		d := as[appsv1.Deployment](t, find(t, objs, "Deployment", "dynconfig-rollout"))
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--namespace") {
				t.Errorf("cluster-wide Deployment has %s", a)
			}
		}
		find(t, objs, "ClusterRole", "dynconfig:rollout-controller")
		checkController(t, objs, d)
	})

	t.Run("the component DaemonSet", func(t *testing.T) {
		objs := build(t, disk, abs(t, "daemonset"))
		ds := as[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", "kube-proxy-like"))
		spec := ds.Spec.Template.Spec
		c := spec.Containers[0]
		var stateDir string
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--dynamic-config-dir="); ok {
				stateDir = v
			}
		}
		hostPath := ""
		for _, m := range c.VolumeMounts {
			if m.MountPath == stateDir {
				for _, v := range spec.Volumes {
					if v.Name == m.Name && v.HostPath != nil {
						hostPath = v.HostPath.Path
					}
				}
			}
		}
		if stateDir == "" || hostPath == "" {
			t.Errorf("--dynamic-config-dir %q on hostPath %q: the state dir must outlive the container", stateDir, hostPath)
		}
		nodeFromDownwardAPI := false
		for _, e := range c.Env {
			if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
				nodeFromDownwardAPI = true
			}
		}
		if !nodeFromDownwardAPI || !slices.Contains(c.Args, "--node-name=$(NODE_NAME)") {
			t.Errorf("env %v args %v: want NODE_NAME from spec.nodeName passed as --node-name", c.Env, c.Args)
		}
		if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") }) {
			t.Errorf("args %v: without --kubeconfig the component never reads its Node's assignment", c.Args)
		}
		if spec.ServiceAccountName != "kube-proxy-like" {
			t.Errorf("serviceAccountName %q, want kube-proxy-like (deploy/component-serviceaccount.yaml)", spec.ServiceAccountName)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s: want liveness and readiness probes and a memory limit", c.Name)
		}
		if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: want no privilege escalation and every capability dropped", c.Name)
		}
		find(t, objs, "ConfigMap", "dynconfig-in-cluster-kubeconfig")
	})

	t.Run("monitoring", func(t *testing.T) {
		objs := build(t, disk, abs(t, "monitoring"))
		find(t, objs, "PrometheusRule", "dynconfig")
		find(t, objs, "ServiceMonitor", "dynconfig-rollout")
		cm := as[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "dynconfig-grafana-dashboard"))
		if cm.Labels["grafana_dashboard"] != "1" || !strings.Contains(cm.Data["dashboard.json"], "dynconfig_rollout_phase") {
			t.Errorf("dashboard ConfigMap: labels %v, dashboard.json %d bytes", cm.Labels, len(cm.Data["dashboard.json"]))
		}
	})

	t.Run("images: sets the image", func(t *testing.T) {
		// What `kustomize edit set image NAME=NEW:TAG` writes, on a copy.
		mem := copyDeploy(t)
		for dir, name := range map[string]string{"overlays/one-namespace": "dynconfig-rollout", "daemonset": "kube-proxy-like"} {
			k := filepath.Join("/deploy", dir, "kustomization.yaml")
			data, err := mem.ReadFile(k)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, fmt.Sprintf("images:\n- name: %s\n  newName: registry.example/%s\n  newTag: v1.2.3\n", name, name)...)
			if err := mem.WriteFile(k, data); err != nil {
				t.Fatal(err)
			}
			objs := build(t, mem, filepath.Join("/deploy", dir))
			var images []string
			for _, o := range objs {
				cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				for _, c := range cs {
					images = append(images, c.(map[string]any)["image"].(string))
				}
			}
			if want := []string{"registry.example/" + name + ":v1.2.3"}; !slices.Equal(images, want) {
				t.Errorf("%s: images %v, want %v", dir, images, want)
			}
		}
	})
}

// checkController checks what both layouts of the rollout controller
// share: probes, limits, a PodDisruptionBudget over its Pods and the
// operators' role bound to a group.
func checkController(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Errorf("Deployment: want readiness and liveness probes")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("Deployment: resources %+v: want a memory limit and a CPU request", c.Resources)
	}
	pdb := find(t, objs, "PodDisruptionBudget", "dynconfig-rollout")
	sel, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("PodDisruptionBudget selects %s=%s, the Pods have %v", k, v, d.Spec.Template.Labels)
		}
	}
	crb := as[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "dynconfig:rollout-operator"))
	if len(crb.Subjects) == 0 || crb.Subjects[0].Kind != "Group" {
		t.Errorf("the operators' role is bound to %+v, want a group", crb.Subjects)
	}
}

// copyDeploy copies deploy/ into an in-memory file system at /deploy.
func copyDeploy(t *testing.T) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	root := abs(t, ".")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join("/deploy", rel), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// writeBuild writes the objects of a build as one multi-document YAML
// file, for cluster.ApplyManifests.
func writeBuild(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	f := filepath.Join(t.TempDir(), "build.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOverlaysApply applies every kustomization to a real API server (Node
// and RBAC authorization, NodeRestriction), in the Install order, and then
// shows the own-node policy holding a component ServiceAccount that
// nobody listed anywhere.
func TestOverlaysApply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installMonitoringCRDs(ctx, t, cl)

	disk := filesys.MakeFsOnDisk()
	for _, dir := range overlays {
		objs := build(t, disk, abs(t, dir))
		path := writeBuild(t, objs)
		// Discovery may lag a CRD that just became established.
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = cl.ApplyManifests(ctx, path)
			return last == nil, nil
		}); err != nil {
			t.Fatalf("applying kustomize build %s: %v", dir, last)
		}
	}
	d, err := cl.Client.AppsV1().Deployments("kube-system").Get(ctx, "dynconfig-rollout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The cluster-wide variant was applied last, over the default.
	if slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--namespace=dynconfig-configs") {
		t.Errorf("after the cluster-wide overlay the Deployment still has --namespace: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	if _, err := cl.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy-like", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}

	t.Run("own-node policy holds an unlisted component", func(t *testing.T) {
		ownNodeUnlisted(ctx, t, cl)
	})
	t.Run("every shipped role, with the API server's scopes", func(t *testing.T) {
		checkShippedRoles(t, disk, discoveryScope(t, cl.Client.Discovery()))
	})
}

// ownNodeUnlisted binds a new ServiceAccount, named nowhere in deploy/, to
// the component role, and shows that the Pod token of a Pod on one Node
// may write that Node's status and not another's.
func ownNodeUnlisted(ctx context.Context, t *testing.T, cl *cluster.Cluster) {
	admin := cl.Client
	nodes := []string{"node-a", "node-b"}
	for _, n := range nodes {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const ns, sa = "greeter-system", "node-greeter"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dynconfig:component:node-greeter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "dynconfig:component"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var proxy kubernetes.Interface
	podClient := func(namespace, account, node string) kubernetes.Interface {
		pod, err := admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: account + "-" + node, Namespace: namespace},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: account,
				Containers: []corev1.Container{{Name: "c", Image: account}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := cl.PodTokenConfig(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	// Each identity writes its own component's status annotation.
	statusPatch := func(c kubernetes.Interface, node string) error {
		user := "node-greeter"
		if c == proxy {
			user = "kube-proxy"
		}
		patch := []byte(`{"metadata":{"annotations":{"dynconfig.io/config-status.` + user + `":"{\"phase\":\"Local\"}"}}}`)
		_, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	}

	// The policy is in force once it refuses the case deploy/ names:
	// kube-proxy-like's Pod on node-a writing node-b (before it is, that
	// write succeeds; it writes another annotation than node-greeter's).
	proxy = podClient("kube-system", "kube-proxy-like", "node-a")
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = statusPatch(proxy, "node-b")
		return last != nil && strings.Contains(last.Error(), "dynconfig-component-own-node"), nil
	}); err != nil {
		t.Fatalf("the own-node policy never refused kube-proxy-like writing another Node: last %v", last)
	}

	greeter := podClient(ns, sa, "node-a")
	// RBAC for the new binding takes effect shortly after it is stored.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = statusPatch(greeter, "node-a")
		return last == nil, nil
	}); err != nil {
		t.Fatalf("node-greeter's Pod on node-a cannot write node-a's status: %v", last)
	}
	err := statusPatch(greeter, "node-b")
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), "dynconfig-component-own-node") {
		t.Fatalf("node-greeter's Pod on node-a wrote node-b's status (err %v): an unlisted component must be held to its own Node", err)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations["dynconfig.io/config-status.node-greeter"]; ok {
		t.Errorf("node-b carries node-greeter's status annotation")
	}
}

// installMonitoringCRDs stands in for prometheus-operator's CRDs (not
// shipped here): the kinds deploy/monitoring uses, with any content. The
// API server then stores deploy/monitoring's objects as it would with the
// operator installed; their content is checked by test/monitoring.
func installMonitoringCRDs(ctx context.Context, t *testing.T, cl *cluster.Cluster) {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	preserve := true
	for _, k := range []struct{ kind, plural string }{{"PrometheusRule", "prometheusrules"}, {"ServiceMonitor", "servicemonitors"}, {"PodMonitor", "podmonitors"}} {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, Plural: k.plural, ListKind: k.kind + "List",
					Singular: strings.ToLower(k.kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &preserve}}}},
			},
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("CRD %s not established: %v", crd.Name, err)
		}
	}
}
