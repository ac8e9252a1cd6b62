package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// What the manifests in deploy/ name; the tests apply those files as they
// are, so these must match them.
const (
	deployDir = "../../deploy"
	// configNamespace is the config namespace (deploy/config-namespace.yaml).
	configNamespace = "dynconfig-configs"
	// proxySANamespace/proxySAName is the kube-proxy-like ServiceAccount
	// (deploy/component-serviceaccount.yaml).
	proxySANamespace = "kube-system"
	proxySAName      = "kube-proxy-like"
	// operatorGroup is bound to dynconfigctl's role (deploy/dynconfigctl-rbac.yaml).
	operatorGroup = "dynconfig:operators"
	// assignmentPolicy names the ValidatingAdmissionPolicy and its binding
	// (deploy/admission-policy.yaml).
	assignmentPolicy = "dynconfig-assignment-guard"
	// ownNodePolicy names the policy that holds a ServiceAccount
	// component to its Pod's Node (deploy/component-serviceaccount.yaml).
	ownNodePolicy = "dynconfig-component-own-node"
	// proxyComponent is the kube-proxy-like component's name.
	proxyComponent = "kube-proxy"
)

// deployManifests are the files of deploy/ the tests apply, in order (the
// namespace first). deploy/rollout/ is the rollout controller's own.
var deployManifests = []string{
	"config-namespace.yaml",
	"component-serviceaccount.yaml",
	"kubelet-drain-rbac.yaml",
	"dynconfigctl-rbac.yaml",
	"admission-policy.yaml",
}

// identity is a least-privilege client of the API server.
type identity struct {
	user   string
	groups []string
	config *rest.Config
	client kubernetes.Interface
}

// lpHarness is a control plane with Node,RBAC authorization, the
// NodeRestriction admission plugin and the deploy/ manifests applied.
type lpHarness struct {
	cl    *cluster.Cluster
	admin kubernetes.Interface
	// node is where the components run; other is a second Node.
	node, other string
	// kubelet is the node's own identity (system:node:<node>), proxy the
	// kube-proxy-like ServiceAccount, operator a member of the operators
	// group.
	kubelet, proxy, operator identity
}

// newLPHarness starts the control plane, applies deploy/, creates a Node
// and the three identities, and waits until RBAC grants each of them its
// permissions and the admission policy is enforced.
func newLPHarness(ctx context.Context, t *testing.T) *lpHarness {
	t.Helper()
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	h := &lpHarness{cl: cl, admin: newClient(t, cl.Config, 200, 400), node: objectName(t, "node")}
	h.other = h.node + "-other"
	paths := make([]string, len(deployManifests))
	for i, f := range deployManifests {
		paths[i] = filepath.Join(deployDir, f)
	}
	if _, err := cl.ApplyManifests(ctx, paths...); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{h.node, h.other} {
		if _, err := h.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Node %s: %v", n, err)
		}
	}

	nodeCfg, err := cl.NodeConfig(h.node)
	if err != nil {
		t.Fatal(err)
	}
	h.kubelet = identity{user: cluster.NodeUserPrefix + h.node, groups: []string{cluster.NodeGroup}, config: nodeCfg}
	// The kube-proxy-like DaemonSet's Pod on the node, and the token its
	// projected volume would hold.
	saCfg, err := cl.PodTokenConfig(ctx, h.createProxyPod(ctx, t, h.node))
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = identity{user: "system:serviceaccount:" + proxySANamespace + ":" + proxySAName,
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + proxySANamespace}, config: saCfg}
	opCfg, err := cl.UserConfig("operator-alice", operatorGroup)
	if err != nil {
		t.Fatal(err)
	}
	h.operator = identity{user: "operator-alice", groups: []string{operatorGroup}, config: opCfg}
	for _, id := range []*identity{&h.kubelet, &h.proxy, &h.operator} {
		id.client = newClient(t, id.config, 50, 100)
	}

	// RBAC objects take effect when the authorizer's informers see them.
	cm := func(verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: configNamespace, Verb: verb, Resource: "configmaps"}
	}
	h.waitAllowed(ctx, t, h.kubelet, cm("watch"))
	h.waitAllowed(ctx, t, h.proxy, cm("watch"))
	h.waitAllowed(ctx, t, h.proxy, authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status", Name: h.node})
	h.waitAllowed(ctx, t, h.proxy, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "events"})
	h.waitAllowed(ctx, t, h.proxy, authorizationv1.ResourceAttributes{Verb: "watch", Resource: "nodes"})
	h.waitAllowed(ctx, t, h.operator, authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Name: h.node})
	h.waitAllowed(ctx, t, h.operator, cm("get"))
	h.waitPolicy(ctx, t)
	return h
}

