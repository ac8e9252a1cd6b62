package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Names inside a state dir.
const (
	lockFileName   = "lock"
	checkpointsDir = "checkpoints"
	metaDir        = "meta"
	tmpDir         = "tmp"
	trackingDir    = "tracking"
	currentFile    = "current"
	lastKnownGood  = "last-known-good"
	dirPerm        = 0o700
	filePerm       = 0o600
)

// Options configures Open. Dir and ComponentVersion are required; the zero
// value of every other field means its documented default.
type Options struct {
	// Dir is the state dir. It is created (0700) if missing and made
	// absolute. Required.
	Dir string

	// ComponentVersion names the tracking directory,
	// <Dir>/tracking/<ComponentVersion>/, so that a new version of the
	// component does not misread the tracking files of an old one. It must be
	// one safe path component (see ValidateKey). Required.
	ComponentVersion string

	// Clock gives the time recorded by SetCurrent and SetLastKnownGood.
	// Default: clock.RealClock{}.
	Clock clock.PassiveClock

	// Logger receives what the Store finds and leaves alone or cleans up:
	// removed temporary files, entries of checkpoints/ that are not valid
	// keys. Default, for a Logger without a sink (the zero value, and also
	// logr.Discard()): klog.Background(). To drop these messages, pass a
	// logger at a verbosity that is not enabled, e.g. klog.Background().V(10).
	Logger klog.Logger
}

// Pointer is the content of the current or the last-known-good pointer.
type Pointer struct {
	// Source is the config pointed at; nil means the local config.
	Source *corev1.NodeConfigSource
	// SetTime is when the pointer was set.
	SetTime time.Time
	// FirstRun is, for current, when the component first ran it (zero: not
	// yet). Crash-loop counting starts there (RecordFirstRun). It is zero
	// in last-known-good.
	FirstRun time.Time
}

// Store is an open state dir. It holds the state dir's lock until Close. Its
// methods are safe for concurrent use.
type Store struct {
	dir         string
	trackingDir string
	clock       clock.PassiveClock
	log         klog.Logger

	// envelopesOnly is true once the tracking dir holds the envelopes-only
	// marker: a tracking file in the plain format of older versions is then
	// damage, not a file to migrate (see migrateTracking).
	envelopesOnly bool
	// readOnly is true for a state dir on a read-only mount (see ReadOnly).
	readOnly bool
	// sync is passed to every atomicfile call: the tests' fsync counter
	// (export_test.go), else nothing.
	sync []atomicfile.Option

	mu      sync.RWMutex
	lock    *os.File // the lock file; nil once closed
	dirLock *os.File // the state dir, locked too
}

// Open validates opts, takes the state dir's lock without blocking, makes
// sure every directory of the layout exists (recreating any that was
// deleted, and moving aside anything that is not a directory where one
// should be), and removes the temporary files of interrupted writes. If
// another Store, in this or another process, holds the lock, the error wraps
// ErrLocked and names the dir.
//
// A new state dir gets both pointers written as the local config, so that a
// pointer file missing later is known to be damage (see Current).
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("checkpoint: Options.Dir is required")
	}
	if opts.ComponentVersion == "" {
		return nil, fmt.Errorf("checkpoint: Options.ComponentVersion is required")
	}
	if err := validateComponent(opts.ComponentVersion, maxComponentLen); err != nil {
		return nil, fmt.Errorf("checkpoint: Options.ComponentVersion %q: %w", opts.ComponentVersion, err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: Options.Dir %q: %w", opts.Dir, err)
	}
	s := &Store{
		dir:         dir,
		trackingDir: filepath.Join(dir, trackingDir, opts.ComponentVersion),
		clock:       opts.Clock,
		log:         opts.Logger,
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log.GetSink() == nil {
		s.log = klog.Background()
	}
	s.log = s.log.WithValues("stateDir", dir)

	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err := s.mkdirAllDurable(dir); err != nil {
			return nil, err
		}
	}
	// Lock before touching anything else in the dir: the holder may be
	// writing, and its temporary files are not stale.
	if s.lock, s.dirLock, s.readOnly, err = lockDir(dir); err != nil {
		return nil, err
	}
	if err := s.prepare(); err != nil {
		s.closeLocks()
		return nil, err
	}
	return s, nil
}

