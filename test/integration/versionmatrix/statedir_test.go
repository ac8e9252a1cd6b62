//go:build linux

package versionmatrix

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/internal/proctest"
)

// TestStateDirAcrossVersions hands one state dir, with a config on trial
// under a confirmation deadline, from version to version of the agent
// (kubelet-like of N-2, N-1 and N; test/versions.txt), as package
// checkpoint's skew policy promises: a downgrade N -> N-1 -> N-2 and back
// up to N, and an upgrade N-2 -> N-1 -> N and back down to N-2. Every
// version reads the pointers, checkpoint and confirmation record the
// others wrote (no version bumped the state dir's format in this range, so
// none meets ErrNewerFormat): it runs the config on trial, the trial's
// first run and the deadline counted from it stay those of the first
// version's adoption, and nothing is quarantined.
func TestStateDirAcrossVersions(t *testing.T) {
	all := allVersions(t)
	byName := map[string]*version{}
	for _, v := range all {
		v.Agent(t)
		byName[v.Name] = v
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubelet-b", UID: "uid-b",
			// Every start during the trial counts toward the crash-loop
			// threshold (the default, 3, would end the chain's fifth).
			Annotations: map[string]string{components.TrialDurationAnnotation: "1h", components.CrashLoopThresholdAnnotation: "10"}},
		Data: map[string]string{"kubelet": kubeletPayload(77)},
	}
	const onB = "using current (UID: uid-b)"
	for _, tc := range []struct {
		name  string
		order []string
	}{
		{"downgrade N to N-2, then upgrade", []string{"N", "N-1", "N-2", "N-1", "N"}},
		{"upgrade N-2 to N, then downgrade", []string{"N-2", "N-1", "N", "N-1", "N-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := proctest.NewNode(t)
			n.WriteConfigMap(t, cm)
			n.WriteAssignment(t, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: "kubelet"}})
			var first checkpoint.Confirmation
			for i, name := range tc.order {
				v := byName[name]
				runConfirmed(t, v, n, onB)
				rec, err := checkpoint.InspectConfirmation(n.StateDir())
				if err != nil {
					t.Fatalf("after version %s: reading the confirmation record: %v", name, err)
				}
				if i == 0 {
					first = rec
					continue
				}
				if !rec.FirstRun.Equal(first.FirstRun) || rec.Config != first.Config {
					t.Errorf("after version %s: the trial's first run is %v of %q, want %v of %q (recorded by version %s)",
						name, rec.FirstRun, rec.Config, first.FirstRun, first.Config, tc.order[0])
				}
				noQuarantine(t, n, "after version "+name)
			}
		})
	}

	// What a downgrade meets once a version bumps the state dir's format
	// (checkpoint's doc: ErrNewerFormat, never damage): each version on a
	// current pointer of a format newer than any it reads neither crashes
	// nor quarantines it, and runs its assignment again.
	for _, v := range all {
		t.Run("version "+v.Name+" on a pointer of a newer format", func(t *testing.T) {
			n := proctest.NewNode(t)
			n.WriteConfigMap(t, cm)
			n.WriteAssignment(t, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: "kubelet"}})
			runConfirmed(t, byName["N"], n, onB)
			newerFormat(t, filepath.Join(n.StateDir(), "meta", "current"))
			runConfirmed(t, v, n, onB)
			noQuarantine(t, n, "version "+v.Name)
		})
	}
}

// newerFormat rewrites the pointer file at path as a newer version would
// write it: the same payload in an envelope of a version no reader knows.
func newerFormat(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if v, _ := env["version"].(string); v != "dynconfig.io/pointer/v1" {
		t.Fatalf("%s: envelope version %q, want dynconfig.io/pointer/v1 (move this test to the new format)", path, v)
	}
	env["version"] = "dynconfig.io/pointer/v99"
	if b, err = json.Marshal(env); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// noQuarantine fails the test when the state dir's quarantine holds files.
func noQuarantine(t *testing.T, n proctest.Node, when string) {
	t.Helper()
	if q, err := os.ReadDir(filepath.Join(n.StateDir(), "quarantine")); err == nil && len(q) > 0 {
		t.Fatalf("%s: files quarantined: %d entries", when, len(q))
	}
}

// runConfirmed starts version v's agent on node n with a confirmation
// deadline, waits until it reports want in its status file and its health
// gate confirmed the config, and stops it with SIGTERM.
func runConfirmed(t *testing.T, v *version, n proctest.Node, want string) {
	t.Helper()
	bin := v.Agent(t)
	p := proctest.Start(t, bin, n.Args("--confirm-within=1h"), nil)
	proctest.WaitFor(t, fmt.Sprintf("version %s to report %q", v.Name, want), func() (bool, string) {
		if p.Exited() {
			t.Fatalf("version %s exited with %d\n%s", v.Name, p.Code(), p.Stderr())
		}
		c, ok, err := n.ReadStatus()
		if err != nil || !ok || c.PID != p.PID() {
			return false, fmt.Sprintf("status %+v, %v, %v", c, ok, err)
		}
		if c.Status != corev1.ConditionTrue || c.Message != want {
			return false, fmt.Sprintf("status %+v", c)
		}
		return true, ""
	}, p.Stderr)
	proctest.WaitFor(t, fmt.Sprintf("version %s to confirm the config", v.Name), func() (bool, string) {
		rec, err := checkpoint.InspectConfirmation(n.StateDir())
		return err == nil && !rec.Confirmed.IsZero(), fmt.Sprintf("record %+v, %v", rec, err)
	}, p.Stderr)
	p.Terminate(t)
}
