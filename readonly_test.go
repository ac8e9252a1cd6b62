package dynconfig

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/internal/damage"
)

// Issue 21, defect 9: a state dir on a read-only mount (a node whose state
// volume was remounted read-only after an I/O error) does not refuse to
// start: the component runs its last-known-good, read-only, and says so in
// ConfigOK. Three cases: the last-known-good is current (promoted); a
// config on trial is current (its crash restarts cannot be recorded, so
// it is not run); a new assignment (it cannot be checkpointed).
func TestRegressionReadOnlyStateDirRunsLastKnownGood(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(n *node)
		// want is the config value run; wantStatus and wantParts the
		// condition.
		want       int
		wantStatus corev1.ConditionStatus
		wantParts  []string
	}{
		{"current is last-known-good", func(n *node) {
			n.assign("a", "uid-a")
			n.runTrial()
		}, 1, corev1.ConditionTrue, []string{"read-only"}},
		{"current on trial", func(n *node) {
			n.assign("a", "uid-a")
			n.runTrial()
			n.assign("b", "uid-b")
			n.start()
		}, 1, corev1.ConditionUnknown, []string{"read-only"}},
		{"new assignment", func(n *node) {
			n.assign("a", "uid-a")
			n.runTrial()
			n.assign("b", "uid-b")
		}, 1, corev1.ConditionUnknown, []string{"read-only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "")
			n.configMap("a", "uid-a", goodValue1, nil)
			n.configMap("b", "uid-b", goodValue2, nil)
			tc.prepare(n)
			damage.ReadOnlyMount(t, filepath.Dir(n.stateDir))
			n.clock.Step(time.Second)
			start := time.Now()
			run, cfg := n.run(n.controller())
			r := n.reporter.last()
			t.Logf("ran value %d in %v: %+v", cfg.Value, time.Since(start).Round(time.Millisecond), r)
			if cfg.Value != tc.want || r.Status != tc.wantStatus {
				t.Errorf("ran value %d with %+v; want %d, %s", cfg.Value, r, tc.want, tc.wantStatus)
			}
			for _, p := range tc.wantParts {
				if !strings.Contains(r.Message+" "+r.Reason, p) {
					t.Errorf("condition %+v does not say %q", r, p)
				}
			}
			// Run goes on, read-only: past the trial nothing is promoted
			// (nothing can be written), no restart is asked for, and the
			// condition still says so.
			waitFor(t, n.clock.HasWaiters)
			n.clock.Step(2 * time.Minute)
			waitFor(t, n.clock.HasWaiters)
			if got := n.restarts.Load(); got != 0 {
				t.Errorf("Run asked for %d restarts on a read-only state dir", got)
			}
			if r := n.reporter.last(); !strings.Contains(r.Message, "read-only") {
				t.Errorf("after the trial: %+v; want it to still say read-only", r)
			}
			run.stop(t)
		})
	}
}
