// Package damage lists the ways the state-dir tests break a file or a
// directory of a state dir, so that every damage matrix (the real binary's,
// dynconfigctl inspect's) applies the same kinds: truncation and bit flips
// at given offsets, garbage, empty, missing, a directory, a FIFO, symlinks
// inside and outside, a 100 MB file, mode 000. AsUser runs a test's body as
// an unprivileged user, for damage that root does not notice (files it
// cannot read, a directory it cannot search: a real EACCES).
package damage

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
)

// Damage is one way to break the file or directory at a path.
type Damage struct {
	// Name says what the damage is, for test names.
	Name string
	// Apply breaks the path.
	Apply func(path string) error
}

// File returns the ways a state file whose valid content is valid is
// broken: truncated and bit-flipped at each of offsets, garbage,
// empty, missing, an empty and a non-empty directory, a FIFO, a symlink to
// a valid copy outside the state dir, a dangling symlink, a 100 MB file,
// and mode 000.
func File(t testing.TB, valid []byte, offsets []int) []Damage {
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, valid, 0o600); err != nil {
		t.Fatal(err)
	}
	ds := []Damage{
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("\x00\xffnot json{"), 0o600) }},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o600) }},
		{"missing", os.Remove},
		{"directory", func(p string) error { _ = os.Remove(p); return os.Mkdir(p, 0o700) }},
		{"non-empty directory", func(p string) error {
			_ = os.Remove(p)
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "x"), valid, 0o600)
		}},
		{"fifo", func(p string) error { _ = os.Remove(p); return syscall.Mkfifo(p, 0o600) }},
		{"symlink outside", func(p string) error { _ = os.Remove(p); return os.Symlink(outside, p) }},
		{"dangling symlink", func(p string) error { _ = os.Remove(p); return os.Symlink(outside+"-gone", p) }},
		{"100 MB", func(p string) error { return os.Truncate(p, 100<<20) }}, // sparse: instant
		{"mode 000", func(p string) error { return os.Chmod(p, 0) }},
	}
	for _, off := range offsets {
		if off > 0 {
			ds = append(ds, Damage{fmt.Sprintf("truncated at %d", off), func(p string) error { return os.WriteFile(p, valid[:off], 0o600) }})
		}
	}
	for _, off := range offsets {
		ds = append(ds, Damage{fmt.Sprintf("bit flip at %d", off), func(p string) error {
			b := append([]byte(nil), valid...)
			b[off] ^= 0x04
			return os.WriteFile(p, b, 0o600)
		}})
	}
	return ds
}

// Dir returns the ways a directory of the state dir is broken: the damages
// of a file, as they apply to a directory.
func Dir(t testing.TB) []Damage {
	outside := t.TempDir()
	replace := func(make func(p string) error) func(string) error {
		return func(p string) error {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			return make(p)
		}
	}
	return []Damage{
		{"missing", os.RemoveAll},
		{"emptied", func(p string) error {
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
					return err
				}
			}
			return nil
		}},
		{"foreign entry", func(p string) error { return os.WriteFile(filepath.Join(p, "foreign"), []byte("x"), 0o600) }},
		{"garbage file", replace(func(p string) error { return os.WriteFile(p, []byte("\x00\xffnot a dir"), 0o600) })},
		{"empty file", replace(func(p string) error { return os.WriteFile(p, nil, 0o600) })},
		{"fifo", replace(func(p string) error { return syscall.Mkfifo(p, 0o600) })},
		{"symlink outside", func(p string) error {
			// A valid copy of the directory, outside the state dir.
			parent, err := os.MkdirTemp(outside, "")
			if err != nil {
				return err
			}
			copyTo := filepath.Join(parent, filepath.Base(p))
			if err := os.CopyFS(copyTo, os.DirFS(p)); err != nil {
				return err
			}
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			return os.Symlink(copyTo, p)
		}},
		{"dangling symlink", replace(func(p string) error { return os.Symlink(filepath.Join(outside, "gone"), p) })},
		{"100 MB file", replace(func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Truncate(p, 100<<20)
		})},
		{"mode 000", func(p string) error { return os.Chmod(p, 0) }},
	}
}

// SampleOffsets returns offsets in [0, n) to truncate or flip at: the
// second and the last byte and parts-1 evenly spread ones, sorted.
func SampleOffsets(n, parts int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(i int) {
		if i >= 0 && i < n && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	add(1)
	for k := 1; k < parts; k++ {
		add(n * k / parts)
	}
	add(n - 1)
	sort.Ints(out)
	return out
}
