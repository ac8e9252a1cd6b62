package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// hostileBudget bounds one Assigned or fingerprint of a hostile folder on
// a loaded machine. It only detects a hang: a FIFO waited on never
// returns, and /dev/zero read to its end never does either.
const hostileBudget = 30 * time.Second

// within runs f and fails the test if it has not returned within
// hostileBudget (real clock). On a hang it opens unblock (a FIFO's write
// end), so that the test's goroutine can end.
func within[R any](t *testing.T, what, unblock string, f func() R) R {
	t.Helper()
	done := make(chan R, 1)
	go func() { done <- f() }()
	select {
	case r := <-done:
		return r
	case <-time.After(hostileBudget):
		if unblock != "" {
			if w, err := os.OpenFile(unblock, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		t.Fatalf("%s did not return within %v: it hangs", what, hostileBudget)
		var zero R
		return zero
	}
}

// sparse makes path a file of size bytes without writing them.
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// mkfifo makes path a FIFO that nobody writes.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDirHostileFiles: --source-dir reads through merge.ReadFile, as the
// local config paths do. A FIFO, a device, a directory or a file over
// merge.MaxDocumentSize as assignment.yaml (directly or through a link),
// or a ConfigMap file over the limit, is a plain error naming the file and
// what it is, returned at once: Bootstrap is never held past its timeout
// by a FIFO nobody writes, nor a 64 MiB file read whole. A link to a
// regular file (a ConfigMap volume's layout) is read; a link to nothing is
// an error, never the empty assignment.
func TestDirHostileFiles(t *testing.T) {
	const assign = "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n"
	const big = 64 << 20 // a 64 MiB file
	tests := []struct {
		name string
		// setup lays out dir and returns the FIFO to open if Assigned
		// hangs ("" if none).
		setup func(t *testing.T, dir string) (fifo string)
		// file is the path (under the folder) the error must name; want
		// the words it must hold; is the error it must match.
		file, want string
		is         error
	}{
		{name: "assignment.yaml is a FIFO", file: AssignmentFile, want: "not a regular file (p---------)", is: merge.ErrNotRegular,
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, AssignmentFile)
				mkfifo(t, p)
				return p
			}},
		{name: "assignment.yaml links to a FIFO", file: AssignmentFile, want: "not a regular file (p---------)", is: merge.ErrNotRegular,
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "..data", "fifo")
				mkfifo(t, p)
				if err := os.Symlink(p, filepath.Join(dir, AssignmentFile)); err != nil {
					t.Fatal(err)
				}
				return p
			}},
		{name: "assignment.yaml links to /dev/zero", file: AssignmentFile, want: "not a regular file (Dc---------)", is: merge.ErrNotRegular,
			setup: func(t *testing.T, dir string) string {
				if err := os.Symlink("/dev/zero", filepath.Join(dir, AssignmentFile)); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "assignment.yaml is a directory", file: AssignmentFile, want: "is a directory", is: merge.ErrNotRegular,
			setup: func(t *testing.T, dir string) string {
				if err := os.Mkdir(filepath.Join(dir, AssignmentFile), 0o755); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "assignment.yaml of 64 MiB", file: AssignmentFile, want: "larger than a config document may be: 67108864 bytes, limit 4194304", is: merge.ErrTooLarge,
			setup: func(t *testing.T, dir string) string {
				sparse(t, filepath.Join(dir, AssignmentFile), big)
				return ""
			}},
		{name: "assignment.yaml links to nothing", file: AssignmentFile, want: "is a link to " + "gone.yaml, which does not exist",
			setup: func(t *testing.T, dir string) string {
				if err := os.Symlink("gone.yaml", filepath.Join(dir, AssignmentFile)); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "ConfigMap file of 64 MiB", file: filepath.Join(ConfigMapsDir, "kubelet-a.yaml"),
			want: "larger than a config document may be: 67108864 bytes, limit 4194304", is: merge.ErrTooLarge,
			setup: func(t *testing.T, dir string) string {
				write(t, filepath.Join(dir, AssignmentFile), assign)
				sparse(t, filepath.Join(dir, ConfigMapsDir, "kubelet-a.yaml"), big)
				return ""
			}},
		{name: "ConfigMap file of 64 MiB, named otherwise", file: filepath.Join(ConfigMapsDir, "all.yaml"),
			want: "larger than a config document may be: 67108864 bytes, limit 4194304", is: merge.ErrTooLarge,
			setup: func(t *testing.T, dir string) string {
				write(t, filepath.Join(dir, AssignmentFile), assign)
				sparse(t, filepath.Join(dir, ConfigMapsDir, "all.yaml"), big)
				return ""
			}},
		// A FIFO where the ConfigMap file would be is not read (only
		// regular files are) and is named as the file meant to hold it.
		{name: "ConfigMap file is a FIFO", file: filepath.Join(ConfigMapsDir, "kubelet-a.yaml"),
			want: "is not read (a ConfigMap file is a regular file named <name>.yaml, .yml or .json)",
			setup: func(t *testing.T, dir string) string {
				write(t, filepath.Join(dir, AssignmentFile), assign)
				p := filepath.Join(dir, ConfigMapsDir, "kubelet-a.yaml")
				mkfifo(t, p)
				return p
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fifo := tt.setup(t, dir)
			d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				a   Assignment
				err error
			}
			r := within(t, "Assigned", fifo, func() result {
				a, err := d.Assigned(context.Background())
				return result{a, err}
			})
			path := filepath.Join(dir, tt.file)
			if r.err == nil || !strings.Contains(r.err.Error(), path) || !strings.Contains(r.err.Error(), tt.want) {
				t.Fatalf("Assigned = %+v, %v; want an error naming %s and saying %q", r.a.Source, r.err, path, tt.want)
			}
			if strings.Contains(r.err.Error(), "\n") {
				t.Errorf("error spans lines: %q", r.err)
			}
			if tt.is != nil && !errors.Is(r.err, tt.is) {
				t.Errorf("error %v does not match %v", r.err, tt.is)
			}
			// An unreadable file is the folder's fault, not the config's:
			// a plain error, as the Dir documentation says.
			var ie *nodeapi.InvalidError
			if tt.is != nil && errors.As(r.err, &ie) {
				t.Errorf("error %v is a *nodeapi.InvalidError; want a plain one", r.err)
			}
			// Run's polling reads the same files: it must not hang on
			// them either.
			within(t, "fingerprint", fifo, func() string { return d.fingerprint() })
		})
	}
}

