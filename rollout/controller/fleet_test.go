package controller

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// realisticNode reads testdata/node.json: a worker Node shaped on what a
// v1.37 kubelet, kubeadm, kube-controller-manager, a CNI and a CSI
// driver write (labels, managedFields as the API server stores them,
// five conditions, addresses, 20 images, capacity, nodeInfo) and the
// dynconfig assignment and status; strictly decoded.
func realisticNode(t testing.TB) *corev1.Node {
	t.Helper()
	raw, err := os.ReadFile("testdata/node.json")
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	strict, err := sigsjson.UnmarshalStrict(raw, &n)
	if err != nil || len(strict) > 0 {
		t.Fatalf("testdata/node.json: %v %v", err, strict)
	}
	return &n
}

// TestCachedNodeKeepsWhatIsRead: the controller decides the same on the
// Nodes it caches (CachedNode) as on the whole Nodes. A fleet of varied
// Nodes (labels, assignments, claims and statuses of two components,
// conditions that turned, and everything a real Node carries besides) is
// put in two caches, whole and stripped; for rollouts of each component
// the nodes observed, the other rollouts' nodes, the known-bad reports,
// the plan (status, patches, events), the Node-event routes and the
// health gates' verdicts must be the same.
func TestCachedNodeKeepsWhatIsRead(t *testing.T) {
	tmpl := realisticNode(t)
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	assignedAt := now.Add(-10 * time.Minute)
	cm := func(name string) *corev1.NodeConfigSource {
		return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "cfg", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7", KubeletConfigKey: "kubelet",
		}}
	}
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	status := func(phase nodeapi.ConfigPhase, name string) string {
		st := nodeapi.ConfigStatus{Phase: phase, Assigned: cm(name), Active: cm(name)}
		if phase == nodeapi.PhaseRolledBack {
			st.Active, st.LastKnownGood, st.Error = cm("old"), cm("old"), "failed to validate"
		}
		v, err := st.MarshalAnnotation()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	claim := func(ns, name, uid, failed string) string {
		v, err := nodeapi.EncodeClaim(&nodeapi.Claim{Namespace: ns, Name: name, UID: types.UID(uid), Previous: cm("old"),
			AssignedAt: metav1.NewTime(assignedAt), Failed: failed})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var nodes []*corev1.Node
	for i := range 40 {
		n := tmpl.DeepCopy()
		n.Name = fmt.Sprintf("node-%03d", i)
		n.UID = types.UID(fmt.Sprintf("node-uid-%03d", i))
		n.ResourceVersion = fmt.Sprint(1000 + i)
		n.Labels["kubernetes.io/hostname"] = n.Name
		n.Labels["topology.kubernetes.io/zone"] = []string{"a", "b", "c"}[i%3]
		if i%7 == 0 {
			delete(n.Labels, "node-role.kubernetes.io/worker")
		}
		n.Annotations["example.com/unrelated"] = fmt.Sprint(i)
		kubeletKey, proxyKey := nodeapi.AssignmentAnnotationFor(""), nodeapi.AssignmentAnnotationFor("kube-proxy")
		switch i % 5 {
		case 0: // on the old config
			n.Annotations[kubeletKey] = enc(cm("old"))
			n.Annotations[nodeapi.StatusAnnotationFor("")] = status(nodeapi.PhasePromoted, "old")
		case 1: // assigned by the rollout, in trial
			n.Annotations[kubeletKey] = enc(cm("new"))
			n.Annotations[nodeapi.ClaimAnnotationFor("")] = claim("cfg", "kubelet-new", "ro-uid-1", "")
			n.Annotations[nodeapi.StatusAnnotationFor("")] = status(nodeapi.PhaseTrial, "new")
		case 2: // promoted
			n.Annotations[kubeletKey] = enc(cm("new"))
			n.Annotations[nodeapi.ClaimAnnotationFor("")] = claim("cfg", "kubelet-new", "ro-uid-1", "")
			n.Annotations[nodeapi.StatusAnnotationFor("")] = status(nodeapi.PhasePromoted, "new")
		case 3: // rolled back, reports the new config bad
			n.Annotations[kubeletKey] = enc(cm("new"))
			n.Annotations[nodeapi.ClaimAnnotationFor("")] = claim("cfg", "kubelet-new", "ro-uid-1", "")
			n.Annotations[nodeapi.StatusAnnotationFor("")] = status(nodeapi.PhaseRolledBack, "new")
		case 4: // held by another rollout; an unreadable status
			n.Annotations[kubeletKey] = enc(cm("other"))
			n.Annotations[nodeapi.ClaimAnnotationFor("")] = claim("cfg", "kubelet-other", "ro-uid-2", "")
			n.Annotations[nodeapi.StatusAnnotationFor("")] = "{not json"
		}
		if i%2 == 0 { // a second component
			n.Annotations[proxyKey] = enc(cm("proxy"))
			n.Annotations[nodeapi.StatusAnnotationFor("kube-proxy")] = status(nodeapi.PhaseTrial, "proxy")
		}
		// Conditions that turned after the assignment, some long ago.
		for j := range n.Status.Conditions {
			c := &n.Status.Conditions[j]
			c.LastHeartbeatTime = metav1.NewTime(now.Add(-time.Duration(i) * time.Second))
			switch {
			case c.Type == corev1.NodeReady && i%6 == 1:
				c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", fmt.Sprintf("container runtime is down (%d)", i)
				c.LastTransitionTime = metav1.NewTime(now.Add(-time.Duration(i) * time.Minute))
			case c.Type == corev1.NodeMemoryPressure && i%8 == 2:
				c.Status, c.Reason, c.Message = corev1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"
				c.LastTransitionTime = metav1.NewTime(assignedAt.Add(time.Minute))
			}
		}
		if i%9 == 4 {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "example.com/AgentHealthy", Status: corev1.ConditionFalse,
				Reason: "Crashing", Message: "agent exits", LastTransitionTime: metav1.NewTime(assignedAt.Add(time.Second))})
		}
		nodes = append(nodes, n)
	}

	rollout := func(name, uid, component string, sel map[string]string, phase v1alpha1.RolloutPhase) *v1alpha1.ConfigRollout {
		ro := &v1alpha1.ConfigRollout{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "cfg", Name: name, UID: types.UID(uid), Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Spec: v1alpha1.ConfigRolloutSpec{
				ConfigMapName: "new", Component: component, MaxUnavailable: ptr.To(intstr.FromString("50%")), MaxFailures: 3,
				Steps:    []v1alpha1.RolloutStep{{Nodes: ptr.To(intstr.FromString("25%"))}, {Nodes: ptr.To(intstr.FromString("100%"))}},
				Analysis: &v1alpha1.RolloutAnalysis{ComponentConditions: []string{"example.com/AgentHealthy"}},
			},
			Status: v1alpha1.ConfigRolloutStatus{Phase: phase, ObservedGeneration: 1},
		}
		if sel != nil {
			ro.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: sel}
		}
		if phase == v1alpha1.PhaseProgressing {
			ro.Status.ConfigMap = &v1alpha1.ConfigMapRef{UID: "uid-new", ResourceVersion: "7"}
			ro.Status.StepStartedAt = ptr.To(metav1.NewTime(assignedAt))
		}
		return ro
	}
	rollouts := []*v1alpha1.ConfigRollout{
		rollout("kubelet-new", "ro-uid-1", "", map[string]string{"node-role.kubernetes.io/worker": ""}, v1alpha1.PhaseProgressing),
		rollout("kubelet-other", "ro-uid-2", "", map[string]string{"topology.kubernetes.io/zone": "b"}, v1alpha1.PhaseProgressing),
		rollout("kubelet-pending", "ro-uid-3", "", map[string]string{"pool": "general-purpose"}, v1alpha1.PhasePending),
		rollout("proxy", "ro-uid-4", "kube-proxy", nil, v1alpha1.PhaseProgressing),
		rollout("by-host", "ro-uid-5", "kube-proxy", nil, v1alpha1.PhasePending),
	}
	// A selector on the hostname label, which the cache keeps as a mark.
	rollouts[4].Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: []string{"node-004", "node-010", "node-020"}},
	}}

	newRunner := func(strip bool) *runner {
		r := &runner{
			c:        &Controller{opts: Options{KnownBadNodes: 1}},
			routes:   map[string]route{},
			nodes:    cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Node{}, 0, cache.Indexers{}),
			rollouts: cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{}),
		}
		r.nodeCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.Background(), r.nodes.GetStore(), cache.MutationCacheOptions{})
		for _, n := range nodes {
			// Whole: all of the Node's metadata and conditions, as they
			// came (the rest of a Node is read nowhere: the runner keeps
			// none of it).
			var obj any = newNodeFacts(n.ObjectMeta.DeepCopy(), n.Status.Conditions)
			if strip {
				obj, _ = CachedNode(n.DeepCopy())
			}
			if err := r.nodes.GetStore().Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		for _, ro := range rollouts {
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: raw}
			if err := r.rollouts.GetStore().Add(u); err != nil {
				t.Fatal(err)
			}
			r.setRoute(u)
		}
		return r
	}
	full, stripped := newRunner(false), newRunner(true)

	// What each decision reads, on both caches.
	type decision struct {
		Observed   []plan.Node
		Others     []plan.Other
		BadReports []plan.BadReport
		Result     plan.Result
	}
	decide := func(r *runner, ro *v1alpha1.ConfigRollout) decision {
		sel, err := selectorOf(ro)
		if err != nil {
			t.Fatal(err)
		}
		in := plan.Input{Rollout: ro.DeepCopy(), Now: now, Scope: "cfg",
			ConfigMap: &plan.ConfigMap{UID: "uid-new", ResourceVersion: "7", HasKey: true, Immutable: true}}
		// The caches list in no order: sorted, both runs plan alike.
		in.Nodes = r.observeNodes(ro, sel, ro.Spec.Component)
		slices.SortFunc(in.Nodes, func(a, b plan.Node) int { return cmp.Compare(a.Name, b.Name) })
		in.Others = r.others(ro)
		slices.SortFunc(in.Others, func(a, b plan.Other) int { return cmp.Compare(a.Name, b.Name) })
		r.fleetInput(ro, &in)
		slices.SortFunc(in.BadReports, func(a, b plan.BadReport) int { return cmp.Compare(a.Node, b.Node) })
		d := decision{Observed: in.Nodes, Others: in.Others, BadReports: in.BadReports}
		d.Result = plan.Plan(in)
		return d
	}
	for _, ro := range rollouts {
		a, b := decide(full, ro), decide(stripped, ro)
		if diff := gocmp.Diff(a, b); diff != "" {
			t.Errorf("rollout %s (component %q): the cached Nodes lead to another decision (-whole +cached):\n%s", ro.Name, ro.Spec.Component, diff)
		}
		if len(a.Observed) == 0 || len(a.Result.Patches) == 0 && ro.Status.Phase == v1alpha1.PhaseProgressing {
			t.Errorf("rollout %s: %d nodes observed, %d patches: the fleet exercises nothing", ro.Name, len(a.Observed), len(a.Result.Patches))
		}
	}

	// The Node-event routes and the health gates' verdicts.
	verdicts := 0
	for _, n := range nodes {
		c, _ := CachedNode(n.DeepCopy())
		cf := c.(*nodeFacts)
		cn := cf.node() // what the gates read
		for key, rt := range full.routes {
			if got, want := full.routeMatches(rt, []*nodeFacts{cf}), full.routeMatches(rt, []*nodeFacts{newNodeFacts(&n.ObjectMeta, nil)}); got != want {
				t.Errorf("node %s, rollout %s: routed %v when cached, %v whole", n.Name, key, got, want)
			}
		}
		for _, ro := range rollouts {
			for _, at := range []time.Time{assignedAt, now.Add(-time.Hour)} {
				f1, p1 := nodeVerdict(ro.Spec.Analysis, n, at, now)
				f2, p2 := nodeVerdict(ro.Spec.Analysis, cn, at, now)
				if f1 != f2 || p1 != p2 {
					t.Errorf("node %s: verdict %q (pending %v) when cached, %q (pending %v) whole", n.Name, f2, p2, f1, p1)
				}
				if f1 != "" {
					verdicts++
				}
			}
		}
		if !sameConditions(n.Status.Conditions, cf.Conditions()) {
			t.Errorf("node %s: the cached conditions differ from the whole ones in what a Node event compares", n.Name)
		}
	}
	if verdicts == 0 {
		t.Error("no node failed a gate: the fleet exercises nothing")
	}

	// Stripped once is stripped: the informer may transform its own
	// objects again.
	once, _ := CachedNode(nodes[1].DeepCopy())
	twice, _ := CachedNode(once.(*nodeFacts).DeepCopyObject())
	if diff := gocmp.Diff(once, twice, gocmp.AllowUnexported(nodeFacts{}, condSet{})); diff != "" {
		t.Errorf("CachedNode is not idempotent:\n%s", diff)
	}
	if again, _ := CachedNode(nodes[1].DeepCopy()); gocmp.Diff(once, again, gocmp.AllowUnexported(nodeFacts{}, condSet{})) != "" {
		t.Errorf("CachedNode of the same Node differs")
	}
	whole, _ := json.Marshal(nodes[1])
	cached, _ := json.Marshal(once.(*nodeFacts).node())
	t.Logf("a Node of testdata/node.json: %d bytes of JSON whole, %d cached", len(whole), len(cached))
	if other, _ := CachedNode("not a node"); other != "not a node" {
		t.Errorf("CachedNode changed a non-Node: %v", other)
	}
}