// lockDir locks the state dir itself, and then <dir>/lock, both with a
// non-blocking exclusive flock. The lock on the directory cannot be taken
// away by unlinking a file; the lock file keeps older versions, which lock
// only it, out. flock locks belong to the open file description, so a second
// Open in the same process conflicts too.
func lockDir(dir string) (lockFile, dirFile *os.File, readOnly bool, err error) {
	// Raw opens: these descriptors are only locked and closed, so they
	// need no registration with the runtime's poller (5 system calls
	// fewer on every start).
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, false, fmt.Errorf("open state dir %s: %w", dir, &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	dirFile = os.NewFile(uintptr(fd), dir)
	if err := flock(dirFile, dir); err != nil {
		_ = dirFile.Close()
		return nil, nil, false, err
	}
	path := filepath.Join(dir, lockFileName)
	lockFile, err = openLockFile(path)
	if errors.Is(err, unix.EROFS) {
		// A read-only mount: nothing can be written (nor the lock file
		// replaced), so the lock of the directory is enough; the lock
		// file, when there is one, is locked too to keep older versions
		// out.
		readOnly = true
		lockFile, err = openLockFileReadOnly(path, dirFile)
	}
	if err != nil {
		_ = dirFile.Close()
		return nil, nil, false, fmt.Errorf("open lock file of state dir %s: %w", dir, err)
	}
	if err := flock(lockFile, dir); err != nil {
		_ = lockFile.Close()
		_ = dirFile.Close()
		return nil, nil, false, err
	}
	// The lock file must still be the file at its path (it was not replaced
	// between the open and the flock), or an older version could lock the
	// new file.
	var held, named unix.Stat_t
	if err := unix.Fstat(int(lockFile.Fd()), &held); !readOnly && err == nil && unix.Lstat(path, &named) == nil &&
		(held.Dev != named.Dev || held.Ino != named.Ino) {
		_ = lockFile.Close()
		_ = dirFile.Close()
		return nil, nil, false, &lockedError{dir: dir, err: errors.New("the lock file was replaced while it was being locked")}
	}
	return lockFile, dirFile, readOnly, nil
}

// openLockFileReadOnly opens the lock file of a state dir on a read-only
// mount for its flock; when there is none (or something else in its place)
// it returns a second descriptor of the state dir, whose flock is the one
// already held.
func openLockFileReadOnly(path string, dirFile *os.File) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			return os.NewFile(uintptr(fd), path), nil
		}
		_ = unix.Close(fd)
	}
	fd, err = unix.Dup(int(dirFile.Fd()))
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), dirFile.Name()), nil
}

// openLockFile opens (creating) the lock file. Anything but a regular file
// in its place (a directory, a symlink, a FIFO) is removed first: the state
// dir itself is already locked, and the lock file holds no data.
func openLockFile(path string) (*os.File, error) {
	open := func() (*os.File, error) {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, filePerm)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("%s is not a regular file", path)
		}
		return os.NewFile(uintptr(fd), path), nil
	}
	f, err := open()
	if err == nil {
		return f, nil
	}
	if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
		if rerr := os.RemoveAll(path); rerr != nil {
			return nil, fmt.Errorf("%w; removing it: %v", err, rerr)
		}
		return open()
	}
	return nil, err
}

func flock(f *os.File, dir string) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return &lockedError{dir: dir, err: err}
		}
		return fmt.Errorf("lock state dir %s: %w", dir, err)
	}
	return nil
}

// lockedError is what Open returns when the state dir is locked; it matches
// ErrLocked.
type lockedError struct {
	dir string
	err error
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("state dir %s is locked by another process (or another open Store): %v", e.dir, e.err)
}
func (e *lockedError) Unwrap() error        { return e.err }
func (e *lockedError) Is(target error) bool { return target == ErrLocked }

