package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

func TestStale(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(-d)); return &m }
	for _, tc := range []struct {
		name  string
		phase v1alpha1.RolloutPhase
		last  *metav1.Time
		mod   func(*v1alpha1.ConfigRollout)
		want  string
	}{
		{"progressing, fresh", v1alpha1.PhaseProgressing, ago(30 * time.Second), nil, ""},
		{"progressing, just under", v1alpha1.PhaseProgressing, ago(StaleAfter), nil, ""},
		{"progressing, stale", v1alpha1.PhaseProgressing, ago(7 * time.Minute), nil, "controller not seen for 7m (status.lastReconcileTime 2026-11-26T11:53:00Z)"},
		{"paused, stale", v1alpha1.PhasePaused, ago(time.Hour), nil, "controller not seen for 60m"},
		{"no heartbeat (older controller)", v1alpha1.PhaseProgressing, nil, nil, ""},
		{"completed long ago", v1alpha1.PhaseCompleted, ago(48 * time.Hour), nil, ""},
		{"halted, still reverting", v1alpha1.PhaseHalted, ago(time.Hour), func(ro *v1alpha1.ConfigRollout) { ro.Status.Reverting = 2 }, "controller not seen for 60m"},
		{"completed, spec edited since", v1alpha1.PhaseCompleted, ago(time.Hour), func(ro *v1alpha1.ConfigRollout) { ro.Generation = 3 }, "controller not seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Generation: 2}}
			ro.Status = v1alpha1.ConfigRolloutStatus{Phase: tc.phase, ObservedGeneration: 2, LastReconcileTime: tc.last}
			if tc.mod != nil {
				tc.mod(ro)
			}
			got := Stale(ro, now)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Stale = %q, want %q", got, tc.want)
			}
		})
	}
}

// rollout status says so when the controller has not reconciled an active
// rollout for longer than StaleAfter: with both replicas down it used to
// keep saying Progressing and nothing else.
func TestRenderStatusStale(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}}
	ro.Status = v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseProgressing, LastReconcileTime: &old}
	if got := RenderStatus(ro); !strings.Contains(got, "STALE: controller not seen for 10m") {
		t.Errorf("status of a rollout last reconciled 10m ago does not say so:\n%s", got)
	}
	fresh := metav1.Now()
	ro.Status.LastReconcileTime = &fresh
	if got := RenderStatus(ro); strings.Contains(got, "STALE") {
		t.Errorf("status of a rollout reconciled now says it is stale:\n%s", got)
	}
}
