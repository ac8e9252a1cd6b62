package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/status"
)

// TestControllerRollback proves the perfect signals: a config that cannot
// be decoded, or fails validation, is marked bad by the running process as
// soon as it is assigned, and the process keeps running the last-known-good
// config (a ConfigMap promoted by its short trial) without a restart,
// reporting False and recording one ConfigRolledBack Event. Assigning the
// last-known-good ConfigMap again recovers: True on it, no restart.
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
			// The running process decides in process: bad is marked, the
			// config to run is the last-known-good it already runs, so it
			// neither restarts nor reloads.
			want := status.Report{
				Status:  corev1.ConditionFalse,
				Reason:  tt.reason(string(bad.UID)),
				Message: "using last known good: (UID: " + string(good.UID) + ")",
			}
			n.waitReport(ctx, t, want)
			p1.noRestartOrReload(t)
			wantPointer(t, n.dir, "current", bad.UID, bad.ResourceVersion)
			wantPointer(t, n.dir, "last-known-good", good.UID, good.ResourceVersion)

			snap, err := checkpoint.Inspect(n.dir)
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := snap.Version(componentVersion)
			badSource := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
				UID: bad.UID, ResourceVersion: bad.ResourceVersion, KubeletConfigKey: kubelet.PayloadKey}}
			if _, got, ok := tr.BadMarks.Lookup(badSource); !ok || got.Reason != want.Reason {
				t.Errorf("bad marks %+v (%v): want %s marked with reason %q", tr.BadMarks, tr.BadMarksErr, checkpointKey(bad), want.Reason)
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
			p1.stop()

			// A restarted process finds current marked and stays on the
			// last-known-good, without a second rollback event.
			p2 := n.start(ctx, t, processOptions{})
			n.wantReport(ctx, t, want)
			wantMaxPods(t, "config after the rollback", p2.cfg, 80)
			p2.run(ctx)
			n.waitReport(ctx, t, want)
			p2.noRestartOrReload(t)
			if got := eventMessages(h.nodeEvents(ctx, t, n.name, status.EventReasonConfigRolledBack)); len(got) != 1 {
				t.Errorf("ConfigRolledBack events after a restart: %q, want the one", got)
			}

			// Recovery: the last-known-good ConfigMap is assigned again. It
			// already runs: True on it, no restart, and the bad checkpoint
			// is collected.
			n.assign(ctx, t, good)
			n.waitReport(ctx, t, currentReport(good))
			p2.noRestartOrReload(t)
			wantPointer(t, n.dir, "current", good.UID, good.ResourceVersion)
			// The report comes before the garbage collection that follows
			// it: wait for the collection rather than race it.
			var diff string
			_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				diff = cmp.Diff([]string{checkpointKey(good)}, checkpoints(t, n.dir))
				return diff == "", nil
			})
			if diff != "" {
				t.Errorf("checkpoints after the recovery (-want +got):\n%s", diff)
			}
			p2.stop()
		})
	}
}