// prepare makes sure the layout exists. Called with the lock held, on every Open: a deleted sub-directory is
// recreated (every later write would fail without it), and anything that is
// not a directory where one should be is moved to the quarantine first.
func (s *Store) prepare() error {
	freshMeta, freshTracking := false, false
	for _, d := range []string{
		filepath.Join(s.dir, checkpointsDir),
		filepath.Join(s.dir, metaDir),
		filepath.Join(s.dir, tmpDir),
		filepath.Join(s.dir, trackingDir),
		s.trackingDir,
	} {
		created, err := s.ensureDir(d)
		if err != nil && s.readOnly {
			// Nothing can be repaired on a read-only mount: what is
			// missing reads as missing.
			s.log.Error(err, "A directory of the state dir is damaged and the state dir is read-only")
			continue
		}
		if err != nil {
			return err
		}
		if created && d == filepath.Join(s.dir, metaDir) {
			freshMeta = true
		}
		if d == s.trackingDir {
			freshTracking = created
		}
	}
	s.migrateTracking(freshTracking)
	if s.readOnly {
		s.log.Info("The state dir is on a read-only file system: it is read, and nothing is recorded (no startups, marks or new configs) until it is writable again")
	}
	// The quarantine is created when something is first moved aside, but
	// something else in its place is fixed now, as for every directory.
	if fi, err := os.Lstat(filepath.Join(s.dir, QuarantineDir)); err == nil && !fi.IsDir() && !s.readOnly {
		if err := s.ensureQuarantineDir(); err != nil {
			return err
		}
	}
	// Temporary files of interrupted writes (in tmp/, meta/ and this
	// version's tracking dir; older versions also wrote them in
	// checkpoints/) are harmless: every write makes a new one with a random
	// name. GC removes them, off the startup path, so that a start lists no
	// directory.
	if freshMeta {
		for _, name := range []string{currentFile, lastKnownGood} {
			if err := s.writePointer(name, Pointer{SetTime: s.clock.Now()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureDir creates dir if it is missing. Something that is not a directory
// in its place (a file, a symlink, a FIFO) is moved to the quarantine first.
func (s *Store) ensureDir(dir string) (created bool, err error) {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return false, nil
	case err == nil:
		if _, qerr := s.quarantine(dir); qerr != nil {
			return false, fmt.Errorf("%s is not a directory (mode %v) and cannot be moved aside: %w", dir, fi.Mode(), qerr)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	return s.mkdirDurable(dir)
}

// mkdirDurable creates dir (0700) if it is missing and fsyncs its parent so
// that the new entry survives a power loss. An existing directory is left as
// it is.
func (s *Store) mkdirDurable(dir string) (created bool, err error) {
	err = os.Mkdir(dir, dirPerm)
	if errors.Is(err, fs.ErrExist) {
		fi, serr := os.Stat(dir)
		if serr != nil {
			return false, fmt.Errorf("stat %s: %w", dir, serr)
		}
		if !fi.IsDir() {
			return false, fmt.Errorf("%s exists and is not a directory", dir)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create directory %s: %w", dir, err)
	}
	// The umask may have removed bits we need; it cannot have added any.
	if err := os.Chmod(dir, dirPerm); err != nil {
		return true, fmt.Errorf("chmod %s: %w", dir, err)
	}
	return true, atomicfile.SyncDir(filepath.Dir(dir), s.sync...)
}

// mkdirAllDurable is mkdirDurable for dir and its missing parents.
func (s *Store) mkdirAllDurable(dir string) error {
	parent := filepath.Dir(dir)
	if parent != dir {
		if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
			if err := s.mkdirAllDurable(parent); err != nil {
				return err
			}
		}
	}
	_, err := s.mkdirDurable(dir)
	return err
}

// Close releases the lock. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	if err := s.closeLocks(); err != nil {
		return fmt.Errorf("close lock of state dir %s: %w", s.dir, err)
	}
	return nil
}

// closeLocks releases both flocks: closing the only descriptor of an open
// file description releases its flock.
func (s *Store) closeLocks() error {
	err := s.lock.Close()
	if derr := s.dirLock.Close(); err == nil {
		err = derr
	}
	s.lock, s.dirLock = nil, nil
	return err
}

// ReadOnly reports whether the state dir is on a read-only mount (the lock
// file could not be opened for writing: EROFS). Open then succeeds without
// writing anything: every layout directory that is missing stays missing,
// nothing is migrated or moved to the quarantine, and every method that
// writes fails with the file system's error (EROFS), while the reads work
// as usual. A component can so still run a config its state dir holds;
// what it cannot do is record a startup (so a config on trial is not run:
// its crash restarts could not be counted), adopt a new config, or mark
// one bad.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Dir returns the absolute path of the state dir.
func (s *Store) Dir() string { return s.dir }

// flatSep separates the UID from the resourceVersion in the name of a
// checkpoint file: checkpoints/<uid>_<resourceVersion>.
const flatSep = "_"

// flatName is the file name of k in the flat layout, and whether k has one:
// its UID must not contain flatSep (so that the name parses back to k) and
// the name must leave room for its temporary file. Real keys (a UUID and a
// decimal resourceVersion) always have one.
func flatName(k Key) (string, bool) {
	if strings.Contains(string(k.UID), flatSep) {
		return "", false
	}
	name := string(k.UID) + flatSep + k.ResourceVersion
	if len(name) > maxFileNameLen {
		return "", false
	}
	return name, true
}

// parseFlatName is the key of a flat checkpoint file name, and whether the
// name is one.
func parseFlatName(name string) (Key, bool) {
	uid, rv, ok := strings.Cut(name, flatSep)
	if !ok {
		return Key{}, false
	}
	k := Key{UID: types.UID(uid), ResourceVersion: rv}
	if ValidateKey(k) != nil {
		return Key{}, false
	}
	if n, ok := flatName(k); !ok || n != name {
		return Key{}, false
	}
	return k, true
}

// checkpointPath is where Save writes k: checkpoints/<uid>_<rv>, a file in
// one directory, so that a checkpoint costs two fsyncs whatever its UID.
// Keys without a flat name, and checkpoints written by older versions, live
// at nestedPath.
func (s *Store) checkpointPath(k Key) string {
	if name, ok := flatName(k); ok {
		return filepath.Join(s.dir, checkpointsDir, name)
	}
	return s.nestedPath(k)
}

// nestedPath is the layout of older versions: checkpoints/<uid>/<rv>.
func (s *Store) nestedPath(k Key) string {
	return filepath.Join(s.dir, checkpointsDir, string(k.UID), k.ResourceVersion)
}

func (s *Store) pointerPath(name string) string {
	return filepath.Join(s.dir, metaDir, name)
}

// readLocked and writeLocked take the mutex and check that the Store is open.
func (s *Store) readLocked() (unlock func(), err error) {
	s.mu.RLock()
	if s.lock == nil {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	return s.mu.RUnlock, nil
}

func (s *Store) writeLocked() (unlock func(), err error) {
	s.mu.Lock()
	if s.lock == nil {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	return s.mu.Unlock, nil
}

// Save checkpoints the whole of cm under its UID and resourceVersion,
// atomically and durably, replacing a checkpoint with the same key.
func (s *Store) Save(cm *corev1.ConfigMap) (Key, error) {
	if cm == nil {
		return Key{}, fmt.Errorf("save checkpoint: nil ConfigMap")
	}
	k := KeyOf(cm)
	if err := ValidateKey(k); err != nil {
		return Key{}, fmt.Errorf("save checkpoint of ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	data, err := encodeCheckpoint(cm)
	if err != nil {
		return Key{}, err
	}
	if len(data) > maxFileSize {
		return Key{}, fmt.Errorf("save checkpoint %s: %d bytes is more than the %d a checkpoint may have", k, len(data), maxFileSize)
	}
	unlock, err := s.writeLocked()
	if err != nil {
		return Key{}, err
	}
	defer unlock()
	if _, flat := flatName(k); !flat {
		if _, err := s.ensureDir(filepath.Join(s.dir, checkpointsDir, string(k.UID))); err != nil {
			return Key{}, fmt.Errorf("save checkpoint %s: %w", k, err)
		}
	}
	// Temporary files go to tmp/, so GC finds the leftovers of interrupted
	// writes with one read of a small directory.
	if _, err := s.ensureDir(filepath.Join(s.dir, tmpDir)); err != nil {
		return Key{}, fmt.Errorf("save checkpoint %s: %w", k, err)
	}
	if err := atomicfile.WriteFileVia(filepath.Join(s.dir, tmpDir), s.checkpointPath(k), data, filePerm, s.sync...); err != nil {
		return Key{}, fmt.Errorf("save checkpoint %s: %w", k, err)
	}
	return k, nil
}

// Load reads and verifies the checkpoint k. A missing checkpoint is
// ErrNotFound; one that cannot be trusted (including one that holds another
// key's ConfigMap) is a *CorruptError.
//
// A key may be on disk in both layouts (an older version wrote the nested
// copy, this one the flat copy): both hold the same ConfigMap, since a
// checkpoint is named by its UID and resourceVersion. When the flat copy
// cannot be used, the nested one is, and a damaged copy is moved to the
// quarantine, so damage to one copy never hides the other.
func (s *Store) Load(k Key) (*corev1.ConfigMap, error) {
	if err := ValidateKey(k); err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	unlock, err := s.readLocked()
	if err != nil {
		return nil, err
	}
	cm, damaged, err := s.load(k)
	unlock()
	for _, d := range damaged {
		_ = s.quarantineIfCorrupt(d)
	}
	return cm, s.quarantineIfCorrupt(err)
}

// load reads k, from the flat copy or else the nested one. damaged are the
// corrupt copies other than the one err names, to be moved aside too.
func (s *Store) load(k Key) (cm *corev1.ConfigMap, damaged []error, err error) {
	path := s.checkpointPath(k)
	_, flat := flatName(k)
	if !flat {
		cm, err := s.loadAt(k, path, s.readNested)
		return cm, nil, err
	}
	cm, err = s.loadAt(k, path, func(_ Key, p string) ([]byte, error) { return readFile(p) })
	if err == nil {
		return cm, nil, nil
	}
	// Written by an older version in the nested layout, or a second copy
	// there that is intact while the flat one is not.
	ncm, nerr := s.loadAt(k, s.nestedPath(k), s.readNested)
	switch {
	case nerr == nil:
		if errors.Is(err, ErrCorrupt) {
			s.log.Info("Using the copy of a checkpoint in the older, nested layout: the flat copy is damaged", "key", k.String(), "err", err)
			damaged = append(damaged, err)
		}
		return ncm, damaged, nil
	case errors.Is(nerr, ErrNotFound):
		return nil, nil, err
	case errors.Is(err, ErrNotFound):
		return nil, nil, nerr
	}
	// Both copies unusable: the flat one is the error, the nested one is
	// moved aside too when it is damaged.
	if errors.Is(nerr, ErrCorrupt) {
		damaged = append(damaged, nerr)
	}
	return nil, damaged, err
}

// loadAt reads the checkpoint k at path with read and verifies it.
func (s *Store) loadAt(k Key, path string, read func(Key, string) ([]byte, error)) (*corev1.ConfigMap, error) {
	data, err := read(k, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load checkpoint %s (%s): %w", k, path, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", k, err)
	}
	cm, err := decodeCheckpoint(data)
	if errors.Is(err, ErrNewerFormat) {
		return nil, fmt.Errorf("load checkpoint %s (%s): %w", k, path, err)
	}
	if err != nil {
		return nil, &CorruptError{Path: path, Err: err}
	}
	if got := KeyOf(cm); got != k {
		return nil, corrupt(path, "holds the ConfigMap with key %s", got)
	}
	return cm, nil
}

// readNested reads the checkpoint k at path in the nested layout. The UID
// directory must be a real directory: a symlink in its place would lead the
// read outside the state dir.
func (s *Store) readNested(k Key, path string) ([]byte, error) {
	uidDir := filepath.Dir(path)
	if fi, err := os.Lstat(uidDir); err == nil && !fi.IsDir() {
		return nil, corrupt(uidDir, "is not a directory (mode %v): checkpoint %s cannot be read", fi.Mode(), k)
	}
	return readFile(path)
}

// readFile reads a checkpoint or pointer file without following a symlink.
// A missing file is fs.ErrNotExist; anything that is not a regular file of at
// most maxFileSize bytes is a *CorruptError.
func readFile(path string) ([]byte, error) {
	data, err := atomicfile.ReadRegular(path, maxFileSize)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, atomicfile.ErrSymlink):
		return nil, corrupt(path, "is a symbolic link")
	case errors.Is(err, syscall.ENOTDIR):
		return nil, corrupt(path, "a parent directory is not a directory")
	case errors.Is(err, atomicfile.ErrNotRegular), errors.Is(err, atomicfile.ErrTooLarge):
		return nil, &CorruptError{Path: path, Err: err}
	}
	return nil, err
}

// has reports whether the checkpoint k is on disk, without reading it
// (Load verifies it). Something other than a regular file at its path is a
// *CorruptError. Only the tests call it (Exists, export_test.go); SetCurrent
// and SetLastKnownGood check it themselves.
func (s *Store) has(k Key) (bool, error) {
	if err := ValidateKey(k); err != nil {
		return false, fmt.Errorf("check checkpoint: %w", err)
	}
	unlock, err := s.readLocked()
	if err != nil {
		return false, err
	}
	defer unlock()
	return s.exists(k)
}

func (s *Store) exists(k Key) (bool, error) {
	ok, err := s.existsAt(k, s.checkpointPath(k))
	if _, flat := flatName(k); flat && !ok && err == nil {
		return s.existsAt(k, s.nestedPath(k))
	}
	return ok, err
}

func (s *Store) existsAt(k Key, path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return false, corrupt(path, "a parent directory is not a directory")
	}
	if err != nil {
		return false, fmt.Errorf("check checkpoint %s: %w", k, err)
	}
	if !fi.Mode().IsRegular() {
		return false, corrupt(path, "is not a regular file (mode %v)", fi.Mode())
	}
	return true, nil
}

// List returns the keys of the checkpoints on disk, sorted by UID then
// resourceVersion. Temporary files are skipped; entries that are not valid
// keys or not regular files are logged and never returned.
func (s *Store) List() ([]Key, error) {
	unlock, err := s.readLocked()
	if err != nil {
		return nil, err
	}
	defer unlock()
	keys, _, err := s.list()
	return keys, err
}

// list returns the keys, in both layouts, and the valid UID directories of
// the nested layout that hold none. A key present in both layouts is
// returned once.
func (s *Store) list() (keys []Key, emptyUIDs []types.UID, err error) {
	root := filepath.Join(s.dir, checkpointsDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, fmt.Errorf("list checkpoints in %s: %w", root, err)
	}
	for _, e := range entries {
		path := filepath.Join(root, e.Name())
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			continue // an interrupted write of an older version
		}
		if !e.IsDir() {
			k, ok := parseFlatName(e.Name())
			switch {
			case !ok:
				s.log.Info("Ignoring an entry of the checkpoints directory that is not a checkpoint", "path", path, "type", e.Type())
			case !e.Type().IsRegular():
				s.log.Info("Ignoring a checkpoint entry that is not a regular file", "path", path, "type", e.Type())
			default:
				keys = append(keys, k)
			}
			continue
		}
		if err := validateComponent(e.Name(), maxComponentLen); err != nil {
			s.log.Info("Ignoring a directory that is not a valid checkpoint UID", "path", path, "err", err)
			continue
		}
		rvs, err := os.ReadDir(path)
		if err != nil {
			return nil, nil, fmt.Errorf("list checkpoints in %s: %w", path, err)
		}
		for _, rv := range rvs {
			if strings.HasPrefix(rv.Name(), atomicfile.TempPrefix) {
				continue
			}
			k := Key{UID: types.UID(e.Name()), ResourceVersion: rv.Name()}
			p := filepath.Join(path, rv.Name())
			if err := ValidateKey(k); err != nil {
				s.log.Info("Ignoring a file that is not a valid checkpoint key", "path", p, "err", err)
				continue
			}
			if !rv.Type().IsRegular() {
				s.log.Info("Ignoring a checkpoint entry that is not a regular file", "path", p, "type", rv.Type())
				continue
			}
			keys = append(keys, k)
		}
		if len(rvs) == 0 {
			emptyUIDs = append(emptyUIDs, types.UID(e.Name()))
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	return slices.Compact(keys), emptyUIDs, nil
}

func keyLess(a, b Key) bool {
	if a.UID != b.UID {
		return a.UID < b.UID
	}
	return a.ResourceVersion < b.ResourceVersion
}

// Remove deletes the checkpoint k, and its UID directory if that is left
// empty, durably. Removing a checkpoint that is not there is not an error.
func (s *Store) Remove(k Key) error {
	if err := ValidateKey(k); err != nil {
		return fmt.Errorf("remove checkpoint: %w", err)
	}
	unlock, err := s.writeLocked()
	if err != nil {
		return err
	}
	defer unlock()
	return s.remove(k)
}

func (s *Store) remove(k Key) error {
	if _, flat := flatName(k); flat {
		root := filepath.Join(s.dir, checkpointsDir)
		err := os.Remove(s.checkpointPath(k))
		switch {
		case err == nil:
			if err := atomicfile.SyncDir(root, s.sync...); err != nil {
				return fmt.Errorf("remove checkpoint %s: %w", k, err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("remove checkpoint %s: %w", k, err)
		}
	}
	path := s.nestedPath(k)
	uidDir := filepath.Dir(path)
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove checkpoint %s: %w", k, err)
	}
	if err := atomicfile.SyncDir(uidDir, s.sync...); err != nil {
		return fmt.Errorf("remove checkpoint %s: %w", k, err)
	}
	return s.removeEmptyUIDDir(uidDir)
}

// removeEmptyUIDDir removes a UID directory if it is empty.
func (s *Store) removeEmptyUIDDir(uidDir string) error {
	err := os.Remove(uidDir)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove empty checkpoint directory %s: %w", uidDir, err)
	}
	return atomicfile.SyncDir(filepath.Dir(uidDir), s.sync...)
}

// Current returns the current pointer. A pointer file that is missing (Open
// writes both when it creates a state dir), empty or otherwise untrustworthy
// is a *CorruptError; a corrupt file is moved to the quarantine first (the
// error says where). What to fall back to is the caller's decision.
func (s *Store) Current() (Pointer, error) { return s.readPointer(currentFile) }

// LastKnownGood returns the last-known-good pointer, like Current.
func (s *Store) LastKnownGood() (Pointer, error) { return s.readPointer(lastKnownGood) }

// SetCurrent points current at src, recording the Clock's now as the time it
// was set and no first run (see RecordFirstRun); a nil src, or one without a
// ConfigMap, is the local config, written as an envelope without a source.
// The checkpoint that src references must have been saved: if it is not on
// disk the error wraps ErrNotFound and nothing is written.
func (s *Store) SetCurrent(src *corev1.NodeConfigSource) error {
	return s.setPointer(currentFile, src)
}

// SetLastKnownGood points last-known-good at src, like SetCurrent.
func (s *Store) SetLastKnownGood(src *corev1.NodeConfigSource) error {
	return s.setPointer(lastKnownGood, src)
}

// RecordFirstRun records the Clock's now as the time the component first
// ran current, unless a first run is recorded already, and returns the
// pointer as it is now. Crash-loop counting starts there: the startup that
// adopted current is not a crash.
func (s *Store) RecordFirstRun() (Pointer, error) { return s.RecordFirstRunAt(time.Time{}) }

// RecordFirstRunAt is RecordFirstRun with the time given: a start that
// adopts current passes its own recorded startup time (the last of what
// RecordStartup returned), which pins that start among the startups, so
// that crash restarts are counted by the order they were recorded in, not
// by a clock that may have been stepped (see package crashloop). The zero
// time means the Clock's now.
func (s *Store) RecordFirstRunAt(at time.Time) (Pointer, error) {
	unlock, err := s.writeLocked()
	if err != nil {
		return Pointer{}, err
	}
	defer unlock()
	p, err := s.readPointerLocked(currentFile)
	if err != nil {
		return Pointer{}, fmt.Errorf("record first run: %w", err)
	}
	if !p.FirstRun.IsZero() {
		return p, nil
	}
	p.FirstRun = at
	if at.IsZero() {
		p.FirstRun = s.clock.Now()
	}
	if err := s.writePointer(currentFile, p); err != nil {
		return Pointer{}, fmt.Errorf("record first run: %w", err)
	}
	return p, nil
}

func (s *Store) readPointer(name string) (Pointer, error) {
	unlock, err := s.readLocked()
	if err != nil {
		return Pointer{}, err
	}
	p, err := s.readPointerLocked(name)
	unlock()
	return p, s.quarantineIfCorrupt(err)
}

func (s *Store) readPointerLocked(name string) (Pointer, error) {
	path := s.pointerPath(name)
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Pointer{}, corrupt(path, "is missing (a state dir gets both pointers when it is created)")
	}
	if err != nil {
		return Pointer{}, fmt.Errorf("read pointer %s: %w", name, err)
	}
	p, err := decodePointer(data)
	if errors.Is(err, ErrNewerFormat) {
		return Pointer{}, fmt.Errorf("read pointer %s: %w", path, err)
	}
	if err != nil {
		return Pointer{}, &CorruptError{Path: path, Err: err}
	}
	return p, nil
}

func (s *Store) setPointer(name string, src *corev1.NodeConfigSource) error {
	src = normalizeSource(src)
	k, remote := KeyFromSource(src)
	if remote {
		if err := ValidateKey(k); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	unlock, err := s.writeLocked()
	if err != nil {
		return err
	}
	defer unlock()
	if remote {
		ok, err := s.exists(k)
		if err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		if !ok {
			return fmt.Errorf("set %s to checkpoint %s: %w", name, k, ErrNotFound)
		}
	}
	return s.writePointer(name, Pointer{Source: src, SetTime: s.clock.Now()})
}

// writePointer writes a pointer file; the caller holds the write lock (or
// is Open, before the Store is shared).
func (s *Store) writePointer(name string, p Pointer) error {
	data, err := encodePointer(p)
	if err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	if err := s.replaceFile(s.pointerPath(name), data); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// replaceFile writes data to path atomically and durably. Something that is
// not a regular file in its place (a directory, a FIFO, a symlink), which a
// rename cannot or must not replace, is moved to the quarantine first.
func (s *Store) replaceFile(path string, data []byte) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		if _, err := s.quarantine(path); err != nil {
			return fmt.Errorf("%s is not a regular file (mode %v) and cannot be moved aside: %w", path, fi.Mode(), err)
		}
	}
	return atomicfile.WriteFile(path, data, filePerm, s.sync...)
}

// quarantineDamagedSecondCopies moves to the quarantine the damaged copy in
// the nested layout of a kept checkpoint whose flat copy verifies. Load
// never reads that copy (the flat one comes first), so nothing else would
// move it aside; an intact second copy is left, as a spare. The caller
// holds the write lock.
func (s *Store) quarantineDamagedSecondCopies(keep map[Key]bool) {
	for k := range keep {
		if _, flat := flatName(k); !flat {
			continue
		}
		nested := s.nestedPath(k)
		if _, err := os.Lstat(nested); err != nil {
			continue // the usual case: one copy
		}
		if _, err := s.loadAt(k, s.checkpointPath(k), func(_ Key, p string) ([]byte, error) { return readFile(p) }); err != nil {
			continue // the nested copy is the one Load uses
		}
		var ce *CorruptError
		if _, err := s.loadAt(k, nested, s.readNested); errors.As(err, &ce) {
			if qerr := s.moveAside(ce); qerr != nil {
				s.log.Error(qerr, "Cannot move a damaged second copy of a checkpoint to the quarantine", "path", nested)
			}
		}
	}
}

// GC removes every checkpoint that neither current nor last-known-good
// references, and UID directories left empty, and returns the keys it
// removed. If either pointer cannot be read (missing, corrupt, unreadable)
// it removes nothing: a damaged pointer might reference any checkpoint. Each
// directory it removes from is fsynced once, after all its removals.
func (s *Store) GC() ([]Key, error) {
	unlock, err := s.writeLocked()
	if err != nil {
		return nil, err
	}
	defer unlock()
	keep := map[Key]bool{}
	for _, name := range []string{currentFile, lastKnownGood} {
		p, err := s.readPointerLocked(name)
		if err != nil {
			return nil, fmt.Errorf("garbage-collect checkpoints: removing nothing: %w", err)
		}
		if k, ok := KeyFromSource(p.Source); ok {
			keep[k] = true
		}
	}
	s.quarantineDamagedSecondCopies(keep)
	keys, emptyUIDs, err := s.list()
	if err != nil {
		return nil, fmt.Errorf("garbage-collect checkpoints: %w", err)
	}
	root := filepath.Join(s.dir, checkpointsDir)
	// Temporary files of interrupted writes: under the lock none is in
	// progress. (Older versions wrote those of checkpoints in checkpoints/.)
	for _, d := range []string{filepath.Join(s.dir, tmpDir), filepath.Join(s.dir, metaDir), s.trackingDir, root} {
		stale, err := atomicfile.RemoveTemp(d)
		if len(stale) > 0 {
			s.log.Info("Removed temporary files of interrupted writes", "paths", stale)
		}
		if err != nil {
			return nil, fmt.Errorf("garbage-collect checkpoints: %w", err)
		}
	}
	var removed []Key
	touched := map[types.UID]bool{}
	rootChanged := false
	for _, k := range keys {
		if keep[k] {
			continue
		}
		// In either layout, or both.
		if _, flat := flatName(k); flat {
			err := os.Remove(s.checkpointPath(k))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, fmt.Errorf("garbage-collect checkpoints: remove %s: %w", k, err)
			}
			rootChanged = rootChanged || err == nil
		}
		err := os.Remove(s.nestedPath(k))
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return removed, fmt.Errorf("garbage-collect checkpoints: remove %s: %w", k, err)
		}
		if err == nil {
			touched[k.UID] = true
		}
		removed = append(removed, k)
	}
	for _, u := range emptyUIDs {
		touched[u] = true
	}
	removedDir := rootChanged
	for u := range touched {
		uidDir := filepath.Join(root, string(u))
		err := os.Remove(uidDir)
		switch {
		case err == nil:
			removedDir = true
		case errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			// Still holds a checkpoint that is kept: its own entries changed.
			if err := atomicfile.SyncDir(uidDir, s.sync...); err != nil {
				return removed, fmt.Errorf("garbage-collect checkpoints: %w", err)
			}
		default:
			return removed, fmt.Errorf("garbage-collect checkpoints: remove empty directory %s: %w", uidDir, err)
		}
	}
	if removedDir {
		if err := atomicfile.SyncDir(root, s.sync...); err != nil {
			return removed, fmt.Errorf("garbage-collect checkpoints: %w", err)
		}
	}
	return removed, nil
}
