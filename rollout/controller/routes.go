// Which rollouts an event concerns: the routes of Node events to rollouts,
// and queueing rollouts.

package controller

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// route is what a Node event is matched against for one rollout.
type route struct {
	// sel is its node selector; nil when it is settled (only its claims
	// route to it) or its selector is invalid.
	sel labels.Selector
	// claimKey is its component's claim annotation; uid its uid, which
	// its claims name.
	claimKey, uid string
	// recorded are the nodes an older controller recorded in its status.
	recorded map[string]bool
}

// setRoute records how Node events reach a rollout.
func (r *runner) setRoute(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	ro, err := toRollout(u)
	if err != nil {
		r.routeMu.Lock()
		r.routes[key] = route{sel: labels.Everything()} // plan it on any change: it says what is wrong
		r.routeMu.Unlock()
		return
	}
	rt := route{claimKey: nodeapi.ClaimAnnotationFor(ro.Spec.Component), uid: string(ro.UID)}
	if !settled(ro) {
		if sel, err := selectorOf(ro); err == nil {
			rt.sel = sel
		}
	}
	rt.recorded = plan.RecordedNodes(&ro.Status)
	r.routeMu.Lock()
	r.routes[key] = rt
	r.routeMu.Unlock()
}

func (r *runner) dropRoute(namespace, name string) {
	r.routeMu.Lock()
	delete(r.routes, namespace+"/"+name)
	r.routeMu.Unlock()
}

// enqueueForNode plans the rollouts a Node event concerns: the ones whose
// claim it carries (before or after), the active ones whose selector
// matches its labels (before or after), and the ones an older controller
// recorded it in. Every other rollout is left alone: at 10,000 nodes, a
// Node event planning every rollout made each plan wait behind all.
func (r *runner) enqueueForNode(nodes ...*nodeFacts) {
	r.routeMu.RLock()
	defer r.routeMu.RUnlock()
	for key, rt := range r.routes {
		if r.routeMatches(rt, nodes) {
			r.queue.Add(key)
		}
	}
}

func (r *runner) routeMatches(rt route, nodes []*nodeFacts) bool {
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if rt.recorded[n.Name] {
			return true
		}
		if c, ok := n.Annotations[rt.claimKey]; ok && rt.uid != "" && strings.Contains(c, rt.uid) {
			return true
		}
		if rt.sel != nil && rt.sel.Matches(nodeLabels(n)) {
			return true
		}
	}
	return false
}

func (r *runner) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	r.queue.Add(key)
}

func (r *runner) enqueueAll() {
	for _, key := range r.rollouts.GetStore().ListKeys() {
		r.queue.Add(key)
	}
}

func (r *runner) enqueueFor(namespace, configMap string) {
	for _, obj := range r.rollouts.GetStore().List() {
		u := obj.(*unstructured.Unstructured)
		if u.GetNamespace() != namespace {
			continue
		}
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "configMapName"); name == configMap {
			r.enqueue(u)
		}
	}
}
