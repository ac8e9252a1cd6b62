package dynconfig

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/status"
)

// Issue 30: startups stamped in the future of now (a real-time clock that
// ran ahead at boot, then was corrected) are no crash restarts of a config
// adopted in the present. Six startups 100 years ahead, recorded through
// the real checkpoint code, once made a config on trial crash-looping at
// its next start and rolled it back.
func TestStartupsStampedInTheFutureAreNoCrashes(t *testing.T) {
	n := newNode(t, "")
	n.configMap("b", "uid-b", goodValue2, nil)
	n.assign("b", "uid-b")
	if cfg, r := n.start(); cfg.Value != 2 || r.Status != corev1.ConditionTrue {
		t.Fatalf("the start that adopts b ran value %d with %+v", cfg.Value, r)
	}
	// The node reboots six times with its clock 100 years ahead;
	// the startups are recorded (valid checksums) by the real
	// Store, then the clock is corrected.
	now := n.clock.Now()
	ahead := clocktesting.NewFakePassiveClock(now.AddDate(100, 0, 0))
	s, err := checkpoint.Open(checkpoint.Options{Dir: n.stateDir, ComponentVersion: "v1.0.0", Clock: ahead})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		ahead.SetTime(ahead.Now().Add(time.Second))
		if _, err := s.RecordStartup(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n.clock.SetTime(now.Add(time.Second))
	cfg, r := n.start()
	if cfg.Value != 2 || r.Status != corev1.ConditionTrue || r.Reason == status.CrashLoopReason("uid-b") {
		t.Fatalf("the first start after the clock was corrected ran value %d with %+v; want b still on trial", cfg.Value, r)
	}
	// That start was b's first crash restart; a crash loop of b in the
	// present is still found: threshold 2, the third crash restart trips.
	n.clock.Step(time.Second)
	if cfg, r := n.start(); cfg.Value != 2 {
		t.Fatalf("the second crash restart (threshold 2) ran value %d with %+v; want b", cfg.Value, r)
	}
	n.clock.Step(time.Second)
	if _, r := n.start(); r.Status != corev1.ConditionFalse || r.Reason != status.CrashLoopReason("uid-b") {
		t.Fatalf("after 3 crash restarts in the present: %+v; want b found crash-looping", r)
	}
}
