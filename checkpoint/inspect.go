package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// Snapshot is what a state dir holds, as Inspect read it. Every file was
// verified (checksums, envelope versions, keys); what could not be read is
// said, per file, in the Err fields and in Problems.
type Snapshot struct {
	// Dir is the absolute path of the state dir.
	Dir string
	// Current and LastKnownGood are the pointers.
	Current, LastKnownGood PointerState
	// Checkpoints are sorted by UID, then resourceVersion.
	Checkpoints []CheckpointState
	// Tracking has one entry per component version, sorted by version.
	Tracking []TrackingState
	// Quarantine lists the names in <dir>/quarantine, oldest first.
	Quarantine []string
	// Problems are damage outside the files above: a missing or foreign
	// directory of the layout, a directory the owner of the state dir
	// cannot write or search, an entry that is not a valid key, a directory
	// that cannot be listed, a damaged second copy of a checkpoint. Each
	// names its path.
	Problems []error

	owner int64 // uid of the state dir, -1 if unknown
}

// PointerState is a pointer as read, or the error that kept it from being
// read (a *CorruptError for damage).
type PointerState struct {
	Pointer Pointer
	Err     error
}

// CheckpointState is one checkpoint file: its ConfigMap when it verifies,
// else the error.
type CheckpointState struct {
	Key       Key
	Path      string
	Size      int64
	ConfigMap *corev1.ConfigMap
	Err       error
}

// TrackingState is the tracking dir of one component version.
type TrackingState struct {
	ComponentVersion string
	// BadMarks is empty, never nil, when BadMarksErr is nil.
	BadMarks    BadMarks
	BadMarksErr error
	// Startups are oldest first.
	Startups    []time.Time
	StartupsErr error
}

// Inspect reads the whole state dir without its lock and without writing
// anything: safe while the component runs, and on a damaged dir (a FIFO, a
// symlink or a directory where a file should be is reported, never followed
// or waited on). A write in progress is either not seen or seen whole,
// since every write is a rename. The error is non-nil only when dir itself
// cannot be read.
func Inspect(dir string) (*Snapshot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("inspect state dir %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("inspect state dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("inspect state dir: %s is not a directory", abs)
	}
	s := &Snapshot{Dir: abs, owner: -1}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.owner = int64(st.Uid)
	}
	// meta/ must be a real directory: a symlink in its place is damage,
	// never followed (the component moves it aside when it starts).
	metaOK := s.checkDir(filepath.Join(abs, metaDir), true)
	s.checkDir(filepath.Join(abs, tmpDir), false)
	for _, p := range []struct {
		name string
		into *PointerState
	}{{currentFile, &s.Current}, {lastKnownGood, &s.LastKnownGood}} {
		path := filepath.Join(abs, metaDir, p.name)
		if !metaOK {
			p.into.Err = corrupt(path, "is unreadable: %s is not a directory", filepath.Join(abs, metaDir))
			continue
		}
		data, err := readFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
			p.into.Err = corrupt(path, "is missing")
		case err != nil:
			p.into.Err = err
		default:
			ptr, err := decodePointer(data)
			if errors.Is(err, ErrNewerFormat) {
				p.into.Err = fmt.Errorf("pointer %s: %w", path, err)
			} else if err != nil {
				p.into.Err = &CorruptError{Path: path, Err: err}
			} else {
				p.into.Pointer = ptr
			}
		}
	}
	s.inspectCheckpoints()
	s.inspectTracking()
	// The quarantine is a layout directory too: a symlink in its place is
	// reported, never listed; one that cannot be listed is said.
	qdir := filepath.Join(abs, QuarantineDir)
	if s.checkDir(qdir, false) {
		entries, err := os.ReadDir(qdir)
		if err != nil {
			s.Problems = append(s.Problems, fmt.Errorf("list the quarantine: %w", err))
		}
		for _, e := range entries {
			s.Quarantine = append(s.Quarantine, e.Name())
		}
	}
	return s, nil
}

