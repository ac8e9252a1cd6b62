package controller

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// fleetOther adds to o what the known-bad check needs of another rollout:
// the ConfigMap it pinned, and why it halted (its Halted condition, which
// stays True once it halted, also after an undo).
func fleetOther(ro *v1alpha1.ConfigRollout, o *plan.Other) {
	o.ConfigMap = ro.Status.ConfigMap
	if c := meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted); c != nil && c.Status == metav1.ConditionTrue {
		o.HaltReason, o.HaltMessage = c.Reason, c.Message
	}
}

// fleetInput gives a rollout that has not started what the fleet knows of
// its ConfigMap: every watched Node whose component reports that
// ConfigMap bad (plan.BadReportOf). A started rollout needs none of it,
// and is not made to read the whole fleet for it.
func (r *runner) fleetInput(ro *v1alpha1.ConfigRollout, in *plan.Input) {
	in.KnownBadNodes = r.c.opts.KnownBadNodes
	if ro.Status.ConfigMap != nil || in.ConfigMap == nil || ro.Spec.AllowKnownBad {
		return
	}
	uid := in.ConfigMap.UID
	for _, name := range r.nodes.GetStore().ListKeys() {
		n := r.node(name)
		if n == nil {
			continue
		}
		st, err := r.readStatus(n, ro.Spec.Component)
		if err != nil {
			continue
		}
		if b := plan.BadReportOf(n.Name, st); b != nil && b.UID == uid {
			in.BadReports = append(in.BadReports, *b)
		}
	}
}

// nodeInformer makes the controller's Node informer (for a
// SharedInformerFactory's InformerFor): Nodes matching selector, without
// the namespace index the factory's own has (a Node has no namespace:
// that index would list every node again under "").
func nodeInformer(selector string) func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
	return func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredNodeInformer(client, resync, cache.Indexers{},
			func(lo *metav1.ListOptions) { lo.LabelSelector = selector })
	}
}

// CachedNode is what the controller keeps of a Node in its informer's
// cache (the informer's transform) and of the Nodes its patches return:
// what the planner, the routing of Node events and the health gates read,
// and nothing else. That is the name, uid, resourceVersion and labels
// (rollout selectors may name any label), the annotations under
// "dynconfig.io/" (assignments, claims and the components' statuses, of
// every component), and each condition's type, status, reason, message
// and lastTransitionTime (spec.analysis; not the heartbeat time, which
// moves every few minutes). Dropped: managedFields, every other
// annotation, the spec, and the rest of the status (images, addresses,
// capacity, nodeInfo, daemonEndpoints), which are most of a real Node's
// bytes. What repeats across a fleet is shared: the label maps of the
// nodes of a pool (the kubernetes.io/hostname label, when it is the
// node's name, is kept as a mark that nodeLabels reads back), the
// annotation maps of the nodes on the same config, condition types,
// reasons and messages. Read a cached Node's labels through nodeLabels,
// and never modify its maps.
//
// What it returns for a *corev1.Node is the controller's own type (a
// Node's metadata and conditions, without the rest of a Node's struct);
// anything else, its own type included, is returned as it is.
func CachedNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return cachedNode(n), nil
}

// nodeFacts is what the controller keeps of a Node (CachedNode): 80
// bytes instead of a corev1.Node's 784, and of its metadata only what is
// read (a metav1.ObjectMeta alone is 232).
type nodeFacts struct {
	// Name and ResourceVersion are the Node's.
	Name, ResourceVersion string
	// Labels and Annotations are the Node's labels and dynconfig.io/
	// annotations (shared: never modify them; read the labels through
	// nodeLabels).
	Labels, Annotations map[string]string
	// conds are the Node's status.conditions without their times, shared
	// by every Node with the same (a fleet's are mostly alike); since are
	// their lastTransitionTimes (UnixNano, noTime for none), which differ
	// from node to node. About 80 bytes a node instead of 560 for five
	// corev1.NodeConditions.
	conds *condSet
	since []int64
}

// condSet is a list of Node conditions without their times (shared: never
// modify one).
type condSet struct{ c []corev1.NodeCondition }

// noTime stands for a zero lastTransitionTime in nodeFacts.since.
const noTime = math.MinInt64

