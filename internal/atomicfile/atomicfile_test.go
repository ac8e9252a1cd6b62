package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name     string
		existing []byte // nil: no file before
		data     []byte
		perm     fs.FileMode
	}{
		{name: "create", data: []byte("hello"), perm: 0o600},
		{name: "replace", existing: []byte("old content, longer than the new"), data: []byte("new"), perm: 0o600},
		{name: "empty", existing: []byte("old"), data: nil, perm: 0o600},
		{name: "other perm", data: []byte("x"), perm: 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "target")
			if tt.existing != nil {
				if err := os.WriteFile(path, tt.existing, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, tt.data, tt.perm); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tt.data) {
				t.Errorf("content = %q, want %q", got, tt.data)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tt.perm {
				t.Errorf("mode = %v, want %v", fi.Mode(), tt.perm)
			}
			if diff := cmp.Diff([]string{"target"}, names(t, dir)); diff != "" {
				t.Errorf("directory entries (-want +got):\n%s", diff)
			}
		})
	}
}

// The mode is set with fchmod, so a restrictive umask does not change it.
func TestWriteFileIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o644 {
		t.Errorf("mode = %v, want 0644", fi.Mode())
	}
}

func TestWriteFileErrorsLeaveNothing(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		dir := t.TempDir()
		err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error = %v, want ErrNotExist", err)
		}
		if n := names(t, dir); len(n) != 0 {
			t.Errorf("left %v", n)
		}
	})
	t.Run("target is a non-empty directory", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "target")
		if err := os.MkdirAll(filepath.Join(target, "child"), 0o700); err != nil {
			t.Fatal(err)
		}
		err := WriteFile(target, []byte("x"), 0o600)
		if err == nil || !strings.Contains(err.Error(), "rename") {
			t.Errorf("error = %v, want a rename error", err)
		}
		if diff := cmp.Diff([]string{"target"}, names(t, dir)); diff != "" {
			t.Errorf("directory entries (-want +got):\n%s", diff)
		}
		if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			t.Errorf("target changed: %v, %v", fi, err)
		}
	})
}

// RemoveTemp removes regular files that start with TempPrefix, and nothing
// else: not directories, not names that merely contain it.
func TestRemoveTemp(t *testing.T) {
	dir := t.TempDir()
	stale := []string{TempPrefix + "current-123", TempPrefix + "x"}
	keep := []string{"current", "tmp-1", ".tmp", "x" + TempPrefix}
	for _, n := range append(append([]string{}, stale...), keep...) {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, TempPrefix+"dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemp(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range stale {
		want = append(want, filepath.Join(dir, n))
	}
	sort.Strings(want)
	sort.Strings(removed)
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	wantLeft := append(append([]string{}, keep...), TempPrefix+"dir")
	sort.Strings(wantLeft)
	if diff := cmp.Diff(wantLeft, names(t, dir)); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
}

func TestRemoveTempMissingDir(t *testing.T) {
	removed, err := RemoveTemp(filepath.Join(t.TempDir(), "missing"))
	if err != nil || removed != nil {
		t.Errorf("RemoveTemp(missing) = %v, %v; want nil, nil", removed, err)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Errorf("SyncDir: %v", err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir(missing) = %v, want ErrNotExist", err)
	}
}

// CountSyncs counts the fsyncs of the calls it is passed to, and only
// those: a durable write is two (the file and its directory), a SyncDir one.
func TestCountSyncs(t *testing.T) {
	dir := t.TempDir()
	var n, other atomic.Int64
	if err := WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o600, CountSyncs(&n)); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir, CountSyncs(&n)); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "b"), []byte("y"), 0o600); err != nil { // not counted
		t.Fatal(err)
	}
	if err := WriteFileVia(dir, filepath.Join(dir, "c"), []byte("z"), 0o600, CountSyncs(&other)); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 3 || other.Load() != 2 {
		t.Errorf("counted %d and %d fsyncs, want 3 and 2", n.Load(), other.Load())
	}
}
