package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/checkpoint"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReset(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, f *fixture)
		wantOut string
		// wantQuarantine are the entries of the quarantine after reset.
		wantQuarantine []string
	}{
		{
			name: "remote current and last-known-good",
			wantOut: "current: ConfigMap kube-system/kubelet-b (UID: uid-b, resourceVersion: 2), set 2026-03-01T10:02:00.000Z -> local\n" +
				"last-known-good: ConfigMap kube-system/kubelet-a (UID: uid-a, resourceVersion: 1), set 2026-03-01T10:00:00.000Z -> local\n",
		},
		{
			name:    "corrupt current pointer",
			prepare: func(t *testing.T, f *fixture) { writeFile(t, f.dir+"/meta/current", "garbage") },
			wantOut: "current: unreadable (corrupt file $STATE/meta/current: decode envelope: invalid character 'g' looking for beginning of value " +
				"(moved to $STATE/quarantine/20260301T110306.510000000Z-meta_current)) -> local\n" +
				"last-known-good: ConfigMap kube-system/kubelet-a (UID: uid-a, resourceVersion: 1), set 2026-03-01T10:00:00.000Z -> local\n",
			wantQuarantine: []string{"20260301T110306.510000000Z-meta_current"},
		},
		{
			name: "empty and missing pointer files are corrupt, not local",
			prepare: func(t *testing.T, f *fixture) {
				writeFile(t, f.dir+"/meta/current", "")
				if err := os.Remove(f.dir + "/meta/last-known-good"); err != nil {
					t.Fatal(err)
				}
			},
			wantOut: "current: unreadable (corrupt file $STATE/meta/current: empty file (moved to $STATE/quarantine/20260301T110306.510000000Z-meta_current)) -> local\n" +
				"last-known-good: unreadable (corrupt file $STATE/meta/last-known-good: is missing (a state dir gets both pointers when it is created)) -> local\n",
			wantQuarantine: []string{"20260301T110306.510000000Z-meta_current"},
		},
		{
			name: "pointers already local",
			prepare: func(t *testing.T, f *fixture) {
				s := openStore(t, f.dir, f.currentVersion, f.clock)
				defer s.Close()
				if err := s.SetCurrent(nil); err != nil {
					t.Fatal(err)
				}
				if err := s.SetLastKnownGood(nil); err != nil {
					t.Fatal(err)
				}
			},
			wantOut: "current: local, set 2026-03-01T10:03:06.510Z -> local\nlast-known-good: local, set 2026-03-01T10:03:06.510Z -> local\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.prepare != nil {
				tt.prepare(t, f)
			}
			f.clock.SetTime(f.clock.Now().Add(time.Hour))
			resetAt := f.clock.Now()
			var out bytes.Buffer
			if err := runReset(&out, resetOptions{dir: f.dir}, testDeps(t, f.clock)); err != nil {
				t.Fatalf("reset: %v", err)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.wantOut, "$STATE", f.dir), out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}

			s := openStore(t, f.dir, f.currentVersion, f.clock)
			defer s.Close()
			cur, err := s.Current()
			if err != nil {
				t.Fatal(err)
			}
			lkgPtr, err := s.LastKnownGood()
			if err != nil {
				t.Fatal(err)
			}
			want := checkpoint.Pointer{SetTime: resetAt}
			if diff := cmp.Diff(want, cur); diff != "" {
				t.Errorf("current after reset (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, lkgPtr); diff != "" {
				t.Errorf("last-known-good after reset (-want +got):\n%s", diff)
			}
			keys, err := s.List()
			if err != nil {
				t.Fatal(err)
			}
			wantKeys := []checkpoint.Key{checkpoint.KeyOf(f.lkgCM), checkpoint.KeyOf(f.currentCM), checkpoint.KeyOf(f.corruptCM)}
			if diff := cmp.Diff(wantKeys, keys); diff != "" {
				t.Errorf("reset must leave the checkpoints for GC (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(f.marks, allMarks(t, f), cmpEntries); diff != "" {
				t.Errorf("reset must leave the bad marks (-want +got):\n%s", diff)
			}
			snap, err := checkpoint.Inspect(f.dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantQuarantine, snap.Quarantine); diff != "" {
				t.Errorf("quarantine after reset (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpEntries = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func TestResetLocked(t *testing.T) {
	f := newFixture(t)
	f.holdLock(t)
	before := snapshot(t, f.dir)
	var out bytes.Buffer
	err := runReset(&out, resetOptions{dir: f.dir}, testDeps(t, f.clock))
	if !errors.Is(err, checkpoint.ErrLocked) || !strings.Contains(err.Error(), "in use by a running component; stop it first: reset writes") {
		t.Fatalf("err = %v, want the in-use error wrapping checkpoint.ErrLocked", err)
	}
	if out.Len() != 0 {
		t.Errorf("output on failure: %q", out.String())
	}
	if diff := cmp.Diff(before, snapshot(t, f.dir)); diff != "" {
		t.Errorf("reset changed a locked state dir (-before +after):\n%s", diff)
	}
}
