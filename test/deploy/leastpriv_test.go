package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// defaultInstall are the kustomizations of the default install (README,
// Install): their ClusterRoles hold only what is cluster-scoped.
var defaultInstall = []string{".", "overlays/one-namespace", "daemonset", "monitoring"}

// optIns are the kustomizations an operator adds on purpose, each saying
// in its own comments what it grants beyond the default.
var optIns = []string{"overlays/cluster-wide"}

// defaultClusterReads are the namespaced resources a ClusterRole of the
// default install may read, and the verbs: the rollout controller budgets
// a node's restart against the PodDisruptionBudgets of the pods on it
// (on by default, spec.podDisruptionBudgets), and the pods and budgets of
// a node are in any namespace, which no Role can reach. Read only; a grant
// beyond these verbs, or of another namespaced resource, fails. The
// stock kubelet's run role drains its Node as kubectl drain does, whose
// DaemonSet filter reads the DaemonSet that owns a pod of the node, in any
// namespace (kubelet-drain-rbac.yaml): DaemonSets get.
var defaultClusterReads = map[string][]string{
	"pods":                        {"list"},
	"policy/poddisruptionbudgets": {"list", "watch"},
	"apps/daemonsets":             {"get"},
}

// configNamespace is deploy/config-namespace.yaml's namespace, the only one
// where a shipped role may write ConfigMaps.
const configNamespace = "dynconfig-configs"

// requestVerbs are the verbs API requests carry (and RBAC's special ones:
// escalate, bind, impersonate, approve, sign, use). A rule whose verbs are
// none of these grants no request: dynconfig's marker rule (the own-node
// policy asks the authorizer about it) is one.
var requestVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
	"escalate", "bind", "impersonate", "approve", "sign", "use", rbacv1.VerbAll}

// readVerbs are the verbs that change nothing.
var readVerbs = []string{"get", "list", "watch"}

// scopeFunc says whether group/resource (a subresource as
// "resource/sub") is namespaced, and whether the API server serves it.
type scopeFunc func(group, resource string) (namespaced, served bool)

// staticScope is the scope of the resources the manifests name, for the
// build-only test (the apply test asks the API server instead). A resource
// missing here is reported, so that a new grant is looked at.
func staticScope(group, resource string) (namespaced, served bool) {
	namespaced, served = map[string]bool{
		"/nodes": false, "/nodes/status": false,
		"/configmaps": true, "/events": true, "/pods": true,
		"policy/poddisruptionbudgets":        true,
		"apps/daemonsets":                    true,
		"coordination.k8s.io/leases":         true,
		"dynconfig.io/configrollouts":        true,
		"dynconfig.io/configrollouts/status": true,
	}[group+"/"+resource]
	return namespaced, served
}

// discoveryScope asks the API server which resources it serves, and their
// scope.
func discoveryScope(t *testing.T, d discovery.DiscoveryInterface) scopeFunc {
	t.Helper()
	_, lists, err := d.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	scope := map[string]bool{}
	for _, l := range lists {
		group, _, _ := strings.Cut(l.GroupVersion, "/")
		if !strings.Contains(l.GroupVersion, "/") {
			group = "" // the core group, "v1"
		}
		for _, r := range l.APIResources {
			scope[group+"/"+r.Name] = r.Namespaced
		}
	}
	return func(group, resource string) (bool, bool) {
		namespaced, served := scope[group+"/"+resource]
		return namespaced, served
	}
}

// shippedRole is a Role or ClusterRole of a kustomization.
type shippedRole struct {
	kind, namespace, name, dir string
	rules                      []rbacv1.PolicyRule
}

func (r shippedRole) String() string {
	if r.namespace != "" {
		return fmt.Sprintf("%s %s/%s (%s)", r.kind, r.namespace, r.name, r.dir)
	}
	return fmt.Sprintf("%s %s (%s)", r.kind, r.name, r.dir)
}

