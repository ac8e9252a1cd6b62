package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// allMarks reads every bad mark of the fixture's state dir through the
// library (checkpoint.Inspect: no lock, nothing written): version -> key ->
// mark.
func allMarks(t *testing.T, f *fixture) map[string]checkpoint.BadMarks {
	t.Helper()
	snap, err := checkpoint.Inspect(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]checkpoint.BadMarks{}
	for _, v := range snap.Tracking {
		if v.BadMarksErr != nil {
			t.Fatalf("component version %s: %v", v.ComponentVersion, v.BadMarksErr)
		}
		out[v.ComponentVersion] = v.BadMarks
	}
	return out
}

func TestForgetBad(t *testing.T) {
	const freshTrial = "Current (ConfigMap kube-system/kubelet-b (UID: uid-b, resourceVersion: 2), set 2026-03-01T10:02:00.000Z) gets a fresh trial: " +
		"its first run (2026-03-01T10:02:01.510Z) was cleared, the startups before it no longer count\n"
	tests := []struct {
		name    string
		key     string
		version string
		// removed are the marks that must be gone, as version and key;
		// every other mark must stay.
		removedVersion string
		removedKeys    []string
		wantOut        string
		wantErr        string
		wantUsage      bool
	}{
		{
			name: "every payload key of a ConfigMap version, version found by search", key: "uid-b/2",
			removedVersion: "v1.0.0", removedKeys: []string{"uid-b/2/kubelet"},
			wantOut: "Forgot bad mark uid-b/2/kubelet (component version v1.0.0), marked 2026-03-01T10:02:06.510Z: " + reasonCrashLoop + "\n" + freshTrial,
		},
		{
			name: "one config", key: "uid-b/2/kubelet",
			removedVersion: "v1.0.0", removedKeys: []string{"uid-b/2/kubelet"},
			wantOut: "Forgot bad mark uid-b/2/kubelet (component version v1.0.0), marked 2026-03-01T10:02:06.510Z: " + reasonCrashLoop + "\n" + freshTrial,
		},
		{
			name: "one config of a ConfigMap that an older version marked whole", key: "uid-c/3/kubelet",
			removedVersion: "v1.0.0", removedKeys: []string{"uid-c/3/kubelet"},
			wantOut: "Forgot bad mark uid-c/3/kubelet (component version v1.0.0), marked 2026-03-01T10:02:06.510Z: " + reasonValidate + "\n",
		},
		{
			name: "mark in two versions, one chosen", key: "uid-c/3", version: "v0.9.0",
			removedVersion: "v0.9.0", removedKeys: []string{"uid-c/3"},
			wantOut: "Forgot bad mark uid-c/3 (component version v0.9.0), marked 2026-03-01T10:00:00.000Z: " + reasonValidate + "\n",
		},
		{
			name: "mark in two versions, the other chosen", key: "uid-c/3", version: "v1.0.0",
			removedVersion: "v1.0.0", removedKeys: []string{"uid-c/3/kubelet"},
			wantOut: "Forgot bad mark uid-c/3/kubelet (component version v1.0.0), marked 2026-03-01T10:02:06.510Z: " + reasonValidate + "\n",
		},
		{
			name: "mark in two versions, none chosen", key: "uid-c/3",
			wantErr: "bad mark uid-c/3 exists for component versions v0.9.0, v1.0.0: choose one with --component-version", wantUsage: true,
		},
		{
			name: "unknown mark lists the marks present", key: "uid-z/9",
			wantErr: "no bad mark uid-z/9 in $STATE/tracking/* (marks present: uid-b/2/kubelet (component version v1.0.0), uid-c/3 (component version v0.9.0), uid-c/3/kubelet (component version v1.0.0))",
		},
		{
			name: "mark of another version", key: "uid-b/2", version: "v0.9.0",
			wantErr: "no bad mark uid-b/2 in $STATE/tracking/v0.9.0 (component version v0.9.0) (marks present: uid-c/3 (component version v0.9.0))",
		},
		{
			name: "another payload key", key: "uid-b/2/other",
			wantErr: "no bad mark uid-b/2/other in $STATE/tracking/*",
		},
		{name: "no slash", key: "uid-b", wantErr: `bad mark "uid-b": want UID/RESOURCEVERSION or UID/RESOURCEVERSION/PAYLOADKEY`, wantUsage: true},
		{name: "three slashes", key: "uid-b/2/a/b", wantErr: `bad mark "uid-b/2/a/b": want UID/RESOURCEVERSION`, wantUsage: true},
		{name: "invalid payload key", key: "uid-b/2/no such key", wantErr: `bad mark "uid-b/2/no such key": payload key "no such key"`, wantUsage: true},
		{name: "empty payload key", key: "uid-b/2/", wantErr: `bad mark "uid-b/2/": payload key ""`, wantUsage: true},
		{name: "empty UID", key: "/2", wantErr: `bad mark "/2"`, wantUsage: true},
		{name: "dot-dot UID", key: "../2", wantErr: `bad mark "../2"`, wantUsage: true},
		{name: "empty resourceVersion", key: "uid-b/", wantErr: `bad mark "uid-b/"`, wantUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			want := allMarks(t, f)
			for _, k := range tt.removedKeys {
				if _, ok := want[tt.removedVersion][k]; !ok {
					t.Fatalf("the fixture has no mark %s in %s", k, tt.removedVersion)
				}
				delete(want[tt.removedVersion], k)
			}
			var out bytes.Buffer
			err := runForgetBad(&out, forgetBadOptions{dir: f.dir, key: tt.key, componentVersion: tt.version}, testDeps(t, f.clock))
			if tt.wantErr != "" {
				wantErr := strings.ReplaceAll(tt.wantErr, "$STATE", f.dir)
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, wantErr)
				}
				var u *usageError
				if errors.As(err, &u) != tt.wantUsage {
					t.Errorf("usage error = %v, want %v", !tt.wantUsage, tt.wantUsage)
				}
			} else if err != nil {
				t.Fatalf("forget-bad: %v", err)
			}
			if diff := cmp.Diff(tt.wantOut, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, allMarks(t, f)); diff != "" {
				t.Errorf("marks after forget-bad (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForgetBadFreshTrial: forgetting current's mark clears its first run,
// so that inspect shows it not run yet, with no crash restarts counted and
// no trial end; forgetting another config's mark leaves current alone.
func TestForgetBadFreshTrial(t *testing.T) {
	f := newFixture(t)
	rep := inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
	if rep.Current.FirstRun == nil || !rep.Current.FirstRun.Equal(f.firstRun) {
		t.Fatalf("before forget-bad: current's first run %v, want %v", rep.Current.FirstRun, f.firstRun)
	}

	if err := runForgetBad(&bytes.Buffer{}, forgetBadOptions{dir: f.dir, key: "uid-c/3", componentVersion: f.currentVersion}, testDeps(t, f.clock)); err != nil {
		t.Fatal(err)
	}
	rep = inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
	if rep.Current.FirstRun == nil {
		t.Errorf("forgetting another config's mark cleared current's first run")
	}

	var out bytes.Buffer
	if err := runForgetBad(&out, forgetBadOptions{dir: f.dir, key: "uid-b/2"}, testDeps(t, f.clock)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "gets a fresh trial") {
		t.Errorf("forget-bad does not say current gets a fresh trial:\n%s", out.String())
	}
	rep = inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
	if rep.Current.FirstRun != nil {
		t.Errorf("after forget-bad: current's first run %v, want none (a fresh trial)", *rep.Current.FirstRun)
	}
	if rep.Current.Trial == nil || rep.Current.Trial.Ends != nil || rep.Current.Trial.Over {
		t.Errorf("after forget-bad: current's trial %+v, want one not started", rep.Current.Trial)
	}
	cv := rep.ComponentVersions[1]
	if cv.CrashRestartsSinceFirstRun != nil || cv.DeadEnd != nil || len(cv.BadConfigs) != 0 {
		t.Errorf("after forget-bad: component version %s = %+v, want no marks, no crash restarts counted, no dead end", cv.ComponentVersion, cv)
	}
	if rep.Current.Error != "" || rep.Current.UID != "uid-b" {
		t.Errorf("after forget-bad: current %+v, want uid-b, readable", rep.Current)
	}
	var text bytes.Buffer
	if err := runInspect(&text, inspectOptions{dir: f.dir, output: "text"}, testDeps(t, f.clock)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "not run yet: its trial starts when the component first runs it") {
		t.Errorf("inspect after forget-bad does not say current has not run:\n%s", text.String())
	}
}

func TestForgetBadLocked(t *testing.T) {
	f := newFixture(t)
	f.holdLock(t)
	before := snapshot(t, f.dir)
	err := runForgetBad(&bytes.Buffer{}, forgetBadOptions{dir: f.dir, key: "uid-b/2"}, testDeps(t, f.clock))
	if !errors.Is(err, checkpoint.ErrLocked) || !strings.Contains(err.Error(), "in use by a running component; stop it first") {
		t.Fatalf("err = %v, want the in-use error wrapping checkpoint.ErrLocked", err)
	}
	if diff := cmp.Diff(before, snapshot(t, f.dir)); diff != "" {
		t.Errorf("forget-bad changed a locked state dir (-before +after):\n%s", diff)
	}
}

// TestForgetBadCorruptFile: a corrupt bad-config file is an error naming it,
// not "no such mark", and it is left in place.
func TestForgetBadCorruptFile(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.dir, "tracking", f.currentVersion, checkpoint.BadConfigsFile)
	writeFile(t, path, "[1,2")
	err := runForgetBad(&bytes.Buffer{}, forgetBadOptions{dir: f.dir, key: "uid-b/2", componentVersion: f.currentVersion}, testDeps(t, f.clock))
	var corrupt *checkpoint.CorruptError
	if !errors.As(err, &corrupt) || corrupt.Path != path {
		t.Fatalf("err = %v, want a *checkpoint.CorruptError for %s", err, path)
	}
	if got := snapshot(t, f.dir)[strings.TrimPrefix(path, f.dir)]; got.Mode == 0 {
		t.Errorf("the corrupt file was moved away")
	}
}
