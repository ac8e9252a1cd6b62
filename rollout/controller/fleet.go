package controller

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// bytes. Strings that repeat across a fleet (label and annotation keys,
// condition types, reasons and messages, common label values) are shared.
//
// Anything that is not a *corev1.Node is returned as it is; a Node it
// already stripped comes back equal.
func CachedNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return cachedNode(n), nil
}

func cachedNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
	}}
	if n.Labels != nil {
		out.Labels = make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			if v == n.Name {
				v = out.Name // kubernetes.io/hostname: no second copy
			} else {
				v = nodeStrings.of(v)
			}
			out.Labels[nodeStrings.of(k)] = v
		}
	}
	for k, v := range n.Annotations {
		if !strings.HasPrefix(k, annotationPrefix) {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		// A fleet's nodes mostly carry the same assignment, and a batch
		// the same claim: their values are shared too.
		out.Annotations[nodeStrings.of(k)] = nodeStrings.of(v)
	}
	if len(n.Status.Conditions) > 0 {
		out.Status.Conditions = make([]corev1.NodeCondition, len(n.Status.Conditions))
		for i, c := range n.Status.Conditions {
			out.Status.Conditions[i] = corev1.NodeCondition{
				Type: corev1.NodeConditionType(nodeStrings.of(string(c.Type))), Status: corev1.ConditionStatus(nodeStrings.of(string(c.Status))),
				Reason: nodeStrings.of(c.Reason), Message: nodeStrings.of(c.Message), LastTransitionTime: c.LastTransitionTime,
			}
		}
	}
	return out
}

// annotationPrefix starts every annotation of the node-fleet contract
// (nodeapi: assignments, claims, statuses).
const annotationPrefix = "dynconfig.io/"

// nodeStrings shares the strings that repeat from Node to Node.
var nodeStrings = interner{max: 1 << 13}

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
