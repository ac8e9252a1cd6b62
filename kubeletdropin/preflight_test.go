package kubeletdropin

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/dynconfig/dynconfig"
)

// TestPreflightLayers: the stock kubelet's layers answer a pre-flight
// check with Build's merge: the fields a node drop-in sorting after
// dynconfig's file sets again, each with its file, and Build's decode
// error for a candidate it refuses; without Build's warning line or its
// ConfigOverridden hook (nothing is applied).
func TestPreflightLayers(t *testing.T) {
	n := newNode(t, "maxPods: 10\n", map[string]string{"zz-local.conf": "maxPods: 70\n", "10-early.conf": "imageGCHighThresholdPercent: 85\n"})
	var logged []string
	l, err := NewLayers(n.files, funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	hooked := 0
	l.(*layers).overriddenHook = func(string, []string) { hooked++ }
	pl, ok := l.(dynconfig.PreflightLayers)
	if !ok {
		t.Fatal("kubeletdropin's layers do not implement dynconfig.PreflightLayers")
	}
	over, err := pl.Preflight(&dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head + "maxPods: 50\nimageGCHighThresholdPercent: 90\n")})
	want := "maxPods (by " + filepath.Join(n.files.ConfigDir, "zz-local.conf") + ")"
	if err != nil || len(over) != 1 || over[0] != want {
		t.Fatalf("Preflight = %q, %v; want [%q]", over, err, want)
	}
	for _, line := range logged {
		if strings.Contains(line, "sort after dynconfig's file") {
			t.Errorf("Preflight logged Build's warning: %s", line)
		}
	}
	if hooked != 0 {
		t.Errorf("Preflight called the ConfigOverridden hook %d times", hooked)
	}
	if _, err := pl.Preflight(&dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head + "maxPodz: 50\n")}); err == nil || !strings.Contains(err.Error(), "maxPodz") {
		t.Errorf("an unknown field in the candidate: %v, want Build's strict decode error", err)
	}
	if _, err := pl.Preflight(&dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head + "maxPods: -3\n")}); err != nil {
		// The later drop-in sets maxPods again, so -3 never runs: what
		// the kubelet would run validates.
		t.Errorf("a value a later drop-in replaces: %v", err)
	}
	if _, err := pl.Preflight(&dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head + "imageGCHighThresholdPercent: 101\n")}); err == nil {
		t.Errorf("an invalid value no later drop-in replaces passed")
	}
	// Build still warns.
	if _, err := l.Build(&dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head + "maxPods: 50\n")}); err != nil || hooked != 1 {
		t.Errorf("Build: %v, hook called %d times, want once", err, hooked)
	}
}