// TestAnnotationPrefix: every annotation of the node-fleet contract is
// under annotationPrefix, which CachedNode keeps.
func TestAnnotationPrefix(t *testing.T) {
	for _, c := range []string{"", "kubelet", "kube-proxy", "example-agent"} {
		for _, k := range []string{nodeapi.AssignmentAnnotationFor(c), nodeapi.ClaimAnnotationFor(c), nodeapi.StatusAnnotationFor(c)} {
			if !strings.HasPrefix(k, annotationPrefix) {
				t.Errorf("annotation %s (component %q) is not under %s: CachedNode would drop it", k, c, annotationPrefix)
			}
		}
	}
}

// TestInternerStartsOver: the interner shares equal strings, keeps at
// most max of them and starts over when full.
func TestInternerStartsOver(t *testing.T) {
	in := interner{max: 3}
	a := in.of(strings.Clone("zone-a"))
	if b := in.of(strings.Clone("zone-a")); b != a || len(in.m) != 1 {
		t.Fatalf("an equal string was not shared (table %v)", in.m)
	}
	in.of("b")
	in.of("c")
	in.of("d") // full: starts over
	if len(in.m) != 1 {
		t.Errorf("after the table filled: %d strings kept, want 1", len(in.m))
	}
	long := strings.Repeat("x", maxInterned+1)
	in.of(long)
	if _, ok := in.m[long]; ok {
		t.Errorf("a string longer than %d bytes was kept", maxInterned)
	}
}

