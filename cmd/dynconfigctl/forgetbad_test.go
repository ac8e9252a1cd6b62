package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
)

// allMarks reads every bad mark of the fixture's state dir through the
// library: version -> key -> entry.
func allMarks(t *testing.T, f *fixture) map[string]map[string]lkg.Entry {
	t.Helper()
	out := map[string]map[string]lkg.Entry{}
	for _, v := range []string{f.oldV, f.currentVersion} {
		tr, err := lkg.NewTracker(lkg.TrackerOptions{Dir: filepath.Join(f.dir, "tracking", v)})
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.Entries()
		if err != nil {
			t.Fatal(err)
		}
		out[v] = m
	}
	return out
}

func TestForgetBad(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		version string
		// removed is the mark that must be gone, as version and key; every
		// other mark must stay.
		removedVersion, removedKey string
		wantOut                    string
		wantErr                    string
		wantUsage                  bool
	}{
		{
			name: "unique mark, version found by search", key: "uid-b/2",
			removedVersion: "v1.0.0", removedKey: "uid-b/2",
			wantOut: "Forgot bad mark uid-b/2 (component version v1.0.0), marked 2026-03-01T10:03:04.500Z: " + reasonCrashLoop + "\n",
		},
		{
			name: "mark in two versions, one chosen", key: "uid-c/3", version: "v0.9.0",
			removedVersion: "v0.9.0", removedKey: "uid-c/3",
			wantOut: "Forgot bad mark uid-c/3 (component version v0.9.0), marked 2026-03-01T10:00:00.000Z: " + reasonValidate + "\n",
		},
		{
			name: "mark in two versions, none chosen", key: "uid-c/3",
			wantErr: "bad mark uid-c/3 exists for component versions v0.9.0, v1.0.0: choose one with --component-version", wantUsage: true,
		},
		{
			name: "unknown mark lists the marks present", key: "uid-z/9",
			wantErr: "no bad mark uid-z/9 in $STATE/tracking/* (marks present: uid-b/2 (component version v1.0.0), uid-c/3 (component version v0.9.0), uid-c/3 (component version v1.0.0))",
		},
		{
			name: "mark of another version", key: "uid-b/2", version: "v0.9.0",
			wantErr: "no bad mark uid-b/2 in $STATE/tracking/v0.9.0 (component version v0.9.0) (marks present: uid-c/3 (component version v0.9.0))",
		},
		{name: "no slash", key: "uid-b", wantErr: `bad mark "uid-b": want UID/RESOURCEVERSION`, wantUsage: true},
		{name: "two slashes", key: "uid-b/2/3", wantErr: `bad mark "uid-b/2/3"`, wantUsage: true},
		{name: "empty UID", key: "/2", wantErr: `bad mark "/2"`, wantUsage: true},
		{name: "dot-dot UID", key: "../2", wantErr: `bad mark "../2"`, wantUsage: true},
		{name: "empty resourceVersion", key: "uid-b/", wantErr: `bad mark "uid-b/"`, wantUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			want := allMarks(t, f)
			if tt.removedKey != "" {
				delete(want[tt.removedVersion], tt.removedKey)
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
// not "no such mark".
func TestForgetBadCorruptFile(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.dir, "tracking", f.currentVersion, lkg.BadConfigsFile)
	writeFile(t, path, "[1,2")
	err := runForgetBad(&bytes.Buffer{}, forgetBadOptions{dir: f.dir, key: "uid-b/2", componentVersion: f.currentVersion}, testDeps(t, f.clock))
	var corrupt *lkg.CorruptError
	if !errors.As(err, &corrupt) || corrupt.Path != path {
		t.Fatalf("err = %v, want an *lkg.CorruptError for %s", err, path)
	}
}
