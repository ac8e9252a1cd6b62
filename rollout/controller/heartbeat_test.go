package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func TestHeartbeat(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 30, 700e6, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Truncate(time.Second).Add(d)); return &m }
	for _, tc := range []struct {
		name      string
		last      *metav1.Time
		changed   bool
		interval  time.Duration
		wantWrite bool
		wantAgain time.Duration
		wantStamp bool
	}{
		{"never stamped", nil, false, time.Minute, true, time.Minute, true},
		{"fresh, unchanged: no write", at(-20 * time.Second), false, time.Minute, false, 39*time.Second + 300*time.Millisecond, false},
		{"due", at(-time.Minute), false, time.Minute, true, time.Minute, true},
		{"long overdue", at(-time.Hour), false, time.Minute, true, time.Minute, true},
		{"changed anyway: stamped for free", at(-time.Second), true, time.Minute, true, time.Minute, true},
		{"stamp from the future", at(time.Hour), false, time.Minute, true, time.Minute, true},
		{"lone beats off", at(-time.Hour), false, 0, false, 0, false},
		{"lone beats off, written anyway", at(-time.Hour), true, 0, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := &v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing, LastReconcileTime: tc.last}
			next := prev.DeepCopy()
			write, again := heartbeat(prev, next, tc.changed, now, tc.interval)
			if write != tc.wantWrite || again != tc.wantAgain {
				t.Errorf("heartbeat = (%v, %v), want (%v, %v)", write, again, tc.wantWrite, tc.wantAgain)
			}
			stamped := next.LastReconcileTime != nil && next.LastReconcileTime.Equal(at(0))
			if stamped != tc.wantStamp {
				t.Errorf("stamp = %v, want stamped %v (at %v, whole seconds)", next.LastReconcileTime, tc.wantStamp, at(0))
			}
		})
	}
}

// The write cost of the heartbeat: an idle rollout with work left is
// written once per interval, whatever the planning rate.
func TestHeartbeatWriteCost(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	st := &v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing}
	writes := 0
	// Planned every 5 seconds (node events) for an hour, nothing changing.
	for now := start; now.Before(start.Add(time.Hour)); now = now.Add(5 * time.Second) {
		next := st.DeepCopy()
		if w, _ := heartbeat(st, next, false, now, time.Minute); w {
			writes++
			st = next
		}
	}
	if writes != 60 {
		t.Errorf("%d heartbeat writes in an hour at 1m, want 60", writes)
	}
}

func TestSooner(t *testing.T) {
	for _, tc := range [][3]time.Duration{{0, 0, 0}, {0, 5, 5}, {5, 0, 5}, {3, 5, 3}, {7, 5, 5}} {
		if got := sooner(tc[0], tc[1]); got != tc[2] {
			t.Errorf("sooner(%v, %v) = %v, want %v", tc[0], tc[1], got, tc[2])
		}
	}
}
