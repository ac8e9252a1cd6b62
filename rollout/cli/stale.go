package cli

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// StaleAfter is how old status.lastReconcileTime of a rollout with work
// left may be before the CLI says no controller runs it: five beats of the
// controller's default heartbeat (--status-heartbeat-interval 1m), so that
// a leader change (a Lease of 15s) or a slow API server does not trip it.
// The alert DynconfigRolloutNotReconciled (deploy/monitoring) uses the same
// 5m.
const StaleAfter = 5 * time.Minute

// hasWorkLeft reports whether a controller is expected to reconcile ro (and
// so to refresh its heartbeat): an active phase, nodes still in trial or
// being reverted, a spec change not yet observed, or a deletion.
func hasWorkLeft(ro *v1alpha1.ConfigRollout) bool {
	st := &ro.Status
	return st.Phase.Active() || st.InTrial > 0 || st.Reverting > 0 || len(st.Nodes) > 0 ||
		st.ObservedGeneration != ro.Generation || ro.DeletionTimestamp != nil
}

// Stale says, for a rollout with work left whose heartbeat is older than
// StaleAfter at now, "controller not seen for 7m (status.lastReconcileTime
// ...)"; "" otherwise. A status without a heartbeat (written by a
// controller older than the field) is not judged.
func Stale(ro *v1alpha1.ConfigRollout, now time.Time) string {
	last := ro.Status.LastReconcileTime
	if last == nil || !hasWorkLeft(ro) {
		return ""
	}
	age := now.Sub(last.Time)
	if age <= StaleAfter {
		return ""
	}
	return fmt.Sprintf("controller not seen for %s (status.lastReconcileTime %s): is dynconfig-rollout running and leading?",
		duration.HumanDuration(age), last.UTC().Format(time.RFC3339))
}

// lastSeen is how long ago the controller last reconciled ro, for a column:
// "<none>" without a heartbeat.
func lastSeen(ro *v1alpha1.ConfigRollout, now time.Time) string {
	if ro.Status.LastReconcileTime == nil {
		return "<none>"
	}
	return duration.HumanDuration(now.Sub(ro.Status.LastReconcileTime.Time))
}
