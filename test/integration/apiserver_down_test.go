package integration

import (
	"testing"
	"time"
)

// TestControllerAPIServerDownAtStartup proves that a component starting
// while the API server is down runs its last-known-good config from disk
// (the desired config is unclear), and once the server is back, Run's sync
// adopts current and the condition reaches the Node: through a reload in
// process, or a restart and the next process's Bootstrap.
func TestControllerAPIServerDownAtStartup(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 5*time.Minute)

	for _, mode := range []struct {
		name   string
		reload bool
	}{{"restart", false}, {"reload", true}} {
		t.Run(mode.name, func(t *testing.T) {
			// last-known-good A (promoted by its 2s trial); current B,
			// assigned while the component ran, so its trial has not passed.
			a := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "a"), maxPods: 80, trial: "2s"})
			b := h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "b"), maxPods: 81})
			n := h.newNode(ctx, t)
			n.assign(ctx, t, a)
			p1 := n.start(ctx, t, processOptions{})
			n.wantReport(ctx, t, currentReport(a))
			p1.run(ctx)
			waitPointer(t, n.dir, "last-known-good", a.UID)
			n.assign(ctx, t, b)
			p1.waitRestart(t)
			wantPointer(t, n.dir, "current", b.UID, b.ResourceVersion)
			p1.stop()

			if err := h.cl.StopAPIServer(); err != nil {
				t.Fatal(err)
			}
			restarted := false
			t.Cleanup(func() {
				if !restarted {
					if err := h.cl.RestartAPIServer(); err != nil {
						t.Errorf("restarting the API server after a failure: %v", err)
					}
				}
			})
			p2 := n.start(ctx, t, processOptions{reload: mode.reload, startupSyncTimeout: 2 * time.Second})
			wantMaxPods(t, "config chosen with the API server down", p2.cfg, 80)
			wantPointer(t, n.dir, "current", b.UID, b.ResourceVersion)
			p2.run(ctx)

			if err := h.cl.RestartAPIServer(); err != nil {
				t.Fatal(err)
			}
			restarted = true
			if mode.reload {
				cfg := p2.waitReload(t)
				wantMaxPods(t, "config reloaded once the API server is back", cfg, 81)
				n.waitReport(ctx, t, currentReport(b))
				return
			}
			p2.waitRestart(t)
			p2.stop()
			p3 := n.start(ctx, t, processOptions{})
			n.wantReport(ctx, t, currentReport(b))
			wantMaxPods(t, "config after the restart", p3.cfg, 81)
		})
	}
}