// newNodeFacts keeps of meta its name, resourceVersion, labels and
// annotations as they are, and of conds what CachedNode says.
func newNodeFacts(meta *metav1.ObjectMeta, conds []corev1.NodeCondition) *nodeFacts {
	f := &nodeFacts{Name: meta.Name, ResourceVersion: meta.ResourceVersion, Labels: meta.Labels, Annotations: meta.Annotations}
	if len(conds) == 0 {
		return f
	}
	f.since = make([]int64, len(conds))
	texts := make([]corev1.NodeCondition, len(conds))
	for i, c := range conds {
		f.since[i] = noTime
		if !c.LastTransitionTime.IsZero() {
			f.since[i] = c.LastTransitionTime.UnixNano()
		}
		texts[i] = corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	f.conds = nodeConds.of(texts)
	return f
}

// Conditions returns the Node's conditions as the health gates read them:
// type, status, reason, message and lastTransitionTime.
func (f *nodeFacts) Conditions() []corev1.NodeCondition {
	if f.conds == nil {
		return nil
	}
	out := slices.Clone(f.conds.c)
	for i, ns := range f.since {
		if ns != noTime {
			out[i].LastTransitionTime = metav1.NewTime(time.Unix(0, ns))
		}
	}
	return out
}

// sameConditions is sameConditions of both Nodes' conditions (types,
// statuses, reasons, transition times).
func (f *nodeFacts) sameConditions(g *nodeFacts) bool {
	if !slices.Equal(f.since, g.since) {
		return false
	}
	if f.conds == g.conds {
		return true
	}
	if f.conds == nil || g.conds == nil {
		return false
	}
	return sameConditions(f.conds.c, g.conds.c)
}

// GetObjectKind is that of an object without a kind: a nodeFacts never
// travels.
func (f *nodeFacts) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies f.
func (f *nodeFacts) DeepCopyObject() runtime.Object {
	return &nodeFacts{Name: f.Name, ResourceVersion: f.ResourceVersion, Labels: maps.Clone(f.Labels), Annotations: maps.Clone(f.Annotations),
		conds: f.conds, since: slices.Clone(f.since)}
}

// GetObjectMeta is f's metadata as the informer's store and the mutation
// cache read it (meta.Accessor): name and resourceVersion, labels and
// annotations; a copy, made at each call.
func (f *nodeFacts) GetObjectMeta() metav1.Object { return f.meta() }

func (f *nodeFacts) meta() *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: f.Name, ResourceVersion: f.ResourceVersion, Labels: f.Labels, Annotations: f.Annotations}
}

// node is the Node the health gates read: its metadata and conditions.
func (f *nodeFacts) node() *corev1.Node {
	return &corev1.Node{ObjectMeta: *f.meta(), Status: corev1.NodeStatus{Conditions: f.Conditions()}}
}

