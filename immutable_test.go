package dynconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/source"
)

// immutableConfigMap writes ConfigMap a (uid-a) with the given labels,
// annotations and immutability. source.Dir derives the resourceVersion
// from the file's content, so any edit is a new resourceVersion, as in a
// cluster.
func (n *node) immutableConfigMap(immutable bool, labels, annotations, payload string) {
	n.write(filepath.Join(n.srcDir, source.ConfigMapsDir, "a.yaml"), fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: kube-system\n  name: a\n  uid: uid-a\n"+
			"  labels: {%s}\n  annotations: {%s}\nimmutable: %t\ndata:\n  config: |\n    %s\n",
		labels, annotations, immutable, payload))
}

// TestImmutableMetadataEditIsNoNewConfig: a new resourceVersion of an
// immutable ConfigMap that only edits its labels or annotations (dynconfig's
// included: the trial settings are those it was first checkpointed with)
// is the config already current: the pointer, the trial and the
// checkpoints stay as they are, and a running component is not restarted.
// An edit that makes a mutable ConfigMap immutable and a mutable
// ConfigMap's edit are new configs, as before.
func TestImmutableMetadataEditIsNoNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		firstImmutable          bool
		labels, annotations     string
		thenImmutable, wantSame bool
	}{
		{name: "label edit of an immutable ConfigMap", firstImmutable: true, labels: "team: infra", thenImmutable: true, wantSame: true},
		{name: "foreign annotation edit of an immutable ConfigMap", firstImmutable: true, annotations: "owner: sre", thenImmutable: true, wantSame: true},
		{name: "trial edit of an immutable ConfigMap", firstImmutable: true, annotations: "dynconfig.io/trial-duration: 5m", thenImmutable: true, wantSame: true},
		{name: "label edit of a mutable ConfigMap", labels: "team: infra"},
		{name: "made immutable", thenImmutable: true, labels: "team: infra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "")
			n.immutableConfigMap(tc.firstImmutable, "", "", goodValue1)
			n.assign("a", "uid-a")
			if cfg, _ := n.start(); cfg.Value != 1 {
				t.Fatalf("first start runs %+v, want value 1", cfg)
			}
			before, _ := n.pointers()
			firstRun := n.currentFirstRun()
			n.immutableConfigMap(tc.thenImmutable, tc.labels, tc.annotations, goodValue1)
			n.clock.Step(time.Second)
			if cfg, _ := n.start(); cfg.Value != 1 {
				t.Fatalf("second start runs %+v, want value 1", cfg)
			}
			after, _ := n.pointers()
			same := after.ConfigMap.ResourceVersion == before.ConfigMap.ResourceVersion
			if same != tc.wantSame {
				t.Fatalf("current resourceVersion %q, then %q: same config = %t, want %t",
					before.ConfigMap.ResourceVersion, after.ConfigMap.ResourceVersion, same, tc.wantSame)
			}
			if tc.wantSame {
				if got := n.currentFirstRun(); !got.Equal(firstRun) {
					t.Errorf("the trial started again: first run %v, then %v", firstRun, got)
				}
				if got := n.checkpointCount(); got != 1 {
					t.Errorf("%d checkpoints, want 1 (no checkpoint of the metadata edit)", got)
				}
			}
		})
	}
}

// TestImmutableMetadataEditDoesNotRestart: a running component is not
// restarted for a label edit of the immutable ConfigMap it runs; the next
// real change (another ConfigMap) is what restarts it.
func TestImmutableMetadataEditDoesNotRestart(t *testing.T) {
	n := newNode(t, "")
	n.immutableConfigMap(true, "", "", goodValue1)
	n.configMap("b", "uid-b", goodValue2, nil)
	n.assign("a", "uid-a")
	src, err := source.NewDir(source.DirOptions{Path: n.srcDir, PayloadKey: "config", PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := n.controller(func(o *Options[testConfig]) { o.Remote = src; o.ResyncPeriod = time.Hour })
	r, cfg := n.run(c)
	if cfg.Value != 1 {
		t.Fatalf("runs %+v, want value 1", cfg)
	}
	rv := func() string {
		a, err := src.Assigned(n.ctx())
		if err != nil || a.Source == nil {
			return ""
		}
		return a.Source.ConfigMap.ResourceVersion
	}
	before, first := n.restarts.Load(), rv()
	n.immutableConfigMap(true, "team: infra", "", goodValue1)
	// Wait until the source reports the edit (Run hears of it from the
	// same source), then make the change that does need a restart.
	waitFor(t, func() bool { v := rv(); return v != "" && v != first })
	time.Sleep(50 * time.Millisecond) // ten polls: Run has seen the edit
	n.assign("b", "uid-b")
	waitFor(t, func() bool { return n.restarts.Load() > before })
	r.stop(t)
	cur, _ := n.pointers()
	if got := uidOfSource(cur); got != "uid-b" {
		t.Fatalf("restarted for %s (%s), want the restart to be for uid-b: the label edit restarted the component", got, cur.ConfigMap.ResourceVersion)
	}
}

// currentFirstRun reads when current first ran, from a closed state dir.
func (n *node) currentFirstRun() time.Time {
	n.t.Helper()
	c, _ := n.readPointers()
	return c.FirstRun
}

// checkpointCount counts the checkpoint files in the state dir.
func (n *node) checkpointCount() int {
	n.t.Helper()
	count := 0
	err := filepath.WalkDir(filepath.Join(n.stateDir, "checkpoints"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			count++
		}
		return err
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return count
}