// createProxyPod creates, as the admin, a kube-proxy-like Pod bound to
// node (no scheduler or kubelet runs: the Pod object is all a bound token
// needs).
func (h *lpHarness) createProxyPod(ctx context.Context, t *testing.T, node string) *corev1.Pod {
	t.Helper()
	pod, err := h.admin.CoreV1().Pods(proxySANamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: proxySAName + "-" + node, Namespace: proxySANamespace},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: proxySAName,
			Containers: []corev1.Container{{Name: "kube-proxy-like", Image: "kube-proxy-like"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the kube-proxy-like Pod on Node %s: %v", node, err)
	}
	return pod
}

// waitAllowed waits until a SubjectAccessReview says id may do ra.
func (h *lpHarness) waitAllowed(ctx context.Context, t *testing.T, id identity, ra authorizationv1.ResourceAttributes) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		sar, err := h.admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: id.user, Groups: id.groups, ResourceAttributes: &ra},
		}, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("allowed %t, reason %q", sar.Status.Allowed, sar.Status.Reason)
		return sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s never got %s %s/%s in namespace %q: %v; last: %s", id.user, ra.Verb, ra.Resource, ra.Subresource, ra.Namespace, err, last)
	}
}

// assignmentPatch is a JSON merge patch setting annotation key to value
// (nil removes it).
func assignmentPatch(key string, value *string) []byte {
	return []byte(mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{key: value}}}))
}

// waitPolicy waits until the admission policies are enforced: a dry-run
// patch by which the node assigns itself a config, and a dry-run status
// patch of another Node by the ServiceAccount, are rejected.
func (h *lpHarness) waitPolicy(ctx context.Context, t *testing.T) {
	t.Helper()
	v := `{"configMap":{"namespace":"` + configNamespace + `","name":"probe","uid":"probe","kubeletConfigKey":"kubelet"}}`
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = h.kubelet.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType,
			assignmentPatch(nodeapi.AssignmentAnnotation, &v), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), assignmentPolicy), nil
	})
	if err != nil {
		t.Fatalf("admission policy %s not enforced within %v: last dry-run patch by the node returned %v", assignmentPolicy, waitTimeout, last)
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = h.proxy.client.CoreV1().Nodes().Patch(ctx, h.other, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"example.com/probe":"x"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
		return last != nil && strings.Contains(last.Error(), ownNodePolicy), nil
	})
	if err != nil {
		t.Fatalf("admission policy %s not enforced within %v: last dry-run status patch of another Node by the ServiceAccount returned %v", ownNodePolicy, waitTimeout, last)
	}
}

// createConfigMap creates a ConfigMap in the config namespace as the admin.
func (h *lpHarness) createConfigMap(ctx context.Context, t *testing.T, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := h.admin.CoreV1().ConfigMaps(configNamespace).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: configNamespace}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s/%s: %v", configNamespace, name, err)
	}
	return cm
}

// operatorAssign does what `dynconfigctl assign` does, as the operator: it
// reads the Node and the ConfigMap (for its UID), then patches the Node's
// assignment annotation for component.
func (h *lpHarness) operatorAssign(ctx context.Context, t *testing.T, component string, cm *corev1.ConfigMap) {
	t.Helper()
	c := h.operator.client
	if _, err := c.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{}); err != nil {
		t.Fatalf("operator: get Node %s: %v", h.node, err)
	}
	got, err := c.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("operator: get ConfigMap %s/%s: %v", cm.Namespace, cm.Name, err)
	}
	v := assignmentFor(got)
	if _, err := c.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, assignmentPatch(nodeapi.AssignmentAnnotationFor(component), &v), metav1.PatchOptions{}); err != nil {
		t.Fatalf("operator: assigning %s/%s to component %s on Node %s: %v", cm.Namespace, cm.Name, component, h.node, err)
	}
}

// getNode reads the Node as the admin.
func (h *lpHarness) getNode(ctx context.Context, t *testing.T) *corev1.Node {
	t.Helper()
	n, err := h.admin.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Node %s: %v", h.node, err)
	}
	return n
}

