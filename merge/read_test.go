package merge

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileBudget bounds one read of a hostile path on a loaded machine: a
// FIFO waited on, or /dev/zero read to the end, never returns.
const hostileBudget = 20 * time.Second

// within runs f and fails the test if it has not returned within
// hostileBudget (real clock).
func within[R any](t *testing.T, what string, f func() R) R {
	t.Helper()
	done := make(chan R, 1)
	go func() { done <- f() }()
	select {
	case r := <-done:
		return r
	case <-time.After(hostileBudget):
		t.Fatalf("%s did not return within %v: it hangs", what, hostileBudget)
		var zero R
		return zero
	}
}

// hostilePaths lays out, under dir, one path of each class ReadFile must
// refuse, and returns them by class with the words the error must hold.
func hostilePaths(t *testing.T, dir string) map[string]struct{ path, want string } {
	t.Helper()
	fifo := filepath.Join(dir, "fifo.conf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.conf")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<30); err != nil { // sparse: instant
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.yaml")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.conf")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	toFifo := filepath.Join(dir, "link-to-fifo.conf")
	if err := os.Symlink(fifo, toFifo); err != nil {
		t.Fatal(err)
	}
	return map[string]struct{ path, want string }{
		"fifo":              {fifo, "not a regular file (p---------)"},
		"symlink to a fifo": {toFifo, "not a regular file (p---------)"},
		"/dev/zero":         {"/dev/zero", "not a regular file (Dc---------)"},
		"symlink /dev/zero": {zero, "not a regular file (Dc---------)"},
		"directory":         {sub, "is a directory"},
		"1 GiB sparse file": {huge, "larger than a config document may be: 1073741824 bytes, limit 4194304"},
		"missing":           {filepath.Join(dir, "missing.yaml"), "no such file or directory"},
	}
}

// Hostile input: a FIFO, a character device, a directory, a huge file or a
// missing path given as a config file is refused at once, with an error
// naming the path and what it is; nothing is waited on or read whole.
func TestReadFileRefusesHostilePaths(t *testing.T) {
	dir := t.TempDir()
	for class, h := range hostilePaths(t, dir) {
		t.Run(class, func(t *testing.T) {
			type result struct {
				data []byte
				err  error
			}
			r := within(t, "ReadFile("+h.path+")", func() result {
				data, err := ReadFile(h.path)
				return result{data, err}
			})
			if r.err == nil || !strings.Contains(r.err.Error(), h.path) || !strings.Contains(r.err.Error(), h.want) {
				t.Fatalf("ReadFile(%s) = %d bytes, %v; want an error naming it and saying %q", h.path, len(r.data), r.err, h.want)
			}
			var pe *fs.PathError
			if !errors.As(r.err, &pe) || pe.Path != h.path {
				t.Errorf("error %v is not a *fs.PathError for %s", r.err, h.path)
			}
			switch class {
			case "missing":
				if !errors.Is(r.err, fs.ErrNotExist) {
					t.Errorf("error %v does not match fs.ErrNotExist", r.err)
				}
			case "1 GiB sparse file":
				if !errors.Is(r.err, ErrTooLarge) {
					t.Errorf("error %v does not match ErrTooLarge", r.err)
				}
			default:
				if !errors.Is(r.err, ErrNotRegular) {
					t.Errorf("error %v does not match ErrNotRegular", r.err)
				}
			}
		})
	}
}

// A regular file (also through a symbolic link, as in a ConfigMap volume)
// of exactly MaxDocumentSize bytes is read; one byte more is refused.
func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at-limit.yaml")
	if err := os.WriteFile(at, []byte(strings.Repeat("#", MaxDocumentSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(at, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{at, link} {
		if data, err := ReadFile(p); err != nil || len(data) != MaxDocumentSize {
			t.Errorf("ReadFile(%s) = %d bytes, %v; want all %d", p, len(data), err, MaxDocumentSize)
		}
	}
	over := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(over, []byte(strings.Repeat("#", MaxDocumentSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(over); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile of MaxDocumentSize+1 bytes = %v; want ErrTooLarge", err)
	}
}

// Hostile input in a drop-in directory: each class as a *.conf drop-in is
// an error naming it, never a hang or a gigabyte read; and a drop-in
// "directory" that is a FIFO, a device or a file is an error, not an
// empty list of drop-ins.
func TestReadDropInsRefusesHostileEntries(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	for class, h := range hostilePaths(t, t.TempDir()) {
		if class == "missing" || class == "/dev/zero" || !strings.HasSuffix(h.path, ".conf") {
			continue
		}
		t.Run(class, func(t *testing.T) {
			h := hostilePaths(t, t.TempDir())[class] // its own, to move
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "10-ok.conf"), "ok")
			if err := os.Rename(h.path, filepath.Join(dir, "20-"+filepath.Base(h.path))); err != nil {
				t.Fatal(err)
			}
			err := within(t, "ReadDropIns", func() error { _, err := p.ReadDropIns(dir); return err })
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "20-"+filepath.Base(h.path))) || !strings.Contains(err.Error(), h.want) {
				t.Fatalf("ReadDropIns = %v; want an error naming the drop-in and saying %q", err, h.want)
			}
		})
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "x")
	for _, dir := range []string{fifo, "/dev/zero", file} {
		err := within(t, "ReadDropIns("+dir+")", func() error { _, err := p.ReadDropIns(dir); return err })
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("ReadDropIns(%s) = %v; want an error: not a directory", dir, err)
		}
	}
}

// BenchmarkReadFile reads a 4 KiB config file, as every start reads its
// local layers.
func BenchmarkReadFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, bytes.Repeat([]byte("a: b\n"), 820), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if data, err := ReadFile(path); err != nil || len(data) != 4100 {
			b.Fatal(len(data), err)
		}
	}
}