func cachedNode(n *corev1.Node) *nodeFacts {
	out := newNodeFacts(&metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}, n.Status.Conditions)
	if n.Labels != nil {
		l := make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			if k == hostnameLabel && v == n.Name {
				// The one label that differs on every node of a pool:
				// noted, so that the rest is shared (nodeLabels).
				k, v = hostnameIsName, ""
			}
			l[k] = v
		}
		out.Labels = nodeMaps.of(l)
	}
	for k, v := range n.Annotations {
		if !strings.HasPrefix(k, annotationPrefix) {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	// A fleet's nodes mostly carry the same assignment and status, and a
	// batch the same claim.
	out.Annotations = nodeMaps.of(out.Annotations)
	return out
}

// hostnameLabel is the label the kubelet sets to the node's hostname,
// mostly its name.
const hostnameLabel = "kubernetes.io/hostname"

// hostnameIsName stands, in a cached Node's labels, for hostnameLabel
// with the node's name as its value (a label key cannot hold a NUL).
const hostnameIsName = "\x00" + hostnameLabel

// nodeLabels are the labels of a Node, whole or cached (CachedNode).
func nodeLabels(n *nodeFacts) labels.Labels {
	if _, ok := n.Labels[hostnameIsName]; ok {
		return cachedLabels{n}
	}
	return labels.Set(n.Labels)
}

// cachedLabels reads the labels of a cached Node.
type cachedLabels struct{ n *nodeFacts }

// Has reports whether the label is set.
func (c cachedLabels) Has(key string) bool {
	_, ok := c.Lookup(key)
	return ok
}

// Get returns the label's value, "" when unset.
func (c cachedLabels) Get(key string) string {
	v, _ := c.Lookup(key)
	return v
}

// Lookup returns the label's value and whether it is set.
func (c cachedLabels) Lookup(key string) (string, bool) {
	if key == hostnameIsName {
		return "", false
	}
	if key == hostnameLabel {
		if _, ok := c.n.Labels[hostnameIsName]; ok {
			return c.n.Name, true
		}
	}
	v, ok := c.n.Labels[key]
	return v, ok
}

// annotationPrefix starts every annotation of the node-fleet contract
// (nodeapi: assignments, claims, statuses).
const annotationPrefix = "dynconfig.io/"

// nodeStrings shares the strings that repeat from Node to Node.
var nodeStrings = interner{max: 1 << 13}

// nodeConds shares the conditions (without their times) that repeat from
// Node to Node.
var nodeConds = condInterner{max: 1 << 12}

// condInterner hands out one copy of each list of conditions it has seen,
// as mapInterner does maps.
type condInterner struct {
	mu  sync.Mutex
	max int
	m   map[string]*condSet
}

func (in *condInterner) of(c []corev1.NodeCondition) *condSet {
	var b strings.Builder
	for _, x := range c {
		for _, s := range []string{string(x.Type), string(x.Status), x.Reason, x.Message} {
			if len(s) > maxInterned {
				return &condSet{c: c} // its own
			}
			b.WriteString(s)
			b.WriteByte(0)
		}
	}
	id := b.String()
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[id]; ok {
		return v
	}
	if in.m == nil || len(in.m) >= in.max {
		in.m = make(map[string]*condSet, 64)
	}
	// Its own copy, with shared strings.
	out := &condSet{c: make([]corev1.NodeCondition, len(c))}
	for i, x := range c {
		out.c[i] = corev1.NodeCondition{
			Type: corev1.NodeConditionType(nodeStrings.of(string(x.Type))), Status: corev1.ConditionStatus(nodeStrings.of(string(x.Status))),
			Reason: nodeStrings.of(x.Reason), Message: nodeStrings.of(x.Message),
		}
	}
	in.m[id] = out
	return out
}

// nodeMaps shares the label and annotation maps that repeat from Node to
// Node (the Nodes of a pool, of a zone, on the same config).
var nodeMaps = mapInterner{max: 1 << 12}

// mapInterner hands out one copy of each map it has seen, as interner
// does strings: at most max maps, whose keys and values are at most
// maxInterned bytes each, starting over when full. The maps it hands
// out are shared: never modify one.
type mapInterner struct {
	mu  sync.Mutex
	max int
	m   map[string]map[string]string
}

func (in *mapInterner) of(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		if len(k) > maxInterned || len(v) > maxInterned {
			return m
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	id := b.String()
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[id]; ok {
		return v
	}
	if in.m == nil || len(in.m) >= in.max {
		in.m = make(map[string]map[string]string, 64)
	}
	// Its own copy, with shared strings.
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[nodeStrings.of(k)] = nodeStrings.of(v)
	}
	in.m[id] = out
	return out
}

// interner hands out one copy of each string it has seen. It holds at
// most max strings of at most maxInterned bytes (at most 8 MiB for
// nodeStrings); when full it starts over (the strings handed out stay
// with the Nodes that hold them): a fleet's label keys, zones, condition
// messages and current assignments are few, and a value unique to each
// node only costs a turn of the table.
type interner struct {
	mu  sync.Mutex
	max int
	m   map[string]string
}

// maxInterned is the longest string an interner keeps.
const maxInterned = 1024

func (in *interner) of(s string) string {
	if s == "" || len(s) > maxInterned {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	if in.m == nil || len(in.m) >= in.max {
		in.m = make(map[string]string, 256)
	}
	s = strings.Clone(s) // not a slice of a larger decoded buffer
	in.m[s] = s
	return s
}