// rolesOf returns the Roles and ClusterRoles among objs, and fails the
// test for one that no binding among objs refers to (a grant nobody gets
// is one nobody reviews).
func rolesOf(t *testing.T, dir string, objs []*unstructured.Unstructured) []shippedRole {
	t.Helper()
	bound := map[string]bool{}
	for _, o := range objs {
		switch o.GetKind() {
		case "RoleBinding":
			b := as[rbacv1.RoleBinding](t, o)
			ns := o.GetNamespace()
			if b.RoleRef.Kind == "ClusterRole" {
				ns = ""
			}
			bound[b.RoleRef.Kind+"/"+ns+"/"+b.RoleRef.Name] = true
		case "ClusterRoleBinding":
			b := as[rbacv1.ClusterRoleBinding](t, o)
			bound[b.RoleRef.Kind+"//"+b.RoleRef.Name] = true
		}
	}
	var out []shippedRole
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch o.GetKind() {
		case "Role":
			rules = as[rbacv1.Role](t, o).Rules
		case "ClusterRole":
			rules = as[rbacv1.ClusterRole](t, o).Rules
		default:
			continue
		}
		r := shippedRole{kind: o.GetKind(), namespace: o.GetNamespace(), name: o.GetName(), dir: dir, rules: rules}
		if !bound[r.kind+"/"+r.namespace+"/"+r.name] {
			t.Errorf("%s: no binding in %s refers to it", r, dir)
		}
		out = append(out, r)
	}
	return out
}

// leastPrivilege returns what role r grants beyond the rules every shipped
// role keeps; inDefault says r is part of the default install. No role is
// exempt by name:
//   - no wildcard group, resource or verb, and no escalate, bind,
//     impersonate, approve, sign or use; no Secrets;
//   - every resource it names is one the API server serves;
//   - ConfigMaps are written (create, update, patch, delete) only by a
//     Role in the config namespace;
//   - in the default install, a ClusterRole names only cluster-scoped
//     resources (and non-resource URLs), and the reads of
//     defaultClusterReads (the restart budget's pods and
//     PodDisruptionBudgets): everything else namespaced is a Role in the
//     namespace it is needed in;
//   - in an opt-in, a ClusterRole only reads namespaced resources, but for
//     dynconfig's own API (dynconfig.io) and Events.
//
// A rule whose verbs no request carries (dynconfig's own-node marker)
// grants nothing and is held to none of these but the first.
func leastPrivilege(r shippedRole, inDefault bool, scope scopeFunc) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, r.String()+": "+fmt.Sprintf(format, args...)) }
	for _, rule := range r.rules {
		if slices.Contains(rule.APIGroups, rbacv1.APIGroupAll) || slices.Contains(rule.Resources, rbacv1.ResourceAll) ||
			slices.Contains(rule.Verbs, rbacv1.VerbAll) || slices.Contains(rule.NonResourceURLs, rbacv1.NonResourceAll) {
			bad("rule %+v has a wildcard", rule)
		}
		for _, v := range rule.Verbs {
			if slices.Contains([]string{"escalate", "bind", "impersonate", "approve", "sign", "use"}, v) {
				bad("grants %s", v)
			}
		}
		if !slices.ContainsFunc(rule.Verbs, func(v string) bool { return slices.Contains(requestVerbs, v) }) {
			continue // a marker: no request has these verbs
		}
		writes := slices.ContainsFunc(rule.Verbs, func(v string) bool { return !slices.Contains(readVerbs, v) })
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				gr := strings.TrimPrefix(g+"/"+res, "/")
				namespaced, served := scope(g, res)
				switch {
				case res == "secrets":
					bad("grants %v on Secrets", rule.Verbs)
				case !served:
					bad("names %s, which the API server does not serve", gr)
				case g == "" && res == "configmaps" && writes && (r.kind != "Role" || r.namespace != configNamespace):
					bad("writes ConfigMaps (%v) outside a Role in %s", rule.Verbs, configNamespace)
				case r.kind == "ClusterRole" && namespaced && inDefault && !isSubset(rule.Verbs, defaultClusterReads[gr]):
					bad("grants %v on %s in every namespace: the default install holds namespaced grants to a Role (but the reads of defaultClusterReads)", rule.Verbs, gr)
				case r.kind == "ClusterRole" && namespaced && writes && g != "dynconfig.io" && !(g == "" && res == "events"):
					bad("writes %s (%v) in every namespace", gr, rule.Verbs)
				}
			}
		}
	}
	return out
}

