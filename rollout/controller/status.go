// Writing a ConfigRollout: its status and its finalizer.

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// addFinalizer adds plan.Finalizer to a rollout, on the resourceVersion it
// was planned on, and returns the updated object.
func (r *runner) addFinalizer(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": u.GetResourceVersion()}}
	if len(u.GetFinalizers()) == 0 {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/finalizers", "value": []string{plan.Finalizer}})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/finalizers/-", "value": plan.Finalizer})
	}
	got, err := r.patchRollout(ctx, u, ops)
	if err != nil {
		return nil, fmt.Errorf("add finalizer %s to ConfigRollout %s/%s: %w", plan.Finalizer, u.GetNamespace(), u.GetName(), err)
	}
	return got, nil
}

// removeFinalizer removes plan.Finalizer from a rollout: its nodes no
// longer depend on its records.
func (r *runner) removeFinalizer(ctx context.Context, u *unstructured.Unstructured) error {
	i := slices.Index(u.GetFinalizers(), plan.Finalizer)
	if i < 0 {
		return nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	_, err := r.patchRollout(ctx, u, []map[string]any{
		{"op": "test", "path": path, "value": plan.Finalizer},
		{"op": "remove", "path": path},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove finalizer %s from ConfigRollout %s/%s: %w", plan.Finalizer, u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// patchRollout applies a JSON patch to a rollout's metadata. A failed test
// (the object changed since it was read) is a conflict: plan again.
func (r *runner) patchRollout(ctx context.Context, u *unstructured.Unstructured, ops []map[string]any) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	got, err := r.c.opts.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(u.GetNamespace()).
		Patch(ctx, u.GetName(), types.JSONPatchType, body, metav1.PatchOptions{FieldManager: "dynconfig-rollout"})
	if err != nil {
		return nil, err
	}
	if got.GetDeletionTimestamp() == nil || len(got.GetFinalizers()) > 0 {
		r.roCache.Mutation(got)
	}
	return got, nil
}

// writeStatus updates the rollout's status with the resourceVersion it was
// planned on.
func (r *runner) writeStatus(ctx context.Context, u *unstructured.Unstructured, st v1alpha1.ConfigRolloutStatus) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("encode the status of ConfigRollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	next := u.DeepCopy()
	next.Object["status"] = raw
	got, err := r.c.opts.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(u.GetNamespace()).
		UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: "dynconfig-rollout"})
	switch {
	case apierrors.IsConflict(err):
		r.c.metrics.writes.WithLabelValues("conflict").Inc()
		return fmt.Errorf("update the status of ConfigRollout %s/%s: %w (planning again)", u.GetNamespace(), u.GetName(), err)
	case err != nil:
		r.c.metrics.writes.WithLabelValues("error").Inc()
		return fmt.Errorf("update the status of ConfigRollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	r.c.metrics.writes.WithLabelValues("ok").Inc()
	r.c.statusWrites.Add(1)
	r.roCache.Mutation(got)
	return nil
}