// waitCondition waits until the Node's condition of component is want.
func (h *lpHarness) waitCondition(ctx context.Context, t *testing.T, component string, want status.Report) {
	t.Helper()
	typ := nodeapi.ConditionTypeFor(component)
	var last *corev1.NodeCondition
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last = status.FindType(h.getNode(ctx, t).Status.Conditions, typ)
		return last != nil && (status.Report{Status: last.Status, Reason: last.Reason, Message: last.Message}) == want, nil
	})
	if err != nil {
		t.Fatalf("Node %s: condition %s never became %+v: %v; last %+v", h.node, typ, want, err, last)
	}
}

// waitConfigStatus waits until the component's ConfigStatus annotation
// says it runs cm as assigned.
func (h *lpHarness) waitConfigStatus(ctx context.Context, t *testing.T, component string, cm *corev1.ConfigMap) {
	t.Helper()
	var last *nodeapi.ConfigStatus
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last, lastErr = nodeapi.ReadConfigStatus(h.getNode(ctx, t), component)
		return lastErr == nil && last != nil && last.Active != nil && last.Active.ConfigMap != nil &&
			last.Active.ConfigMap.UID == cm.UID && last.Assigned != nil && last.Assigned.ConfigMap != nil &&
			last.Assigned.ConfigMap.UID == cm.UID, nil
	})
	if err != nil {
		t.Fatalf("Node %s: %s annotation never said %s runs ConfigMap %s (UID %s): %v; last %+v, error %v",
			h.node, nodeapi.StatusAnnotationFor(component), component, cm.Name, cm.UID, err, last, lastErr)
	}
}

// runComponent builds a Controller through Options.Cluster (the remote
// source, the Node reporter and the Event recorder of o.Component, all on
// client), bootstraps it and runs it until the test ends. The component
// reloads in process.
func runComponent[T any](ctx context.Context, t *testing.T, client kubernetes.Interface, node string, o dynconfig.Options[T]) {
	t.Helper()
	o.Cluster = &dynconfig.Cluster{Client: client, NodeName: node}
	o.StateDir = filepath.Join(t.TempDir(), "state")
	o.ComponentVersion = componentVersion
	o.Reload = func(context.Context, *T) error { return nil }
	c, err := dynconfig.New(o)
	if err != nil {
		t.Fatalf("dynconfig.New for component %q: %v", o.Component, err)
	}
	if _, err := c.Bootstrap(ctx); err != nil {
		_ = c.Close()
		t.Fatalf("Bootstrap of component %q: %v", o.Component, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run of component %q: %v", o.Component, err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run of component %q did not return within %v of its context's end", o.Component, waitTimeout)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close of component %q: %v", o.Component, err)
		}
	})
}

// wantDenied checks that err is a Forbidden error whose message contains
// every one of want.
func wantDenied(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed; want it forbidden", what)
		return
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v; want a Forbidden error", what, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", what, err, w)
		}
	}
}