// checkDir reports a layout directory that is not a directory (a file, a
// symlink, a FIFO), and a missing one when required; it returns whether dir
// is a real directory.
func (s *Snapshot) checkDir(dir string, required bool) bool {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if required {
			s.Problems = append(s.Problems, corrupt(dir, "is missing"))
		}
		return false
	case err != nil:
		s.Problems = append(s.Problems, fmt.Errorf("directory %s: %w", dir, err))
		return false
	case !fi.IsDir():
		s.Problems = append(s.Problems, corrupt(dir, "is not a directory (mode %v)", fi.Mode()))
		return false
	}
	s.checkAccess(dir, fi)
	return true
}

// checkAccess reports a layout directory that the component, which owns
// the state dir, cannot use: owned by another user (a tool run as root
// created it) or without the owner's read, write and search bits. The
// component then cannot move damaged files aside or write its state, and
// Inspect, often run as root, would read it anyway.
func (s *Snapshot) checkAccess(dir string, fi fs.FileInfo) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case ok && s.owner >= 0 && int64(st.Uid) != s.owner:
		s.Problems = append(s.Problems, fmt.Errorf("directory %s is owned by uid %d, the state dir by uid %d: a component running as the owner of the state dir may not be able to write it", dir, st.Uid, s.owner))
	case fi.Mode().Perm()&0o700 != 0o700:
		s.Problems = append(s.Problems, fmt.Errorf("directory %s has mode %v: its owner cannot read, write and search it", dir, fi.Mode().Perm()))
	}
}

// listDir lists a directory of the layout, reporting what keeps it from
// being one.
func (s *Snapshot) listDir(path string) []os.DirEntry {
	fi, err := os.Lstat(path)
	if err != nil {
		s.Problems = append(s.Problems, fmt.Errorf("directory %s: %w", path, err))
		return nil
	}
	if !fi.IsDir() {
		s.Problems = append(s.Problems, corrupt(path, "is not a directory (mode %v)", fi.Mode()))
		return nil
	}
	s.checkAccess(path, fi)
	entries, err := os.ReadDir(path)
	if err != nil {
		s.Problems = append(s.Problems, fmt.Errorf("list %s: %w", path, err))
	}
	return entries
}

func (s *Snapshot) inspectCheckpoints() {
	root := filepath.Join(s.Dir, checkpointsDir)
	seen := map[Key]int{} // index in s.Checkpoints of the flat copy
	entries := s.listDir(root)
	// Flat files first: a key in both layouts is read where Load reads it.
	sort.SliceStable(entries, func(i, j int) bool { return !entries[i].IsDir() && entries[j].IsDir() })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			continue
		}
		path := filepath.Join(root, e.Name())
		if !e.IsDir() {
			k, ok := parseFlatName(e.Name())
			if !ok {
				s.Problems = append(s.Problems, corrupt(path, "is not a checkpoint (type %v)", e.Type()))
				continue
			}
			seen[k] = len(s.Checkpoints)
			s.Checkpoints = append(s.Checkpoints, inspectCheckpoint(k, path))
			continue
		}
		if k, ok := parseFlatName(e.Name()); ok {
			// Where the file of k belongs (UIDs of real ConfigMaps have no
			// flatSep, so this is no UID directory of the nested layout).
			s.Problems = append(s.Problems, corrupt(path, "is a directory where the file of checkpoint %s belongs", k))
		}
		for _, rv := range s.listDir(path) {
			if strings.HasPrefix(rv.Name(), atomicfile.TempPrefix) {
				continue
			}
			k := Key{UID: types.UID(e.Name()), ResourceVersion: rv.Name()}
			p := filepath.Join(path, rv.Name())
			if err := ValidateKey(k); err != nil {
				s.Problems = append(s.Problems, corrupt(p, "is not a checkpoint: %v", err))
				continue
			}
			if i, ok := seen[k]; ok {
				s.secondCopy(i, inspectCheckpoint(k, p))
				continue
			}
			s.Checkpoints = append(s.Checkpoints, inspectCheckpoint(k, p))
		}
	}
	sort.SliceStable(s.Checkpoints, func(i, j int) bool { return keyLess(s.Checkpoints[i].Key, s.Checkpoints[j].Key) })
}

