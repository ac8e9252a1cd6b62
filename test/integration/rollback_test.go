package integration

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/status"
)

// TestControllerRollback proves the perfect signals: a config that cannot
// be decoded, or fails validation, is marked bad when the restarted process
// loads it, and the process runs the last-known-good config (a ConfigMap
// promoted by its short trial), reporting False and recording a
// ConfigRolledBack Event. Assigning the last-known-good ConfigMap again
// recovers: True on it.
func TestControllerRollback(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)

	tests := []struct {
		name    string
		payload string
		reason  func(uid string) string
	}{
		{
			name:    "decode failure",
			payload: kubeletPayload(90) + "notAField: true\n",
			reason:  func(uid string) string { return "failed to decode current (UID: " + uid + ")" },
		},
		{
			name:    "validation failure",
			payload: kubeletPayload(-1),
			reason:  func(uid string) string { return "failed to validate current (UID: " + uid + ")" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A good config, promoted to last-known-good by its 2s trial.
			good := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "good"), maxPods: 80, trial: "2s"})
			n := h.newNode(ctx, t)
			n.assign(ctx, t, good)
			p1 := n.start(ctx, t, processOptions{})
			n.wantReport(ctx, t, currentReport(good))
			p1.run(ctx)
			waitPointer(t, n.dir, "last-known-good", good.UID)

			bad := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "bad"), data: map[string]string{kubelet.PayloadKey: tt.payload}})
			n.assign(ctx, t, bad)
			p1.waitRestart(t)
			wantPointer(t, n.dir, "current", bad.UID, bad.ResourceVersion)
			p1.stop()

			// The restarted process finds current bad and rolls back.
			p2 := n.start(ctx, t, processOptions{})
			want := status.Report{
				Status:  corev1.ConditionFalse,
				Reason:  tt.reason(string(bad.UID)),
				Message: "using last known good: (UID: " + string(good.UID) + ")",
			}
			n.wantReport(ctx, t, want)
			wantMaxPods(t, "config after the rollback", p2.cfg, 80)
			wantPointer(t, n.dir, "last-known-good", good.UID, good.ResourceVersion)

			tracker, err := lkg.NewTracker(lkg.TrackerOptions{Dir: filepath.Join(n.dir, "tracking", componentVersion)})
			if err != nil {
				t.Fatal(err)
			}
			marks, err := tracker.Entries()
			if err != nil {
				t.Fatalf("reading bad marks: %v", err)
			}
			if got, ok := marks[checkpointKey(bad)]; !ok || got.Reason != want.Reason {
				t.Errorf("bad marks %+v: want %s marked with reason %q", marks, checkpointKey(bad), want.Reason)
			}
			rolledBack := h.nodeEvents(ctx, t, n.name, status.EventReasonConfigRolledBack)
			if diff := cmp.Diff([]string{want.Reason + "; " + want.Message}, eventMessages(rolledBack)); diff != "" {
				t.Errorf("ConfigRolledBack events (-want +got):\n%s", diff)
			}
			for _, ev := range rolledBack {
				if ev.Type != corev1.EventTypeWarning {
					t.Errorf("ConfigRolledBack event %s has type %s, want Warning", ev.Name, ev.Type)
				}
			}

			// While it runs on last-known-good, the bad assignment stays
			// reported as bad: Run's first sync reports the decision again.
			p2.run(ctx)
			n.waitReport(ctx, t, want)
			p2.noRestartOrReload(t)

			// Recovery: the last-known-good ConfigMap is assigned again.
			n.assign(ctx, t, good)
			p2.waitRestart(t)
			wantPointer(t, n.dir, "current", good.UID, good.ResourceVersion)
			p2.stop()

			p3 := n.start(ctx, t, processOptions{})
			n.wantReport(ctx, t, currentReport(good))
			wantMaxPods(t, "config after the recovery", p3.cfg, 80)
			// The bad checkpoint is referenced by neither pointer any more.
			if diff := cmp.Diff([]string{checkpointKey(good)}, checkpoints(t, n.dir)); diff != "" {
				t.Errorf("checkpoints after the recovery (-want +got):\n%s", diff)
			}
		})
	}
}