// checkShippedRoles builds every kustomization and checks every Role and
// ClusterRole in it with leastPrivilege.
func checkShippedRoles(t *testing.T, fsys filesys.FileSystem, scope scopeFunc) {
	t.Helper()
	n := 0
	for _, dir := range append(slices.Clone(defaultInstall), optIns...) {
		for _, r := range rolesOf(t, dir, build(t, fsys, abs(t, dir))) {
			n++
			for _, p := range leastPrivilege(r, slices.Contains(defaultInstall, dir), scope) {
				t.Error(p)
			}
		}
	}
	if n < 10 {
		t.Errorf("checked %d roles; the manifests ship more", n)
	}
}

// TestShippedRolesLeastPrivilege checks every role the manifests ship
// against the rules of leastPrivilege, on the built kustomizations (the
// apply test checks them again with the API server's own scopes).
func TestShippedRolesLeastPrivilege(t *testing.T) {
	checkShippedRoles(t, filesys.MakeFsOnDisk(), staticScope)
}

// TestLeastPrivilegeRules: each rule of leastPrivilege catches what it is
// for (so that a pass above means something).
func TestLeastPrivilegeRules(t *testing.T) {
	rule := func(group, resource string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
	}
	for _, tc := range []struct {
		name      string
		r         shippedRole
		inDefault bool
		want      string // "" for no problem
	}{
		{"nodes cluster-wide", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "nodes", "list")}}, true, ""},
		{"the marker", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("dynconfig.io", "components", "own-node-only")}}, true, ""},
		{"ConfigMaps read cluster-wide in the default", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "configmaps", "get")}}, true, "in every namespace: the default install"},
		{"pods list cluster-wide in the default (the restart budget)", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "pods", "list")}}, true, ""},
		{"pods get cluster-wide in the default", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "pods", "list", "get")}}, true, "in every namespace: the default install"},
		{"PodDisruptionBudgets watched cluster-wide in the default", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("policy", "poddisruptionbudgets", "list", "watch")}}, true, ""},
		{"PodDisruptionBudgets patched cluster-wide in the default", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("policy", "poddisruptionbudgets", "patch")}}, true, "in every namespace: the default install"},
		{"pods list cluster-wide in an opt-in", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "pods", "list")}}, false, ""},
		{"ConfigMap create cluster-wide in an opt-in", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "configmaps", "create")}}, false, "writes ConfigMaps"},
		{"ConfigMap create in kube-system", shippedRole{kind: "Role", namespace: "kube-system", rules: []rbacv1.PolicyRule{rule("", "configmaps", "create")}}, true, "writes ConfigMaps"},
		{"ConfigMap create in the config namespace", shippedRole{kind: "Role", namespace: configNamespace, rules: []rbacv1.PolicyRule{rule("", "configmaps", "create")}}, true, ""},
		{"pods delete cluster-wide in an opt-in", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "pods", "delete")}}, false, "writes pods"},
		{"a wildcard", shippedRole{kind: "Role", namespace: configNamespace, rules: []rbacv1.PolicyRule{rule("", "configmaps", "*")}}, true, "wildcard"},
		{"secrets", shippedRole{kind: "Role", namespace: configNamespace, rules: []rbacv1.PolicyRule{rule("", "secrets", "get")}}, true, "Secrets"},
		{"a typo", shippedRole{kind: "Role", namespace: configNamespace, rules: []rbacv1.PolicyRule{rule("", "configmap", "get")}}, true, "does not serve"},
		{"impersonate", shippedRole{kind: "ClusterRole", rules: []rbacv1.PolicyRule{rule("", "nodes", "impersonate")}}, true, "grants impersonate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := func(g, r string) (bool, bool) {
				if g+"/"+r == "/secrets" {
					return true, true
				}
				return staticScope(g, r)
			}
			got := strings.Join(leastPrivilege(tc.r, tc.inDefault, scope), "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("leastPrivilege = %q, want %q", got, tc.want)
			}
		})
	}
}

// isSubset reports whether every verb of verbs is in allowed (false for an
// empty allowed).
func isSubset(verbs, allowed []string) bool {
	if len(allowed) == 0 {
		return false
	}
	for _, v := range verbs {
		if !slices.Contains(allowed, v) {
			return false
		}
	}
	return true
}
