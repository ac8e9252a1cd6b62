// Package atomicfile writes files so that a reader, or a process that starts
// after a crash or power loss, sees either the old content or the new content
// of a file, never a mix, and never loses a write that returned nil.
//
// WriteFile creates a temporary file beside the target (WriteFileVia: in a
// directory the caller names, on the same file system, so that a store whose
// files live in many directories finds every leftover in one), writes and
// fsyncs it, renames it over the target and fsyncs the target's directory:
// exactly two fsyncs per durable write. Temporary files carry TempPrefix so
// that a store can remove the leftovers of an interrupted write when it
// opens (RemoveTemp).
//
// The package guarantees atomicity and durability on local POSIX file systems
// that implement rename(2) atomically (ext4, xfs, btrfs, tmpfs). It does not
// guarantee anything on network file systems.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Option adjusts one call of WriteFile, WriteFileVia or SyncDir.
type Option func(*options)

type options struct {
	syncs *atomic.Int64
}

// CountSyncs adds every fsync the call makes (of files and of directories)
// to n, for tests and benchmarks that count the durability cost of an
// operation. A store passes it to each of its calls, so that a count is
// that store's alone, whatever else the process writes meanwhile.
func CountSyncs(n *atomic.Int64) Option { return func(o *options) { o.syncs = n } }

func apply(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// synced counts one fsync.
func (o options) synced() {
	if o.syncs != nil {
		o.syncs.Add(1)
	}
}

// TempPrefix starts the name of every temporary file written by WriteFile.
// No final file name may start with it.
const TempPrefix = ".tmp-"

// WriteFile atomically and durably replaces path with data, with exactly the
// permission perm (set with chmod, so the umask does not apply). The parent
// directory must exist. On error the target is unchanged and the temporary
// file is removed.
func WriteFile(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	return WriteFileVia(filepath.Dir(path), path, data, perm, opts...)
}

// WriteFileVia is WriteFile with the temporary file created in tmpDir
// instead of beside path. tmpDir must be on the same file system as path.
// A store whose files live in many directories writes through one tmpDir so
// that finding the leftovers of interrupted writes takes one directory read.
func WriteFileVia(tmpDir, path string, data []byte, perm fs.FileMode, opts ...Option) (err error) {
	o := apply(opts)
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(tmpDir, TempPrefix+base+"-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	o.synced()
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	if err = SyncDir(dir, opts...); err != nil {
		// The rename happened; only its durability is in doubt. Do not remove
		// the (now renamed) temporary file in the deferred cleanup.
		return err
	}
	return nil
}

// SyncDir fsyncs the directory dir so that entries created, renamed or
// removed in it survive a power loss.
func SyncDir(dir string, opts ...Option) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s for fsync: %w", dir, err)
	}
	apply(opts).synced()
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("close directory %s: %w", dir, cerr)
	}
	return nil
}

// RemoveTemp removes the temporary files that an interrupted WriteFile left
// in dir (not recursively) and returns their paths. A missing dir is not an
// error.
func RemoveTemp(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), TempPrefix) || e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("remove stale temporary file %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}