// secondCopy judges the nested copy n of a checkpoint whose flat copy is
// s.Checkpoints[i], as Load does: the flat copy is used when it verifies,
// else the nested one. The copy that is not used is a problem when it is
// damaged (the component moves it to the quarantine the next time it loads
// the checkpoint).
func (s *Snapshot) secondCopy(i int, n CheckpointState) {
	f := s.Checkpoints[i]
	switch {
	case f.Err == nil && n.Err != nil:
		s.Problems = append(s.Problems, fmt.Errorf("the copy of checkpoint %s in the older, nested layout is unusable (the flat copy is used): %w", n.Key, n.Err))
	case f.Err != nil && n.Err == nil:
		s.Problems = append(s.Problems, fmt.Errorf("the flat copy of checkpoint %s is unusable (the copy in the older, nested layout %s is used): %w", f.Key, n.Path, f.Err))
		s.Checkpoints[i] = n
	case f.Err != nil && n.Err != nil:
		s.Problems = append(s.Problems, fmt.Errorf("the copy of checkpoint %s in the older, nested layout is unusable too: %w", n.Key, n.Err))
	}
}

// inspectCheckpoint reads and verifies the checkpoint k at path.
func inspectCheckpoint(k Key, path string) CheckpointState {
	c := CheckpointState{Key: k, Path: path}
	if fi, err := os.Lstat(path); err == nil {
		c.Size = fi.Size()
	}
	data, err := readFile(path)
	if err != nil {
		c.Err = err
	} else if cm, err := decodeCheckpoint(data); errors.Is(err, ErrNewerFormat) {
		c.Err = fmt.Errorf("checkpoint %s: %w", path, err)
	} else if err != nil {
		c.Err = &CorruptError{Path: path, Err: err}
	} else if got := KeyOf(cm); got != k {
		c.Err = corrupt(path, "holds the ConfigMap with key %s", got)
	} else {
		c.ConfigMap = cm
	}
	return c
}

func (s *Snapshot) inspectTracking() {
	root := filepath.Join(s.Dir, trackingDir)
	for _, v := range s.listDir(root) {
		path := filepath.Join(root, v.Name())
		if !v.IsDir() {
			s.Problems = append(s.Problems, corrupt(path, "is not a directory (type %v)", v.Type()))
			continue
		}
		t := TrackingState{ComponentVersion: v.Name(), BadMarks: BadMarks{}}
		_, err := os.Lstat(filepath.Join(path, envelopesOnlyFile))
		envelopesOnly := err == nil
		marksPath := filepath.Join(path, BadConfigsFile)
		if data, err := readTracking(marksPath); err != nil {
			t.BadMarksErr = err
		} else if data != nil {
			if m, legacy, err := decodeBadMarks(data); err != nil {
				t.BadMarksErr = &CorruptError{Path: marksPath, Err: err}
			} else if err := plainAfterMigration(marksPath, legacy, envelopesOnly); err != nil {
				t.BadMarksErr = err
			} else {
				t.BadMarks = m
			}
		}
		startupsPath := filepath.Join(path, StartupsFile)
		if data, err := readTracking(startupsPath); err != nil {
			t.StartupsErr = err
		} else if data != nil {
			if ts, legacy, err := decodeStartups(data); err != nil {
				t.StartupsErr = &CorruptError{Path: startupsPath, Err: err}
			} else if err := plainAfterMigration(startupsPath, legacy, envelopesOnly); err != nil {
				t.StartupsErr = err
			} else {
				t.Startups = ts
			}
		}
		s.Tracking = append(s.Tracking, t)
	}
}

// Version returns the tracking state of a component version, and whether
// the state dir has one.
func (s *Snapshot) Version(componentVersion string) (TrackingState, bool) {
	for _, t := range s.Tracking {
		if t.ComponentVersion == componentVersion {
			return t, true
		}
	}
	return TrackingState{}, false
}

// Checkpoint returns the checkpoint with key k, and whether there is one.
func (s *Snapshot) Checkpoint(k Key) (CheckpointState, bool) {
	for _, c := range s.Checkpoints {
		if c.Key == k {
			return c, true
		}
	}
	return CheckpointState{}, false
}

// LockShared takes the state dir's lock (the directory's flock) without
// changing anything in it, so that a reader sees a state no writer is
// changing, and returns the function that releases it. It fails with
// ErrLocked while a Store holds the dir.
func LockShared(dir string) (unlock func(), err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("open state dir %s: %w", abs, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &lockedError{dir: abs, err: err}
		}
		return nil, fmt.Errorf("lock state dir %s: %w", abs, err)
	}
	return func() { _ = f.Close() }, nil
}
