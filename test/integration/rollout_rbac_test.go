package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// rolloutRBACNamespaced is the controller's identity and grants for one
// namespace of ConfigRollouts.
const rolloutRBACNamespaced = "../../deploy/overlays/one-namespace/rbac.yaml"

// rbacNamespacedDefault is the rollouts' namespace the manifest is written
// for; the test rewrites it to the namespace its ConfigMaps live in.
const rbacNamespacedDefault = "dynconfig-configs"

// TestRolloutNamespacedRBAC runs the rollout controller with --namespace
// on the ServiceAccount and grants of deploy/overlays/one-namespace/rbac.yaml:
// it can run a rollout to completion and a halt with a revert, it gets no
// Forbidden answer while it does, and it can read nothing namespaced
// outside its namespace.
func TestRolloutNamespacedRBAC(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 3*time.Minute)
	installRolloutCRD(ctx, t, h)
	applyRBACNamespaced(ctx, t, h, namespace)
	cfg, err := h.cl.ServiceAccountConfig(ctx, "kube-system", "dynconfig-rollout")
	if err != nil {
		t.Fatal(err)
	}
	waitAllowedIn(ctx, t, cfg, namespace)

	// A namespace the controller has no grant in.
	const other = "rbac-other"

	t.Run("grants nothing outside its namespace", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		if _, err := h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "not-a-config"}, Data: map[string]string{"password": "hunter2"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		client := newClient(t, cfg, 50, 100)
		dyn := dynamic.NewForConfigOrDie(cfg)
		rollouts := dyn.Resource(v1alpha1.GroupVersionResource())
		sa := "system:serviceaccount:kube-system:dynconfig-rollout"

		_, err := client.CoreV1().ConfigMaps(other).Get(ctx, "not-a-config", metav1.GetOptions{})
		wantDenied(t, "get a ConfigMap of another namespace", err, sa)
		_, err = client.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{})
		wantDenied(t, "list the ConfigMaps of another namespace", err, sa)
		_, err = client.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
		wantDenied(t, "list the ConfigMaps of kube-system", err, sa)
		_, err = client.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		wantDenied(t, "list the ConfigMaps of every namespace", err, sa, "at the cluster scope")
		_, err = client.CoreV1().ConfigMaps(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{})
		wantDenied(t, "watch the ConfigMaps of every namespace", err, sa)
		_, err = rollouts.Namespace(other).List(ctx, metav1.ListOptions{})
		wantDenied(t, "list the ConfigRollouts of another namespace", err, sa)
		_, err = rollouts.List(ctx, metav1.ListOptions{})
		wantDenied(t, "list the ConfigRollouts of every namespace", err, sa, "at the cluster scope")
		_, err = client.CoreV1().Events(other).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "x", Namespace: other},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: other, Name: "not-a-config"},
			Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{})
		wantDenied(t, "create an Event in another namespace", err, sa)

		// In its own namespace, only what the controller does.
		_, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, "any", metav1.GetOptions{})
		wantDenied(t, "get a ConfigMap of its namespace (it reads an informer)", err, sa)
		_, err = rollouts.Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion().String(), "kind": v1alpha1.Kind,
			"metadata": map[string]any{"name": "x"}, "spec": map[string]any{"configMapName": "x"},
		}}, metav1.CreateOptions{})
		wantDenied(t, "create a ConfigRollout", err, sa)
		_, err = client.CoreV1().Nodes().Get(ctx, "any", metav1.GetOptions{})
		wantDenied(t, "get a Node (it reads an informer)", err, sa)
		_, err = client.CoreV1().Nodes().Patch(ctx, "any", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
		wantDenied(t, "patch nodes/status", err, sa)
		_, err = client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
		wantDenied(t, "get another Lease", err, sa)
	})

	t.Run("run for another namespace", func(t *testing.T) {
		// --namespace other than the Role's: the informers' lists are
		// refused, so nothing is planned there (and the forbiddenLog
		// below does see refusals). It releases the Lease when it stops.
		ctx := testContext(t, time.Minute)
		forbidden := &forbiddenLog{}
		startRolloutControllerAs(ctx, t, cfg, replica{leaseNamespace: "kube-system", lease: "dynconfig-rollout", identity: "wrong", namespace: other, wrap: forbidden.wrap})
		want := []string{
			"/apis/dynconfig.io/v1alpha1/namespaces/" + other + "/configrollouts?",
			"/api/v1/namespaces/" + other + "/configmaps?",
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
			got := strings.Join(forbidden.all(), "\n")
			for _, w := range want {
				if !strings.Contains(got, "GET "+w) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("refused: %q; want lists of %q", forbidden.all(), want)
		}
	})

	// One replica, on the manifest's Lease, for the rollouts below.
	forbidden := &forbiddenLog{}
	rc := startRolloutControllerAs(ctx, t, cfg, replica{leaseNamespace: "kube-system", lease: "dynconfig-rollout", identity: "ns", namespace: namespace, wrap: forbidden.wrap})
	steps := func(s *v1alpha1.ConfigRolloutSpec) {
		s.Steps = []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("100%"))}
	}

	t.Run("completes", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		f := startFleet(ctx, t, h, "nsgood", 3, nil)
		ro := f.rollout("good", steps)
		f.waitPhase(ctx, ro, v1alpha1.PhaseCompleted)
		f.wantAll(ctx, f.newCM)
		f.wantEvent(ctx, ro, "Completed")
	})

	t.Run("halts and reverts", func(t *testing.T) {
		ctx := testContext(t, time.Minute)
		f := startFleet(ctx, t, h, "nsbad", 3, func(node string) bool { return strings.HasSuffix(node, "-001") })
		ro := f.rollout("bad", steps)
		got := f.waitPhase(ctx, ro, v1alpha1.PhaseHalted)
		if !strings.Contains(got.Status.Message, f.names[1]) {
			t.Errorf("halt message %q, want node %s", got.Status.Message, f.names[1])
		}
		f.waitReleased(ctx, ro)
		f.waitAll(ctx, f.oldCM)
		f.wantEvent(ctx, ro, "Halted")
	})

	if assigns, reverts := rc.patches(); assigns != 3+2 || reverts != 2 {
		t.Errorf("%d assignments, %d reverts; want 5 (3 completed, 2 halted) and 2", assigns, reverts)
	}
	if f := forbidden.all(); len(f) > 0 {
		t.Errorf("the controller was refused %d requests, e.g. %s", len(f), strings.Join(f[:min(len(f), 5)], "; "))
	}
}