// TestLeastPrivilege runs the API server with Node,RBAC authorization and
// the NodeRestriction admission plugin, applies deploy/, and runs a
// kubelet-like component on the node's own client certificate and a
// kube-proxy-like one on its ServiceAccount's token (bound to a Pod on the
// Node), on one Node. Each identity can do its job and nothing the
// manifests do not grant: the components read only the config namespace,
// the node cannot assign itself a config (the admission policy, not RBAC,
// stops it), nobody assigns through nodes/status, the ServiceAccount
// writes the status of its Pod's Node only, and the operator assigns.
func TestLeastPrivilege(t *testing.T) {
	if testing.Short() {
		t.Skip("real API server: skipped with -short")
	}
	ctx := testContext(t, 5*time.Minute)
	h := newLPHarness(ctx, t)

	kcm := h.createConfigMap(ctx, t, "kubelet-a", map[string]string{kubelet.PayloadKey: kubeletPayload(42)})
	pcm := h.createConfigMap(ctx, t, "kube-proxy-a", map[string]string{kubeproxy.Profile{}.PayloadKey(): kubeProxyPayload("10.1.0.0/16")})
	h.operatorAssign(ctx, t, nodeapi.DefaultComponent, kcm)
	h.operatorAssign(ctx, t, proxyComponent, pcm)

	// Everything works with least privilege: each component resolves its
	// assignment from the config namespace, reports its condition and
	// its ConfigStatus, and records Events.
	runComponent(ctx, t, h.kubelet.client, h.node, dynconfig.Options[kubeletConfig]{Profile: kubelet.Profile{}})
	runComponent(ctx, t, h.proxy.client, h.node, dynconfig.Options[kubeproxyv1alpha1.KubeProxyConfiguration]{
		Component: proxyComponent, Profile: kubeproxy.Profile{}})
	h.waitCondition(ctx, t, nodeapi.DefaultComponent, currentReport(kcm))
	h.waitCondition(ctx, t, proxyComponent, currentReport(pcm))
	h.waitConfigStatus(ctx, t, nodeapi.DefaultComponent, kcm)
	h.waitConfigStatus(ctx, t, proxyComponent, pcm)

	t.Run("reads outside the config namespace are forbidden", func(t *testing.T) {
		other, err := h.admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "not-a-config"}, Data: map[string]string{kubelet.PayloadKey: kubeletPayload(7)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []identity{h.kubelet, h.proxy} {
			_, err := id.client.CoreV1().ConfigMaps(other.Namespace).Get(ctx, other.Name, metav1.GetOptions{})
			wantDenied(t, id.user+" get ConfigMap default/not-a-config", err, `configmaps "not-a-config" is forbidden`)
			_, err = id.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
			wantDenied(t, id.user+" list ConfigMaps in kube-system", err, "cannot list resource")
			_, err = id.client.CoreV1().ConfigMaps(configNamespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "written-by-a-component"}}, metav1.CreateOptions{})
			wantDenied(t, id.user+" create a ConfigMap in the config namespace", err, "cannot create resource")
		}
		// The node reads its own Node only (Node authorizer).
		_, err = h.kubelet.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		wantDenied(t, "the node lists all Nodes", err, "only its own Node object")
	})

	t.Run("a node may get DaemonSets (the drain), not list or change them", func(t *testing.T) {
		_, err := h.kubelet.client.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "no-such-daemonset", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("the node gets a DaemonSet: %v, want NotFound (allowed)", err)
		}
		_, err = h.kubelet.client.AppsV1().DaemonSets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		wantDenied(t, "the node lists DaemonSets", err, "cannot list resource")
		err = h.kubelet.client.AppsV1().DaemonSets(metav1.NamespaceSystem).Delete(ctx, "no-such-daemonset", metav1.DeleteOptions{})
		wantDenied(t, "the node deletes a DaemonSet", err, "cannot delete resource")
	})

	t.Run("a node cannot change its own assignment", func(t *testing.T) {
		before := h.getNode(ctx, t).Annotations
		bogus := `{"configMap":{"namespace":"` + configNamespace + `","name":"kube-proxy-a","uid":"` + string(pcm.UID) + `","kubeletConfigKey":"kubelet"}}`
		for _, tc := range []struct {
			name  string
			patch []byte
		}{
			{"set the kubelet's", assignmentPatch(nodeapi.AssignmentAnnotation, &bogus)},
			{"remove the kubelet's", assignmentPatch(nodeapi.AssignmentAnnotation, nil)},
			{"set kube-proxy's", assignmentPatch(nodeapi.AssignmentAnnotationFor(proxyComponent), &bogus)},
			{"add a new component's", assignmentPatch(nodeapi.AssignmentAnnotationFor("new-agent"), &bogus)},
		} {
			_, err := h.kubelet.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, tc.patch, metav1.PatchOptions{})
			wantDenied(t, "node patches its Node to "+tc.name+" assignment", err,
				"ValidatingAdmissionPolicy '"+assignmentPolicy+"'", "may not change its config assignment")
		}
		if got := h.getNode(ctx, t).Annotations; got[nodeapi.AssignmentAnnotation] != before[nodeapi.AssignmentAnnotation] ||
			got[nodeapi.AssignmentAnnotationFor(proxyComponent)] != before[nodeapi.AssignmentAnnotationFor(proxyComponent)] {
			t.Errorf("assignments changed by denied patches: before %v, after %v", before, got)
		}
		// The node may still change its other annotations: the policy
		// looks at assignments only.
		other := "yes"
		if _, err := h.kubelet.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType,
			assignmentPatch("example.com/unrelated", &other), metav1.PatchOptions{}); err != nil {
			t.Errorf("node patches an unrelated annotation of its Node: %v", err)
		}
		// A node registering its Node object cannot bring an assignment
		// along; without one it registers.
		newNode := h.node + "-new"
		newCfg, err := h.cl.NodeConfig(newNode)
		if err != nil {
			t.Fatal(err)
		}
		fresh := newClient(t, newCfg, 5, 10)
		_, err = fresh.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: newNode,
			Annotations: map[string]string{nodeapi.AssignmentAnnotation: bogus}}}, metav1.CreateOptions{})
		wantDenied(t, "a node registers with an assignment", err,
			"ValidatingAdmissionPolicy '"+assignmentPolicy+"'", "may not change its config assignment (dynconfig.io/config-source)")
		if _, err := fresh.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: newNode}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("a node registers without an assignment: %v", err)
		}
		// And NodeRestriction keeps it off other Nodes.
		_, err = h.kubelet.client.CoreV1().Nodes().Patch(ctx, h.other, types.MergePatchType, assignmentPatch("example.com/unrelated", &other), metav1.PatchOptions{})
		wantDenied(t, "node patches another Node", err, "is not allowed to modify node")
	})

	t.Run("nobody changes an assignment through nodes/status", func(t *testing.T) {
		// A value no annotation has: every patch below is a change.
		bogus := `{"configMap":{"namespace":"` + configNamespace + `","name":"elsewhere","uid":"0000","kubeletConfigKey":"kubelet"}}`
		for _, id := range []identity{h.kubelet, h.proxy, {user: "admin", client: h.admin}} {
			// The node's own write is stopped by the node rule, which
			// comes first; the others by the status rule.
			why := "nodes/status subresource may not change a config assignment"
			if id.user == h.kubelet.user {
				why = "may not change its config assignment"
			}
			for _, key := range []string{nodeapi.AssignmentAnnotation, nodeapi.AssignmentAnnotationFor(proxyComponent)} {
				for _, value := range []*string{&bogus, nil} {
					what := fmt.Sprintf("%s patches nodes/status to set %s to %v", id.user, key, value != nil)
					_, err := id.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, assignmentPatch(key, value), metav1.PatchOptions{}, "status")
					wantDenied(t, what, err, "ValidatingAdmissionPolicy '"+assignmentPolicy+"'", why)
				}
			}
		}
		// The ServiceAccount has no grant to patch the Node itself.
		_, err := h.proxy.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, assignmentPatch(nodeapi.AssignmentAnnotationFor(proxyComponent), &bogus), metav1.PatchOptions{})
		wantDenied(t, "the ServiceAccount patches the Node", err, "cannot patch resource")
	})

	t.Run("components still write their condition and ConfigStatus", func(t *testing.T) {
		for _, tc := range []struct {
			id        identity
			component string
		}{{h.kubelet, nodeapi.DefaultComponent}, {h.proxy, proxyComponent}} {
			cs := &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal, Error: "written by the test"}
			v, err := cs.MarshalAnnotation()
			if err != nil {
				t.Fatal(err)
			}
			cond := corev1.NodeCondition{Type: nodeapi.ConditionTypeFor(tc.component), Status: corev1.ConditionUnknown,
				Reason: "written by the test", Message: "test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
			patch := mustJSON(map[string]any{
				"metadata": map[string]any{"annotations": map[string]string{nodeapi.StatusAnnotationFor(tc.component): v}},
				"status":   map[string]any{"conditions": []corev1.NodeCondition{cond}},
			})
			if _, err := tc.id.client.CoreV1().Nodes().Patch(ctx, h.node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				t.Errorf("%s writes condition %s and annotation %s through nodes/status: %v",
					tc.id.user, cond.Type, nodeapi.StatusAnnotationFor(tc.component), err)
				continue
			}
			got, err := nodeapi.ReadConfigStatus(h.getNode(ctx, t), tc.component)
			if err != nil || got == nil || got.Error != cs.Error {
				t.Errorf("%s: ConfigStatus read back %+v, %v; want the one written", tc.component, got, err)
			}
		}
	})

	t.Run("a ServiceAccount component writes its own Node's status only", func(t *testing.T) {
		patch := []byte(`{"metadata":{"annotations":{"` + nodeapi.StatusAnnotationFor(proxyComponent) + `":"{\"phase\":\"Local\"}"}}}`)
		// The token of the Pod on this Node, writing another Node.
		_, err := h.proxy.client.CoreV1().Nodes().Patch(ctx, h.other, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		wantDenied(t, "the Pod on "+h.node+" patches the status of "+h.other, err,
			"ValidatingAdmissionPolicy '"+ownNodePolicy+"'", "its token is bound to a Pod on "+h.node+")")
		// A token bound to no Pod.
		unbound, err := h.cl.ServiceAccountConfig(ctx, proxySANamespace, proxySAName)
		if err != nil {
			t.Fatal(err)
		}
		_, err = newClient(t, unbound, 5, 10).CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		wantDenied(t, "an unbound token of the ServiceAccount patches Node status", err,
			"ValidatingAdmissionPolicy '"+ownNodePolicy+"'", "its token is bound to no Pod on a Node")
		// The Pod on the other Node writes that Node, not this one.
		otherCfg, err := h.cl.PodTokenConfig(ctx, h.createProxyPod(ctx, t, h.other))
		if err != nil {
			t.Fatal(err)
		}
		otherClient := newClient(t, otherCfg, 5, 10)
		if _, err := otherClient.CoreV1().Nodes().Patch(ctx, h.other, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("the Pod on %s patches its own Node's status: %v", h.other, err)
		}
		_, err = otherClient.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		wantDenied(t, "the Pod on "+h.other+" patches the status of "+h.node, err, "ValidatingAdmissionPolicy '"+ownNodePolicy+"'")
	})

	t.Run("the operator assigns with dynconfigctl", func(t *testing.T) {
		ctl := dynconfigctlBin.Build(t)
		kubeconfig := writeKubeConfig(t, h.operator.config)
		kcm2 := h.createConfigMap(ctx, t, "kubelet-b", map[string]string{kubelet.PayloadKey: kubeletPayload(43)})
		pcm2 := h.createConfigMap(ctx, t, "kube-proxy-b", map[string]string{kubeproxy.Profile{}.PayloadKey(): kubeProxyPayload("10.2.0.0/16")})
		runCtl(t, ctl, "assign", "--kubeconfig="+kubeconfig, "--node="+h.node, "--configmap="+configNamespace+"/"+kcm2.Name)
		runCtl(t, ctl, "assign", "--kubeconfig="+kubeconfig, "--node="+h.node, "--configmap="+configNamespace+"/"+pcm2.Name,
			"--component="+proxyComponent)
		h.waitCondition(ctx, t, nodeapi.DefaultComponent, currentReport(kcm2))
		h.waitCondition(ctx, t, proxyComponent, currentReport(pcm2))
		h.waitConfigStatus(ctx, t, nodeapi.DefaultComponent, kcm2)
		h.waitConfigStatus(ctx, t, proxyComponent, pcm2)

		// status reads the fleet (list) and one Node (get) with the
		// operator's grant.
		for _, args := range [][]string{{}, {h.node}} {
			out := runCtl(t, ctl, append([]string{"status", "--kubeconfig=" + kubeconfig, "-o", "json"}, args...)...)
			var list struct {
				Items []struct {
					Node      string                `json:"node"`
					Component string                `json:"component"`
					Status    *nodeapi.ConfigStatus `json:"status"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatalf("dynconfigctl status %v -o json: %v\n%s", args, err, out)
			}
			active := map[string]types.UID{}
			for _, it := range list.Items {
				if it.Node == h.node && it.Status != nil && it.Status.Active != nil && it.Status.Active.ConfigMap != nil {
					active[it.Component] = it.Status.Active.ConfigMap.UID
				}
			}
			want := map[string]types.UID{nodeapi.DefaultComponent: kcm2.UID, proxyComponent: pcm2.UID}
			if diff := cmp.Diff(want, active); diff != "" {
				t.Errorf("dynconfigctl status %v: active configs on %s (-want +got):\n%s\n%s", args, h.node, diff, out)
			}
		}

		// The operator's grant is not a component's: it cannot write
		// Node status.
		_, err := h.operator.client.CoreV1().Nodes().Patch(ctx, h.node, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"example.com/x":"y"}}}`), metav1.PatchOptions{}, "status")
		wantDenied(t, "operator patches nodes/status", err, "cannot patch resource")
	})

	// Events from both identities reached the API server: each recorded
	// its change to the operator's second assignment.
	for _, reason := range []string{status.EventReasonConfigChanged} {
		evs, err := listEvents(ctx, &harness{client: h.admin}, h.node, reason)
		if err != nil {
			t.Fatal(err)
		}
		sources := map[string]bool{}
		for _, ev := range evs {
			sources[ev.Source.Component] = true
		}
		if len(sources) < 2 {
			t.Errorf("%s Events of Node %s come from %v; want both components'", reason, h.node, sources)
		}
	}
}

// writeKubeConfig writes cfg as a kubeconfig file of the test.
func writeKubeConfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	data, err := cluster.KubeConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCtl runs dynconfigctl with args, fails the test unless it exits 0,
// and returns its stdout.
func runCtl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dynconfigctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// kubeProxyPayload is a valid KubeProxyConfiguration whose clusterCIDR
// tells the configs apart.
func kubeProxyPayload(clusterCIDR string) string {
	return "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: " + clusterCIDR + "\n"
}
