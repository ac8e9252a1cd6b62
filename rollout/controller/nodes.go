// Reading the Nodes (and the other rollouts) into a plan.Input, and
// patching the Nodes as planned.

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// parsedStatus is a status annotation's value that did not decode, and
// why.
type parsedStatus struct {
	raw string
	st  *nodeapi.ConfigStatus
	err error
}

// statusValue is a status annotation's key and value.
type statusValue struct{ key, raw string }

// maxStatusValues bounds runner.statuses: distinct values are few (the
// configs of a fleet, times the phases), but a trial's end time or an
// error can make each node's its own.
const maxStatusValues = 1 << 16

// readStatus is nodeapi.ReadConfigStatus, decoding each annotation value
// once. The result is shared: never modify it.
func (r *runner) readStatus(n *nodeFacts, component string) (*nodeapi.ConfigStatus, error) {
	key := nodeapi.StatusAnnotationFor(component)
	raw, ok := n.Annotations[key]
	if !ok {
		return nil, nil
	}
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	if st, ok := r.statuses[statusValue{key, raw}]; ok {
		return st, nil
	}
	if p, ok := r.badStatuses[n.Name][key]; ok && p.raw == raw {
		return p.st, p.err
	}
	st, err := nodeapi.ReadConfigStatus(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Annotations: n.Annotations}}, component)
	if err == nil {
		if r.statuses == nil || len(r.statuses) >= maxStatusValues {
			r.statuses = make(map[statusValue]*nodeapi.ConfigStatus, 64)
		}
		r.statuses[statusValue{key, raw}] = st
		delete(r.badStatuses[n.Name], key)
		return st, nil
	}
	if r.badStatuses == nil {
		r.badStatuses = map[string]map[string]parsedStatus{}
	}
	if r.badStatuses[n.Name] == nil {
		r.badStatuses[n.Name] = map[string]parsedStatus{}
	}
	r.badStatuses[n.Name][key] = parsedStatus{raw: raw, st: st, err: err}
	return st, err
}

// forgetStatus drops what a deleted node's statuses decoded to, when
// that was an error (a value that decoded is shared, and goes when the
// table starts over).
func (r *runner) forgetStatus(name string) {
	r.statusMu.Lock()
	delete(r.badStatuses, name)
	r.statusMu.Unlock()
}

// node returns the freshest copy of a Node (what the controller keeps of
// it, CachedNode): the informer's, or the one a patch of this controller
// returned if that is newer.
func (r *runner) node(name string) *nodeFacts {
	obj, ok, err := r.nodeCache.GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*nodeFacts)
}

// gateNode is the Node the health gates read: its name and conditions;
// nil when it is gone.
func (r *runner) gateNode(name string) *corev1.Node {
	if f := r.node(name); f != nil {
		return f.node()
	}
	return nil
}

// withoutAssignments drops the patches that assign a node of missing (an
// assignment whose pod baseline could not be taken) and returns an error
// for each, so that the rollout is planned again.
func withoutAssignments(patches []plan.Patch, missing map[string]error) ([]plan.Patch, []error) {
	if len(missing) == 0 {
		return patches, nil
	}
	var errs []error
	out := make([]plan.Patch, 0, len(patches))
	for _, p := range patches {
		if err := missing[p.Node]; err != nil && !p.Revert {
			errs = append(errs, fmt.Errorf("node %s: not assigned yet, its pod baseline could not be taken: %w", p.Node, err))
			continue
		}
		out = append(out, p)
	}
	return out, errs
}

// observeNodes lists the selected nodes, the ones that carry the
// rollout's claim and the ones an older controller recorded in its status.
func (r *runner) observeNodes(ro *v1alpha1.ConfigRollout, sel labels.Selector, component string) []plan.Node {
	recorded := plan.RecordedNodes(&ro.Status)
	key := nodeapi.AssignmentAnnotationFor(component)
	claimKey := nodeapi.ClaimAnnotationFor(component)
	uid := string(ro.UID)
	var out []plan.Node
	for _, name := range r.nodes.GetStore().ListKeys() {
		n := r.node(name)
		if n == nil {
			continue
		}
		claim, claimed := n.Annotations[claimKey]
		selected := sel.Matches(nodeLabels(n))
		// A claim names its rollout's uid: a cheap test before Plan
		// decodes it.
		if !selected && !recorded[name] && !(claimed && uid != "" && strings.Contains(claim, uid)) {
			continue
		}
		pn := plan.Node{Name: name, Selected: selected, ResourceVersion: n.ResourceVersion}
		if v, ok := n.Annotations[key]; ok {
			pn.Assignment = &v
		}
		if claimed {
			pn.Claim = &claim
		}
		if v, ok := n.Annotations[nodeapi.PreflightAnnotationFor(component)]; ok {
			pn.Preflight = &v
		}
		s, err := r.readStatus(n, component)
		if err != nil {
			pn.StatusError = err.Error()
		}
		pn.Status = s
		out = append(out, pn)
	}
	return out
}