// applyRBACNamespaced applies rbac-namespaced.yaml with its rollouts'
// namespace rewritten to ns.
func applyRBACNamespaced(ctx context.Context, t *testing.T, h *harness, ns string) {
	t.Helper()
	manifests, err := cluster.ReadManifests(rolloutRBACNamespaced)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	rewritten := 0
	for _, m := range manifests {
		if m.Object.GetNamespace() == rbacNamespacedDefault {
			m.Object.SetNamespace(ns)
			rewritten++
		}
		b, err := yaml.Marshal(m.Object.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	// The Role and its RoleBinding.
	if rewritten != 2 {
		t.Fatalf("%s: %d objects in namespace %s, want 2 (the Role and its RoleBinding)", rolloutRBACNamespaced, rewritten, rbacNamespacedDefault)
	}
	path := filepath.Join(t.TempDir(), "rbac-namespaced-"+ns+".yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cl.ApplyManifests(ctx, path); err != nil {
		t.Fatal(err)
	}
}

// waitAllowedIn waits until RBAC lets cfg's identity list what the
// namespaced controller lists.
func waitAllowedIn(ctx context.Context, t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	client := newClient(t, cfg, 50, 100)
	dyn := dynamic.NewForConfigOrDie(cfg)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		if _, last = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); last != nil {
			return false, nil
		}
		if _, last = client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1}); last != nil {
			return false, nil
		}
		_, last = dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the controller's ServiceAccount never got its grants in namespace %s: %v (last: %v)", ns, err, last)
	}
}

// forbiddenLog records the requests the API server answered 403.
type forbiddenLog struct {
	mu   sync.Mutex
	reqs []string
}

func (f *forbiddenLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.reqs = append(f.reqs, r.Method+" "+r.URL.RequestURI())
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *forbiddenLog) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}