// TestDirReadsThroughLinks: a folder laid out as a ConfigMap volume is
// (every file a link through ..data to a regular file) is read as one of
// plain files; a link to a file of exactly merge.MaxDocumentSize bytes is
// read, one byte more is refused.
func TestDirReadsThroughLinks(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01_00_00_00.1")
	write(t, filepath.Join(data, AssignmentFile), "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n")
	write(t, filepath.Join(data, ConfigMapsDir, "kubelet-a.yaml"), cmYAML)
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{AssignmentFile, ConfigMapsDir} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Assigned(context.Background())
	if err != nil || a.ConfigMap == nil || a.ConfigMap.Name != "kubelet-a" {
		t.Fatalf("Assigned through links = %+v, %v; want ConfigMap kubelet-a", a.ConfigMap, err)
	}

	// The limit: a comment pads the ConfigMap file to exactly the limit.
	cm := filepath.Join(data, ConfigMapsDir, "kubelet-a.yaml")
	padded := cmYAML + "#" + strings.Repeat("x", merge.MaxDocumentSize-len(cmYAML)-2) + "\n"
	write(t, cm, padded)
	if a, err := d.Assigned(context.Background()); err != nil || a.ConfigMap == nil {
		t.Fatalf("a ConfigMap file of exactly %d bytes: %+v, %v; want it read", merge.MaxDocumentSize, a.ConfigMap, err)
	}
	write(t, cm, padded+"\n")
	if _, err := d.Assigned(context.Background()); !errors.Is(err, merge.ErrTooLarge) {
		t.Fatalf("a ConfigMap file of %d bytes: %v; want merge.ErrTooLarge", merge.MaxDocumentSize+1, err)
	}
}
