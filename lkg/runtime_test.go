package lkg

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestPromotion(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	cur, lkg := src("cur", "1"), src("lkg", "7")
	const trial = 10 * time.Minute
	running := func(s *corev1.NodeConfigSource, ago time.Duration, healthy bool) Running {
		return Running{Source: s, Since: t0.Add(-ago), Healthy: healthy}
	}
	for _, tc := range []struct {
		name           string
		in             PromotionInput
		requireHealthy bool
		want           PromotionVerdict
	}{
		{"current just started: wait for the trial",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, 0, false)}, false,
			PromotionVerdict{After: trial}},
		{"mid trial: the rest of it",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, 4*time.Minute, false)}, false,
			PromotionVerdict{After: 6 * time.Minute}},
		{"late in the trial: the rest of it (make mutate: promotion at half the trial)",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, 9*time.Minute, false)}, false,
			PromotionVerdict{After: time.Minute}},
		{"a nanosecond short of the trial: wait that nanosecond",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, trial-time.Nanosecond, true)}, true,
			PromotionVerdict{After: time.Nanosecond}},
		{"a full trial of uptime: promote",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, trial, false)}, false,
			PromotionVerdict{Promote: true}},
		{"long past the trial: promote",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, 5*trial, false)}, false,
			PromotionVerdict{Promote: true}},
		{"health gate mid trial: the timer and the channel",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, time.Minute, false)}, true,
			PromotionVerdict{After: 9 * time.Minute, WaitHealthy: true}},
		{"health gate after the trial: only the channel (no timer, no spin)",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, 2*trial, false)}, true,
			PromotionVerdict{WaitHealthy: true}},
		{"health gate passed after the trial: promote",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, 2*trial, true)}, true,
			PromotionVerdict{Promote: true}},
		{"healthy but mid trial: wait",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(cur, time.Minute, true)}, true,
			PromotionVerdict{After: 9 * time.Minute}},
		{"running the rollback target: nothing pending",
			PromotionInput{Current: cur, LastKnownGood: lkg, Running: running(lkg, 2*trial, true)}, false,
			PromotionVerdict{}},
		{"running local while current is remote: nothing pending",
			PromotionInput{Current: cur, Running: running(nil, 2*trial, true)}, false,
			PromotionVerdict{}},
		{"current already last-known-good: nothing pending",
			PromotionInput{Current: cur, LastKnownGood: src("cur", "1"), Running: running(cur, 2*trial, true)}, false,
			PromotionVerdict{}},
		{"local current: nothing to promote",
			PromotionInput{LastKnownGood: lkg, Running: running(nil, 2*trial, true)}, false,
			PromotionVerdict{}},
		{"another payload key of current is another config",
			PromotionInput{Current: cur, LastKnownGood: withKey(src("cur", "1"), "other"), Running: running(cur, 2*trial, false)}, false,
			PromotionVerdict{Promote: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Trial, tc.in.Now, tc.in.RequireHealthy = trial, t0, tc.requireHealthy
			if diff := cmp.Diff(tc.want, Promotion(tc.in)); diff != "" {
				t.Errorf("Promotion (-want +got):\n%s", diff)
			}
		})
	}
}

func withKey(s *corev1.NodeConfigSource, key string) *corev1.NodeConfigSource {
	s.ConfigMap.KubeletConfigKey = key
	return s
}

func TestNextAction(t *testing.T) {
	cur, lkg := src("cur", "1"), src("lkg", "7")
	for _, tc := range []struct {
		running   *corev1.NodeConfigSource
		run       *corev1.NodeConfigSource
		canReload bool
		want      Action
	}{
		{cur, cur, false, ActionNone},
		{cur, cur, true, ActionNone},
		{nil, nil, false, ActionNone},
		{lkg, cur, false, ActionRestart},
		{lkg, cur, true, ActionReload},
		{cur, lkg, false, ActionRestart},
		{cur, nil, true, ActionReload},
		{nil, cur, false, ActionRestart},
		{cur, withKey(src("cur", "1"), "other"), false, ActionRestart},
	} {
		t.Run(fmt.Sprintf("%s to %s reload=%v", Key(tc.running), Key(tc.run), tc.canReload), func(t *testing.T) {
			if got := NextAction(tc.running, Decision{Run: tc.run}, tc.canReload); got != tc.want {
				t.Errorf("NextAction = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAfterReloadFailure(t *testing.T) {
	cur, lkg := src("cur", "1"), src("lkg", "7")
	for _, tc := range []struct {
		name            string
		target, current *corev1.NodeConfigSource
		want            ReloadFailure
	}{
		{"current fails: mark it bad and reload the rollback target", cur, cur, ReloadFailure{MarkBad: true}},
		{"the last-known-good fails: restart", lkg, cur, ReloadFailure{Restart: true}},
		{"local fails: restart", nil, cur, ReloadFailure{Restart: true}},
		{"local current fails: restart", nil, nil, ReloadFailure{Restart: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AfterReloadFailure(tc.target, tc.current); got != tc.want {
				t.Errorf("AfterReloadFailure = %+v, want %+v", got, tc.want)
			}
		})
	}
}
