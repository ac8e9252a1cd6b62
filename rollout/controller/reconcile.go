// The reconcile loop: a worker takes a rollout off the queue, plans it and
// writes the result.

package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

func (r *runner) work(ctx context.Context) {
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		after, err := r.reconcile(ctx, key)
		switch {
		case err != nil:
			klog.FromContext(ctx).Error(err, "Planning the rollout failed; retrying", "rollout", key)
			r.queue.AddRateLimited(key)
		default:
			r.queue.Forget(key)
			if after > 0 {
				r.queue.AddAfter(key, after)
			}
		}
		r.queue.Done(key)
	}
}

func toRollout(obj any) (*v1alpha1.ConfigRollout, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in the ConfigRollout cache", obj)
	}
	var ro v1alpha1.ConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		return nil, fmt.Errorf("ConfigRollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &ro, nil
}

func selectorOf(ro *v1alpha1.ConfigRollout) (labels.Selector, error) {
	if ro.Spec.NodeSelector == nil {
		return labels.Everything(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(ro.Spec.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("ConfigRollout %s/%s spec.nodeSelector: %w", ro.Namespace, ro.Name, err)
	}
	return s, nil
}

// reconcile plans one rollout and writes the result.
func (r *runner) reconcile(ctx context.Context, key string) (time.Duration, error) {
	if wait := r.pace.wait(key); wait > 0 {
		return wait, nil
	}
	start := time.Now()
	defer func() {
		d := time.Since(start)
		r.c.reconcileNanos.Add(int64(d))
		r.c.metrics.reconcile.Observe(d.Seconds())
	}()
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "rollout", key)
	obj, exists, err := r.roCache.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	ro, err := toRollout(obj)
	if err != nil {
		return 0, err
	}
	u := obj.(*unstructured.Unstructured)
	if settled(ro) {
		// A finalizer left by an older controller goes when it is
		// deleted: the deletion plans it again.
		r.c.metrics.observe(ro)
		return 0, nil
	}
	sel, err := selectorOf(ro)
	if err != nil {
		r.recorder.Eventf(ro, corev1.EventTypeWarning, "InvalidSelector", "%v", err)
		return 0, nil
	}
	component := ro.Spec.Component
	in := plan.Input{Rollout: ro, Now: r.c.opts.Clock.Now(), Scope: r.c.opts.Namespace, Memo: &r.memo}
	in.Nodes = r.observeNodes(ro, sel, component)
	r.gates.inputs(key, ro, in.Nodes, r.gateNode)
	in.Disruption = r.budgets.input(ctx, ro)
	if cmObj, ok, _ := r.configMaps.GetStore().GetByKey(ro.Namespace + "/" + ro.Spec.ConfigMapName); ok {
		cm := cmObj.(*corev1.ConfigMap)
		key, _ := plan.PayloadKey(&ro.Spec)
		_, has := cm.Data[key]
		in.ConfigMap = &plan.ConfigMap{UID: cm.UID, ResourceVersion: cm.ResourceVersion, HasKey: has, Immutable: ptr.Deref(cm.Immutable, false)}
	}
	if ro.Status.Phase.Active() {
		in.Others = r.others(ro)
		r.fleetInput(ro, &in)
	}

	res, err := safePlan(r.c.opts.Plan, in)
	if err != nil {
		r.recorder.Eventf(ro, corev1.EventTypeWarning, "PlanFailed", "%v", err)
		return 0, err
	}
	changed := !apiequality.Semantic.DeepEqual(ro.Status, res.Status)
	r.c.planNanos.Add(int64(time.Since(start)))
	r.pace.planned(key, time.Since(start))

	// While nodes depend on its records, the rollout holds a finalizer:
	// deleting it then reverts them first (package plan), and the records
	// stay until that is done.
	finalized := res.Finalized
	hasFinalizer := slices.Contains(u.GetFinalizers(), plan.Finalizer)
	if !finalized && !hasFinalizer && u.GetDeletionTimestamp() == nil {
		if u, err = r.addFinalizer(ctx, u); err != nil {
			return 0, err
		}
		hasFinalizer = true
	}
	if changed && quiet(&ro.Status, &res) {
		// Nothing waits for this write: coalesce it with the next.
		if last, ok := r.lastWrite.Load(key); ok {
			if wait := last.(time.Time).Add(r.c.opts.StatusInterval).Sub(r.c.opts.Clock.Now()); wait > 0 {
				if res.RequeueAfter > 0 {
					wait = min(wait, res.RequeueAfter)
				}
				return wait, nil
			}
		}
	}
	changed, beat := heartbeat(&ro.Status, &res.Status, changed, r.c.opts.Clock.Now(), r.c.opts.heartbeatInterval())
	if changed {
		t := time.Now()
		err := r.writeStatus(ctx, u, res.Status)
		r.c.writeNanos.Add(int64(time.Since(t)))
		if err != nil {
			return 0, err
		}
		r.lastWrite.Store(key, r.c.opts.Clock.Now())
	}
	ro.Status = res.Status
	r.c.metrics.observe(ro)
	// Before the patches: the pod baseline. A node whose baseline could not
	// be taken is not assigned now; the next plan assigns it again.
	patches, errs := r.gates.prepare(ctx, key, ro, res.Watch, res.Patches)
	t := time.Now()
	errs = append(errs, r.patchNodes(ctx, ro, patches)...)
	r.c.patchNanos.Add(int64(time.Since(t)))
	for _, e := range res.Events {
		t := corev1.EventTypeNormal
		if e.Warning {
			t = corev1.EventTypeWarning
		}
		if e.Reason == "Halted" {
			r.c.metrics.halted(ro.Namespace, ro.Name)
		}
		r.recorder.Event(ro, t, e.Reason, e.Message)
		logger.V(2).Info("Rollout event", "reason", e.Reason, "message", e.Message)
	}
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	if finalized && hasFinalizer {
		// The status just written (or unchanged) is the base.
		if latest, ok, _ := r.roCache.GetByKey(key); ok {
			u = latest.(*unstructured.Unstructured)
		}
		if err := r.removeFinalizer(ctx, u); err != nil {
			return 0, err
		}
	}
	return sooner(res.RequeueAfter, beat), nil
}

// safePlan plans, turning a panic of the planner into an error for this
// rollout alone: the others go on, and this one is planned again later.
func safePlan(planFunc func(plan.Input) plan.Result, in plan.Input) (res plan.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("planning ConfigRollout %s/%s panicked (a bug; please report it with the rollout's status): %v", in.Rollout.Namespace, in.Rollout.Name, r)
			klog.Background().Error(err, "Planning panicked", "stack", string(debug.Stack()))
		}
	}()
	return planFunc(in), nil
}

// onlyCountsMoved reports whether next differs from prev only in the
// counts that move as nodes report trial or promotion.
func onlyCountsMoved(prev, next *v1alpha1.ConfigRolloutStatus) bool {
	rest := withMessageOf(prev, next)
	rest.Selected, rest.Assigned, rest.InTrial, rest.Promoted = prev.Selected, prev.Assigned, prev.InTrial, prev.Promoted
	return apiequality.Semantic.DeepEqual(prev, &rest)
}

// settled reports whether a rollout has nothing left to do: a final phase,
// a spec the status already answers, no node on its way (in trial,
// reverting), no record of an older controller to migrate, and no
// deletion to answer.
func settled(ro *v1alpha1.ConfigRollout) bool {
	st := &ro.Status
	return !st.Phase.Active() && st.ObservedGeneration == ro.Generation && ro.DeletionTimestamp == nil &&
		st.InTrial == 0 && st.Reverting == 0 && len(plan.RecordedNodes(st)) == 0
}