// others describes the other rollouts (for the overlap check, and to
// tell a claim of a rollout that ended from one of a rollout that holds
// its nodes); the nodes of the active ones (selected or claimed).
func (r *runner) others(self *v1alpha1.ConfigRollout) []plan.Other {
	var out []plan.Other
	var nodes []*nodeFacts
	for _, obj := range r.rollouts.GetStore().List() {
		ro, err := toRollout(obj)
		if err != nil || (ro.Namespace == self.Namespace && ro.Name == self.Name) {
			continue
		}
		reverting := ro.Status.Reverting > 0 || plan.RecordedReverting(&ro.Status)
		o := plan.Other{
			Namespace: ro.Namespace, Name: ro.Name, UID: ro.UID, Component: ro.Spec.Component, Created: ro.CreationTimestamp.Time,
			Phase: ro.Status.Phase, Started: ro.Status.ConfigMap != nil, Reverting: reverting, Nodes: map[string]bool{},
		}
		fleetOther(ro, &o)
		out = append(out, o)
		if !ro.Status.Phase.Active() && !reverting {
			continue
		}
		sel, err := selectorOf(ro)
		if err != nil {
			continue
		}
		if nodes == nil {
			for _, o := range r.nodes.GetStore().List() {
				nodes = append(nodes, o.(*nodeFacts))
			}
		}
		claimKey := nodeapi.ClaimAnnotationFor(ro.Spec.Component)
		for _, n := range nodes {
			if sel.Matches(nodeLabels(n)) {
				o.Nodes[n.Name] = true
			} else if c, ok := n.Annotations[claimKey]; ok && ro.UID != "" && strings.Contains(c, string(ro.UID)) {
				o.Nodes[n.Name] = true
			}
		}
		for name := range plan.RecordedNodes(&ro.Status) {
			o.Nodes[name] = true
		}
	}
	return out
}

// patchNodes makes the patches, PatchParallelism at a time, and returns
// their errors.
func (r *runner) patchNodes(ctx context.Context, ro *v1alpha1.ConfigRollout, patches []plan.Patch) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, r.c.opts.PatchParallelism)
	for _, p := range patches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.patchNode(ctx, ro, p); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// patchNode writes a node's claim and, unless the patch is ClaimOnly, its
// assignment, in one merge patch made on the resourceVersion it was
// planned on: a node changed since (another controller claimed it, its
// component wrote) is a conflict, and the rollout is planned again.
func (r *runner) patchNode(ctx context.Context, ro *v1alpha1.ConfigRollout, p plan.Patch) error {
	kind := "assign"
	switch {
	case p.Revert && p.ClaimOnly:
		kind = "release" // only the claim goes
	case p.Revert:
		kind = "revert"
	case p.ClaimOnly:
		kind = "claim"
	}
	key := nodeapi.AssignmentAnnotationFor(ro.Spec.Component)
	annotations := map[string]*string{nodeapi.ClaimAnnotationFor(ro.Spec.Component): p.Claim}
	if !p.ClaimOnly {
		annotations[key] = p.Value
	}
	if p.Preflight != nil {
		// The request alone, without a precondition: it claims nothing,
		// and the node's own status writes must not make it conflict.
		kind, key = "preflight", nodeapi.PreflightAnnotationFor(ro.Spec.Component)
		annotations = map[string]*string{key: p.Preflight}
	}
	meta := map[string]any{"annotations": annotations}
	if p.ResourceVersion != "" && p.Preflight == nil {
		meta["resourceVersion"] = p.ResourceVersion
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	got, err := r.c.opts.Client.CoreV1().Nodes().Patch(ctx, p.Node, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "dynconfig-rollout"})
	switch {
	case apierrors.IsNotFound(err):
		r.c.metrics.patches.WithLabelValues(kind, "error").Inc()
		return nil // gone: the next plan sees it
	case apierrors.IsConflict(err):
		r.c.metrics.patches.WithLabelValues(kind, "conflict").Inc()
		return fmt.Errorf("%s node %s for ConfigRollout %s/%s: the Node changed since it was read (planning again): %w", kind, p.Node, ro.Namespace, ro.Name, err)
	case err != nil:
		r.c.metrics.patches.WithLabelValues(kind, "error").Inc()
		return fmt.Errorf("%s node %s (annotation %s) for ConfigRollout %s/%s: %w", kind, p.Node, key, ro.Namespace, ro.Name, err)
	}
	r.c.metrics.patches.WithLabelValues(kind, "ok").Inc()
	switch kind {
	case "revert":
		r.c.reverts.Add(1)
	case "assign":
		r.c.assigns.Add(1)
	case "preflight":
		r.c.preflightAsks.Add(1)
	}
	r.nodeCache.Mutation(cachedNode(got)) // as the informer caches it
	return nil
}