// TestNodeFactsSameConditions: what a Node update compares of the cached
// conditions (the gates are told of a change): a transition time, a
// status or a reason that moved, not a message alone; and equal lists
// are equal whether or not the interner shared them.
func TestNodeFactsSameConditions(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC))
	base := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastTransitionTime: at},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
	}
	with := func(edit func(c []corev1.NodeCondition)) *nodeFacts {
		c := slices.Clone(base)
		edit(c)
		return newNodeFacts(&metav1.ObjectMeta{Name: "n"}, c)
	}
	a := with(func([]corev1.NodeCondition) {})
	for _, tc := range []struct {
		name string
		edit func(c []corev1.NodeCondition)
		same bool
	}{
		{"unchanged", func([]corev1.NodeCondition) {}, true},
		{"a message alone", func(c []corev1.NodeCondition) { c[0].Message = "other" }, true},
		{"a heartbeat alone", func(c []corev1.NodeCondition) { c[1].LastHeartbeatTime = at }, true},
		{"a transition time", func(c []corev1.NodeCondition) { c[0].LastTransitionTime = metav1.NewTime(at.Add(time.Second)) }, false},
		{"a first transition time", func(c []corev1.NodeCondition) { c[1].LastTransitionTime = at }, false},
		{"a status", func(c []corev1.NodeCondition) { c[1].Status = corev1.ConditionTrue }, false},
		{"a reason", func(c []corev1.NodeCondition) { c[0].Reason = "Other" }, false},
	} {
		if got := a.sameConditions(with(tc.edit)); got != tc.same {
			t.Errorf("%s: sameConditions %v, want %v", tc.name, got, tc.same)
		}
	}
	own := newNodeFacts(&metav1.ObjectMeta{Name: "n"}, nil)
	own.conds, own.since = &condSet{c: slices.Clone(a.conds.c)}, slices.Clone(a.since) // not shared
	if !a.sameConditions(own) || a.sameConditions(newNodeFacts(&metav1.ObjectMeta{Name: "n"}, nil)) {
		t.Error("equal lists compare unequal, or a list compares equal to none")
	}
	if got := a.Conditions(); !sameConditions(got, base) || got[1].LastTransitionTime != (metav1.Time{}) {
		t.Errorf("Conditions() = %+v, want %+v", got, base)
	}
}
