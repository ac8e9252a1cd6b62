package deploy

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// rolloutOperators is the group deploy/rollout/operator-rbac.yaml binds.
const rolloutOperators = "dynconfig:rollout-operators"

// TestRolloutOperatorRole applies deploy/ and the default overlay to a real
// API server and works as a member of dynconfig:rollout-operators: in the
// config namespace it creates a ConfigMap and starts a rollout of it with
// the real dynconfigctl (--make-immutable: get and patch), lists, pauses
// and deletes it. Outside it, it may neither read nor create a ConfigMap
// (kube-system's included), nor touch a ConfigRollout.
func TestRolloutOperatorRole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	dir := t.TempDir()
	ctl := dynconfigctlBin.Build(t) // built by TestMain, before any clock
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	disk := filesys.MakeFsOnDisk()
	for _, d := range []string{".", "overlays/one-namespace"} {
		path := writeBuild(t, build(t, disk, abs(t, d)))
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = cl.ApplyManifests(ctx, path)
			return last == nil, nil
		}); err != nil {
			t.Fatalf("applying kustomize build %s: %v", d, last)
		}
	}
	cfg, err := cl.UserConfig("sre-bob", rolloutOperators)
	if err != nil {
		t.Fatal(err)
	}
	op := kubernetes.NewForConfigOrDie(cfg)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, cfg, kubeconfig)
	// RBAC takes effect when the authorizer's informers see the bindings.
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Namespace: rolloutNS, Verb: "patch", Resource: "configmaps"},
		{Namespace: rolloutNS, Verb: "create", Group: v1alpha1.GroupVersion().Group, Resource: "configrollouts"},
		{Verb: "list", Resource: "nodes"},
	} {
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			r, err := cl.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: "sre-bob", Groups: []string{rolloutOperators}, ResourceAttributes: &ra},
			}, metav1.CreateOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = r.Status.Reason
			return r.Status.Allowed, nil
		}); err != nil {
			t.Fatalf("the rollout operator never got %s %s in %q: %s", ra.Verb, ra.Resource, ra.Namespace, last)
		}
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, ctl, append(args, "--kubeconfig", kubeconfig, "-n", rolloutNS)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	t.Run("drives a rollout in the config namespace", func(t *testing.T) {
		if _, err := op.CoreV1().ConfigMaps(rolloutNS).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-v2"},
			Data:       map[string]string{"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create a ConfigMap in %s: %v", rolloutNS, err)
		}
		for _, args := range [][]string{
			{"rollout", "start", "r2", "--configmap", "kube-proxy-v2", "--component", "kube-proxy", "--make-immutable"},
			{"rollout", "list"},
			{"rollout", "pause", "r2"},
			{"rollout", "status", "r2", "-o", "json"},
			{"rollout", "delete", "r2"},
		} {
			if out, err := run(args...); err != nil {
				t.Errorf("dynconfigctl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		cm, err := cl.Client.CoreV1().ConfigMaps(rolloutNS).Get(ctx, "kube-proxy-v2", metav1.GetOptions{})
		if err != nil || cm.Immutable == nil || !*cm.Immutable {
			t.Errorf("after rollout start --make-immutable: ConfigMap %+v, %v; want it immutable", cm, err)
		}
	})

	t.Run("nothing outside it", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(cfg)
		for _, ns := range []string{metav1.NamespaceSystem, metav1.NamespaceDefault} {
			forbidden := func(what string, err error) {
				t.Helper()
				if !apierrors.IsForbidden(err) {
					t.Errorf("the rollout operator: %s in %s: %v; want Forbidden", what, ns, err)
				}
			}
			_, err := op.CoreV1().ConfigMaps(ns).Get(ctx, "kube-proxy", metav1.GetOptions{})
			forbidden("get a ConfigMap", err)
			_, err = op.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}, metav1.CreateOptions{})
			forbidden("create a ConfigMap", err)
			_, err = dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).List(ctx, metav1.ListOptions{})
			forbidden("list ConfigRollouts", err)
			_, err = op.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			forbidden("list Events", err)
			out, err := exec.CommandContext(ctx, ctl, "rollout", "start", "r3", "--configmap", "kube-proxy", "--component", "kube-proxy",
				"--kubeconfig", kubeconfig, "-n", ns).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "forbidden") {
				t.Errorf("dynconfigctl rollout start in %s: %v\n%s\nwant it forbidden", ns, err, out)
			}
		}
		_, err := op.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the rollout operator lists Pods: %v; want Forbidden", err)
		}
	})
}
