package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dynconfig/dynconfig/test/cluster"
)

// nodeNameExtra is the user info extra in which the API server names the
// Node of the Pod a ServiceAccount token is bound to.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// statusWriter is a subject that RBAC lets update or patch nodes/status, as
// the identity a request of it carries.
type statusWriter struct {
	// subject is the binding's subject, for messages.
	subject string
	user    string
	groups  []string
	// roles are the ClusterRoles that grant it the write, by binding:
	// "binding -> role".
	roles []string
	// dynconfig: one of the roles is a ClusterRole that deploy/ ships.
	dynconfig bool
}

// nodeStatusWriteRule reports whether an RBAC rule allows update or patch
// of nodes/status (of every Node), by RBAC's own matching: the core API
// group or "*", the resource "nodes/status", "*/status" or "*", the verb
// update, patch or "*", and no resourceNames.
func nodeStatusWriteRule(r rbacv1.PolicyRule) bool {
	group := slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, rbacv1.APIGroupAll)
	resource := slices.ContainsFunc(r.Resources, func(s string) bool {
		return s == "nodes/status" || s == "*/status" || s == rbacv1.ResourceAll
	})
	verb := slices.ContainsFunc(r.Verbs, func(s string) bool {
		return s == "update" || s == "patch" || s == rbacv1.VerbAll
	})
	return group && resource && verb && len(r.ResourceNames) == 0
}

// subjectIdentity is the user and groups a request of subject s carries
// (an impersonated member, for a group).
func subjectIdentity(s rbacv1.Subject) (user string, groups []string) {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		return "system:serviceaccount:" + s.Namespace + ":" + s.Name,
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
	case rbacv1.GroupKind:
		return "member-of:" + s.Name, []string{s.Name, "system:authenticated"}
	default:
		return s.Name, []string{"system:authenticated"}
	}
}

// nodeStatusWriters derives, from the API server's RBAC objects as they
// are (the bootstrap roles and bindings included), every subject that may
// update or patch nodes/status: the subjects of every ClusterRoleBinding
// whose ClusterRole has such a rule. A RoleBinding grants only within its
// namespace and a Node has none, so no RoleBinding can; the test confirms
// that for one. dynconfigRoles are the ClusterRoles deploy/ ships.
func nodeStatusWriters(ctx context.Context, t *testing.T, admin kubernetes.Interface, dynconfigRoles []string) []*statusWriter {
	t.Helper()
	roles, err := admin.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]bool{}
	for _, r := range roles.Items {
		writes[r.Name] = slices.ContainsFunc(r.Rules, nodeStatusWriteRule)
	}
	bindings, err := admin.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byUser := map[string]*statusWriter{}
	for _, b := range bindings.Items {
		if b.RoleRef.Kind != "ClusterRole" || !writes[b.RoleRef.Name] {
			continue
		}
		for _, s := range b.Subjects {
			user, groups := subjectIdentity(s)
			w := byUser[user]
			if w == nil {
				w = &statusWriter{subject: s.Kind + " " + strings.TrimPrefix(s.Namespace+"/", "/") + s.Name, user: user, groups: groups}
				byUser[user] = w
			}
			w.roles = append(w.roles, b.Name+" -> "+b.RoleRef.Name)
			w.dynconfig = w.dynconfig || slices.Contains(dynconfigRoles, b.RoleRef.Name)
		}
	}
	out := make([]*statusWriter, 0, len(byUser))
	for _, w := range byUser {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].user < out[j].user })
	return out
}

// shippedClusterRoles are the names of the ClusterRoles in the deploy/
// files the tests apply.
func shippedClusterRoles(t *testing.T) []string {
	t.Helper()
	paths := make([]string, len(deployManifests))
	for i, f := range deployManifests {
		paths[i] = filepath.Join(deployDir, f)
	}
	ms, err := cluster.ReadManifests(paths...)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		if m.Object.GetKind() == "ClusterRole" {
			names = append(names, m.Object.GetName())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no ClusterRole in %v", deployManifests)
	}
	return names
}

