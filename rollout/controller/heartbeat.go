package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// DefaultHeartbeatInterval is how often, by default, the controller
// refreshes status.lastReconcileTime of a rollout that has work left
// (Options.HeartbeatInterval).
const DefaultHeartbeatInterval = time.Minute

// heartbeatInterval is Options.HeartbeatInterval with its default; 0 when
// negative (no heartbeat of its own: the stamp rides on other writes only).
func (o *Options) heartbeatInterval() time.Duration {
	switch {
	case o.HeartbeatInterval == 0:
		return DefaultHeartbeatInterval
	case o.HeartbeatInterval < 0:
		return 0
	}
	return o.HeartbeatInterval
}

// heartbeat stamps next.LastReconcileTime with now, so that a reader can
// tell a status nobody reconciles (no controller runs, or it cannot write)
// from one that is merely quiet. A status that is written anyway carries
// the stamp for free; an unchanged one is written for it alone once the
// last stamp is interval old, so that a rollout with work left costs one
// status write per interval and nothing more. It returns whether to write
// next, and how soon the rollout must be planned again for its next beat
// (0: no beat due; interval 0 turns the lone beats off).
//
// Called only for rollouts with work left (not settled): a rollout that
// ended is not planned and keeps its last stamp, which a reader ignores.
func heartbeat(prev, next *v1alpha1.ConfigRolloutStatus, changed bool, now time.Time, interval time.Duration) (write bool, again time.Duration) {
	// The API server keeps seconds: a stamp with more would make the
	// status planned from the informer differ from the one written.
	stamp := metav1.NewTime(now.Truncate(time.Second))
	if changed {
		next.LastReconcileTime = &stamp
		return true, interval
	}
	if interval <= 0 {
		return false, 0
	}
	last := prev.LastReconcileTime
	if last == nil || !now.Before(last.Add(interval)) || last.After(now.Add(interval)) {
		// Never stamped, due, or stamped in the future (a clock that went
		// back, or a hand edit): stamp now.
		next.LastReconcileTime = &stamp
		return true, interval
	}
	return false, last.Add(interval).Sub(now)
}

// sooner is the earlier of two requeue delays, where 0 means none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