// impersonating is a client of the admin impersonating user in groups,
// with the token's node (nodeNameExtra) when node is set.
func impersonating(t *testing.T, cl *cluster.Cluster, user string, groups []string, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cl.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeNameExtra: {node}}
	}
	return newClient(t, cfg, 50, 100)
}

// probeStatusPatch is a dry-run strategic-merge PATCH of node's status
// that adds a condition, as any node-status writer's would.
func probeStatusPatch(ctx context.Context, c kubernetes.Interface, node string) error {
	patch := mustJSON(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: "example.com/StatusWriterProbe", Status: corev1.ConditionTrue, Reason: "Probe",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}})
	_, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
	return err
}

// TestAdmissionNodeStatusWriters derives from the real API server's RBAC
// every subject that may write nodes/status (the bootstrap roles, deploy/,
// and what a real cluster adds: node-problem-detector, node-feature-
// discovery's master, a group of node admins, a ServiceAccount bound to
// cluster-admin, a second dynconfig component), confirms each with a
// SubjectAccessReview, and impersonates each in a dry-run status PATCH of
// a Node. deploy/'s admission policies must let every one of them through,
// also with the token of a Pod on another Node (a controller's Pod runs
// somewhere), except dynconfig's own component identities: those write
// the Node their Pod runs on, and no other, and nothing without a Pod.
func TestAdmissionNodeStatusWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("real API server: skipped with -short")
	}
	ctx := testContext(t, 5*time.Minute)
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	admin := newClient(t, cl.Config, 200, 400)
	paths := make([]string, len(deployManifests))
	for i, f := range deployManifests {
		paths[i] = filepath.Join(deployDir, f)
	}
	if _, err := cl.ApplyManifests(ctx, paths...); err != nil {
		t.Fatal(err)
	}
	const nodeA, nodeB = "status-writers-a", "status-writers-b"
	for _, n := range []string{nodeA, nodeB} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// What a real cluster binds besides the bootstrap policy and deploy/.
	crb := func(name, role string, s rbacv1.Subject) {
		t.Helper()
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{s},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sa := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	// node-problem-detector's DaemonSet, on the bootstrap role made for it.
	crb("npd", "system:node-problem-detector", sa("kube-system", "node-problem-detector"))
	// node-feature-discovery's master writes extended resources of
	// every Node from one Pod, with a role of its own.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "nfd-master"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb("nfd-master", "nfd-master", sa("node-feature-discovery", "nfd-master"))
	// People who fix Nodes by hand, through a wildcard subresource rule.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-admin"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*/status"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb("node-admins", "node-admin", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "example:node-admins"})
	// A GitOps controller bound to cluster-admin.
	crb("gitops-admin", "cluster-admin", sa("gitops", "application-controller"))
	// A second dynconfig component, named nowhere in deploy/.
	crb("dynconfig:component:node-greeter", "dynconfig:component", sa("greeter-system", "node-greeter"))
	// A RoleBinding to a role with the rule grants nothing on Nodes.
	const roleBound = "system:serviceaccount:default:namespaced-npd"
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "namespaced-npd"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-problem-detector"},
		Subjects:   []rbacv1.Subject{sa("default", "namespaced-npd")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sar := func(ctx context.Context, user string, groups []string) (*authorizationv1.SubjectAccessReview, error) {
		return admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "patch", Resource: "nodes", Subresource: "status", Name: nodeA}},
		}, metav1.CreateOptions{})
	}
	writers := nodeStatusWriters(ctx, t, admin, shippedClusterRoles(t))
	// RBAC takes effect when the authorizer's informers see a binding:
	// wait for the last one created, then confirm every derived subject.
	for _, w := range writers {
		var last string
		if err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
			r, err := sar(ctx, w.user, w.groups)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprintf("allowed %t, reason %q", r.Status.Allowed, r.Status.Reason)
			return r.Status.Allowed, nil
		}); err != nil {
			t.Fatalf("RBAC's rules say %s (%s, through %v) may patch nodes/status; a SubjectAccessReview says not: %s", w.subject, w.user, w.roles, last)
		}
	}
	if r, err := sar(ctx, roleBound, []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}); err != nil || r.Status.Allowed {
		t.Errorf("a RoleBinding granted %s nodes/status (%+v, %v): the derivation from ClusterRoleBindings alone misses it", roleBound, r, err)
	}

	// The derivation finds what the test knows must be there: the
	// bootstrap controllers, cluster-admin's group, the subjects bound
	// above, and deploy/'s component.
	byUser := map[string]*statusWriter{}
	for _, w := range writers {
		byUser[w.user] = w
	}
	for _, u := range []string{
		"system:serviceaccount:kube-system:attachdetach-controller", "system:serviceaccount:kube-system:node-controller",
		"system:serviceaccount:kube-system:route-controller", "member-of:system:masters",
		"system:serviceaccount:kube-system:node-problem-detector", "system:serviceaccount:node-feature-discovery:nfd-master",
		"member-of:example:node-admins", "system:serviceaccount:gitops:application-controller",
		"system:serviceaccount:" + proxySANamespace + ":" + proxySAName, "system:serviceaccount:greeter-system:node-greeter",
	} {
		if byUser[u] == nil {
			t.Errorf("no subject %s among the %d derived from RBAC", u, len(writers))
		}
	}
	var own []string
	for _, w := range writers {
		if w.dynconfig {
			own = append(own, w.user)
		}
	}
	if want := []string{"system:serviceaccount:greeter-system:node-greeter", "system:serviceaccount:" + proxySANamespace + ":" + proxySAName}; !slices.Equal(own, want) {
		t.Errorf("dynconfig's own component identities derived: %v, want %v", own, want)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The policies are in force once the own-node one refuses the case
	// deploy/ names: kube-proxy-like's Pod on node A writing node B.
	proxy := byUser["system:serviceaccount:"+proxySANamespace+":"+proxySAName]
	var last error
	if err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last = probeStatusPatch(ctx, impersonating(t, cl, proxy.user, proxy.groups, nodeA), nodeB)
		return last != nil && strings.Contains(last.Error(), ownNodePolicy), nil
	}); err != nil {
		t.Fatalf("admission policy %s not enforced within %v: last %v", ownNodePolicy, waitTimeout, last)
	}

	for _, w := range writers {
		t.Run(w.user, func(t *testing.T) {
			if !w.dynconfig {
				// Anyone else's writer passes: with no Pod, and from a
				// Pod on another Node than the one it writes.
				for _, tokenNode := range []string{"", nodeB} {
					if err := probeStatusPatch(ctx, impersonating(t, cl, w.user, w.groups, tokenNode), nodeA); err != nil {
						t.Errorf("%s (through %v), token node %q: dry-run status PATCH of %s refused: %v; "+
							"deploy/ must not stop anyone else's node-status writer", w.subject, w.roles, tokenNode, nodeA, err)
					}
				}
				return
			}
			// dynconfig's own: its Pod's Node, and no other.
			if err := probeStatusPatch(ctx, impersonating(t, cl, w.user, w.groups, nodeA), nodeA); err != nil {
				t.Errorf("%s from a Pod on %s: status PATCH of its own Node refused: %v", w.user, nodeA, err)
			}
			for _, tokenNode := range []string{nodeB, ""} {
				err := probeStatusPatch(ctx, impersonating(t, cl, w.user, w.groups, tokenNode), nodeA)
				wantDenied(t, fmt.Sprintf("%s with token node %q writes the status of %s", w.user, tokenNode, nodeA), err,
					"ValidatingAdmissionPolicy '"+ownNodePolicy+"'", "may write the status of its own Node only")
			}
		})
	}

	// The Node authorizer's subjects, outside RBAC: a kubelet writes its
	// own Node's status (NodeRestriction keeps it there).
	t.Run("the kubelet of node A", func(t *testing.T) {
		nodeCfg, err := cl.NodeConfig(nodeA)
		if err != nil {
			t.Fatal(err)
		}
		if err := probeStatusPatch(ctx, newClient(t, nodeCfg, 5, 10), nodeA); err != nil {
			t.Errorf("the kubelet of %s: status PATCH of its Node refused: %v", nodeA, err)
		}
	})
}
