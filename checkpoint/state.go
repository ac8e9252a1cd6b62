package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// QuarantineDir is the directory of a state dir that corrupt or foreign
// files are moved into, so that the evidence survives and nothing is
// overwritten.
const QuarantineDir = "quarantine"

// MaxQuarantined is how many entries the quarantine keeps; the oldest are
// removed when a new one arrives.
const MaxQuarantined = 8

// quarantineIfCorrupt moves the file of a *CorruptError in err to the
// quarantine and records where in the error. Other errors, and nil, are
// returned as they are.
func (s *Store) quarantineIfCorrupt(err error) error {
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.MovedTo != "" {
		return err
	}
	if _, lerr := os.Lstat(ce.Path); lerr != nil {
		return err // nothing there to move (a missing pointer, a parent that is a file)
	}
	unlock, lerr := s.writeLocked()
	if lerr != nil {
		return err
	}
	defer unlock()
	if qerr := s.moveAside(ce); qerr != nil {
		s.log.Error(qerr, "Cannot move a corrupt file to the quarantine", "path", ce.Path)
	}
	return err
}

// moveAside moves the file of ce to the quarantine and records where. The
// caller holds the write lock.
func (s *Store) moveAside(ce *CorruptError) error {
	to, err := s.quarantine(ce.Path)
	if err != nil {
		return err
	}
	ce.MovedTo = to
	return nil
}

// quarantine moves path (a file, a directory, a symlink, a FIFO: whatever
// is there) into <dir>/quarantine, named by the time and its path in the
// state dir, keeps the newest MaxQuarantined entries, and returns the new
// path. The caller holds the write lock, or is Open.
func (s *Store) quarantine(path string) (string, error) {
	qdir := filepath.Join(s.dir, QuarantineDir)
	rel, err := filepath.Rel(s.dir, path)
	if err != nil || strings.HasPrefix(rel, "..") || rel == QuarantineDir {
		return "", fmt.Errorf("%s is not inside the state dir %s", path, s.dir)
	}
	if err := s.ensureQuarantineDir(); err != nil {
		return "", err
	}
	name := s.clock.Now().UTC().Format("20060102T150405.000000000Z") + "-" + strings.ReplaceAll(rel, string(filepath.Separator), "_")
	to, err := freeName(qdir, name)
	if err != nil {
		return "", err
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move %s to the quarantine: %w", path, err)
	}
	// The new entry first: a power cut between the two fsyncs then leaves
	// the file in both places, never in none.
	if err := atomicfile.SyncDir(qdir, s.sync...); err != nil {
		return to, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(path), s.sync...); err != nil {
		return to, err
	}
	s.log.Info("Moved a corrupt or foreign file to the quarantine", "path", path, "movedTo", to)
	s.trimQuarantine(qdir)
	return to, nil
}

// maxQuarantineNames bounds the search for a free name in the quarantine:
// names carry the time to the nanosecond, so more than a few collisions
// mean something else is wrong.
const maxQuarantineNames = 100

// freeName returns qdir/name, or qdir/name.<i> for the first i that is
// free. Any answer of lstat but "does not exist" (EACCES on a quarantine the
// component cannot search, EIO) ends the search with that error: the file
// stays where it is, and the caller goes on without moving it.
func freeName(qdir, name string) (string, error) {
	to := filepath.Join(qdir, name)
	for i := 1; i <= maxQuarantineNames; i++ {
		_, err := os.Lstat(to)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return to, nil
		case err != nil:
			return "", fmt.Errorf("find a free name in the quarantine %s: %w", qdir, err)
		}
		to = filepath.Join(qdir, fmt.Sprintf("%s.%d", name, i))
	}
	return "", fmt.Errorf("find a free name in the quarantine %s: %s and %d more are taken", qdir, name, maxQuarantineNames)
}

// ensureQuarantineDir makes <dir>/quarantine a real directory, like every
// other directory of the layout: created if missing, and anything else in
// its place (a symlink, which would move state files out of the state dir
// and let trimming delete files elsewhere; a file; a FIFO) is moved into the
// new quarantine itself, through tmp/, so the evidence survives. The caller
// holds the write lock, or is Open.
func (s *Store) ensureQuarantineDir() error {
	qdir := filepath.Join(s.dir, QuarantineDir)
	fi, err := os.Lstat(qdir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case errors.Is(err, fs.ErrNotExist):
		_, err := s.mkdirDurable(qdir)
		return err
	case err != nil:
		return fmt.Errorf("stat %s: %w", qdir, err)
	}
	// Something that is not a directory: park it in tmp/ (same file
	// system, never garbage-collected as a temporary file since its name
	// does not carry the prefix), make the directory, move it in.
	stamp := s.clock.Now().UTC().Format("20060102T150405.000000000Z")
	parked := filepath.Join(s.dir, tmpDir, "quarantine-"+stamp)
	if _, err := s.mkdirDurable(filepath.Join(s.dir, tmpDir)); err != nil {
		return err
	}
	if err := os.Rename(qdir, parked); err != nil {
		return fmt.Errorf("%s is not a directory (mode %v) and cannot be moved aside: %w", qdir, fi.Mode(), err)
	}
	// Each move is made durable where it lands before it is made durable
	// where it left (mkdirDurable syncs the state dir), so a power cut
	// never leaves the moved thing in no directory.
	if err := atomicfile.SyncDir(filepath.Join(s.dir, tmpDir), s.sync...); err != nil {
		return err
	}
	if _, err := s.mkdirDurable(qdir); err != nil {
		return err
	}
	to := filepath.Join(qdir, stamp+"-"+QuarantineDir)
	if err := os.Rename(parked, to); err != nil {
		return fmt.Errorf("move %s into the quarantine: %w", parked, err)
	}
	if err := atomicfile.SyncDir(qdir, s.sync...); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Join(s.dir, tmpDir), s.sync...); err != nil {
		return err
	}
	s.log.Info("Moved what was in place of the quarantine directory into it", "mode", fi.Mode(), "movedTo", to)
	return nil
}

// trimQuarantine removes the oldest entries beyond MaxQuarantined. Names
// start with a fixed-width UTC time, so name order is age order.
func (s *Store) trimQuarantine(qdir string) {
	entries, err := os.ReadDir(qdir)
	if err != nil || len(entries) <= MaxQuarantined {
		return
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names[:len(names)-MaxQuarantined] {
		if err := os.RemoveAll(filepath.Join(qdir, n)); err != nil {
			s.log.Error(err, "Trimming the quarantine", "path", filepath.Join(qdir, n))
		}
	}
}

func (s *Store) trackingPath(name string) string { return filepath.Join(s.trackingDir, name) }

// readTracking reads a tracking file: (nil, nil) when it is missing, a
// *CorruptError when it is not a regular file of a sane size, and any other
// error (EIO, EACCES) as it is, to be returned, never "repaired".
func readTracking(path string) ([]byte, error) {
	data, err := atomicfile.ReadRegular(path, maxTrackingFileSize)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, atomicfile.ErrSymlink), errors.Is(err, atomicfile.ErrNotRegular), errors.Is(err, atomicfile.ErrTooLarge):
		return nil, &CorruptError{Path: path, Err: err}
	}
	return nil, fmt.Errorf("read %s: %w", path, err)
}

// BadMarks returns every bad mark of this component version. A missing file
// is no marks. A corrupt file is moved to the quarantine and reads as no
// marks, with its *CorruptError (a lost mark delays a verdict: the config is
// found bad again when it is tried, and a crash loop is found at once, since
// the startups since its first run are kept). Any other error (a failed
// read) is returned with nil marks, and nothing is written.
func (s *Store) BadMarks() (BadMarks, error) {
	unlock, err := s.readLocked()
	if err != nil {
		return nil, err
	}
	m, legacy, err := s.readBadMarks()
	unlock()
	if err != nil {
		return m, s.quarantineIfCorrupt(err)
	}
	if legacy {
		// Older versions wrote the marks without a checksum: write them in
		// the current format once.
		if err := s.withWriteLock(func() error { return s.writeBadMarks(m) }); err != nil {
			s.log.Error(err, "Rewriting the bad marks in the current format")
		}
	}
	return m, nil
}

func (s *Store) readBadMarks() (BadMarks, bool, error) {
	path := s.trackingPath(BadConfigsFile)
	data, err := readTracking(path)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return BadMarks{}, false, err
		}
		return nil, false, err
	}
	if data == nil {
		return BadMarks{}, false, nil
	}
	m, legacy, err := readBadMarks(data)
	if err != nil {
		return BadMarks{}, false, &CorruptError{Path: path, Err: err}
	}
	if err := plainAfterMigration(path, legacy, s.envelopesOnly); err != nil {
		return BadMarks{}, false, err
	}
	return m, legacy, nil
}

func (s *Store) writeBadMarks(m BadMarks) error {
	data, err := encodeBadMarks(m)
	if err != nil {
		return err
	}
	return s.replaceFile(s.trackingPath(BadConfigsFile), data)
}

func (s *Store) withWriteLock(f func() error) error {
	unlock, err := s.writeLocked()
	if err != nil {
		return err
	}
	defer unlock()
	return f()
}

// MarkBad records that the config src names is bad, with mark's reason and
// problem and the Clock's now (mark.Time is ignored), under MarkKey(src).
//
// Marks are never dropped while the config they name could run again: a
// mark whose ConfigMap is still referenced by current or last-known-good, or
// still checkpointed, is kept whatever the count. Only when more than
// MaxUnreferencedBadMarks marks name ConfigMaps that are gone from the node
// are the oldest of those dropped.
//
// A corrupt marks file is moved to the quarantine and replaced (the
// *CorruptError is returned after the new mark was written, for the caller
// to report). A file that cannot be read is an error, and nothing is
// written.
func (s *Store) MarkBad(src *corev1.NodeConfigSource, mark BadMark) error {
	key := MarkKey(src)
	if key == "" {
		return errors.New("mark bad: the local config cannot be marked bad")
	}
	if err := validateMarkKey(key); err != nil {
		return fmt.Errorf("mark bad: %w", err)
	}
	unlock, err := s.writeLocked()
	if err != nil {
		return err
	}
	defer unlock()
	m, _, rerr := s.readBadMarks()
	var ce *CorruptError
	if rerr != nil && !errors.As(rerr, &ce) {
		return fmt.Errorf("mark %s bad: %w", key, rerr)
	}
	if ce != nil {
		if err := s.moveAside(ce); err != nil {
			return fmt.Errorf("mark %s bad: %v; %w", key, rerr, err)
		}
	}
	mark.Time = s.clock.Now().UTC()
	m[key] = mark
	s.evictUnreferenced(m, key)
	if err := s.writeBadMarks(m); err != nil {
		return fmt.Errorf("mark %s bad: %w", key, err)
	}
	return rerr
}

// evictUnreferenced drops the oldest marks of ConfigMaps that no pointer
// references and no checkpoint holds, beyond MaxUnreferencedBadMarks. The
// caller holds the write lock.
func (s *Store) evictUnreferenced(m BadMarks, keep string) {
	if len(m) <= MaxUnreferencedBadMarks {
		return
	}
	referenced := map[Key]bool{}
	for _, name := range []string{currentFile, lastKnownGood} {
		if p, err := s.readPointerLocked(name); err == nil {
			if k, ok := KeyFromSource(p.Source); ok {
				referenced[k] = true
			}
		} else {
			return // a damaged pointer might reference any mark: drop none
		}
	}
	keys, _, err := s.list()
	if err != nil {
		return
	}
	for _, k := range keys {
		referenced[k] = true
	}
	var unreferenced []string
	for _, key := range sortedMarkKeys(m) {
		parts := strings.SplitN(key, "/", 3)
		if !referenced[Key{UID: types.UID(parts[0]), ResourceVersion: parts[1]}] {
			unreferenced = append(unreferenced, key)
		}
	}
	// Oldest first; the mark just made is never the one to go.
	excess := len(unreferenced) - MaxUnreferencedBadMarks
	for _, key := range unreferenced {
		if excess <= 0 {
			break
		}
		if key != keep {
			delete(m, key)
			excess--
		}
	}
}

// ForgetBad removes the marks that match pattern ("<uid>/<rv>/<payload
// key>", "<uid>/<rv>" for every payload key of a ConfigMap, or "<uid>" for
// every version of it) and returns the keys removed. This is the repair
// step after a dead end: when current is among the configs forgotten, its
// first run is cleared first, so it gets a fresh trial and the startups
// before the repair no longer count.
func (s *Store) ForgetBad(pattern string) ([]string, error) {
	if pattern == "" {
		return nil, errors.New("forget bad marks: empty pattern")
	}
	unlock, err := s.writeLocked()
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, _, err := s.readBadMarks()
	if err != nil {
		return nil, fmt.Errorf("forget bad marks: %w", err)
	}
	var forgotten []string
	for k := range m {
		if markKeyMatches(k, pattern) {
			forgotten = append(forgotten, k)
		}
	}
	sort.Strings(forgotten)
	if len(forgotten) == 0 {
		return nil, nil
	}
	// Clear current's first run before the marks go: a crash in between
	// leaves the mark (still bad, repair again), never a mark-free config
	// whose old startups count against it.
	if cur, err := s.readPointerLocked(currentFile); err == nil && !cur.FirstRun.IsZero() {
		for _, k := range forgotten {
			if markKeyMatches(MarkKey(cur.Source), k) || markKeyMatches(k, MarkKey(cur.Source)) {
				cur.FirstRun = time.Time{}
				if err := s.writePointer(currentFile, cur); err != nil {
					return nil, fmt.Errorf("forget bad marks: %w", err)
				}
				break
			}
		}
	}
	for _, k := range forgotten {
		delete(m, k)
	}
	if err := s.writeBadMarks(m); err != nil {
		return nil, fmt.Errorf("forget bad marks: %w", err)
	}
	return forgotten, nil
}

// Startups returns the recorded startup times, oldest first. A missing file
// is none; a corrupt one is moved to the quarantine and reads as none, with
// its *CorruptError (a lost record can delay a crash-loop verdict, never
// cause a false one); any other error is returned as it is.
func (s *Store) Startups() ([]time.Time, error) {
	unlock, err := s.readLocked()
	if err != nil {
		return nil, err
	}
	ts, _, err := s.readStartups()
	unlock()
	return ts, s.quarantineIfCorrupt(err)
}

func (s *Store) readStartups() ([]time.Time, bool, error) {
	path := s.trackingPath(StartupsFile)
	data, err := readTracking(path)
	if err != nil || data == nil {
		return nil, false, err
	}
	ts, legacy, err := decodeStartups(data)
	if err != nil {
		return nil, false, &CorruptError{Path: path, Err: err}
	}
	if err := plainAfterMigration(path, legacy, s.envelopesOnly); err != nil {
		return nil, false, err
	}
	return ts, legacy, nil
}

// RecordStartup appends the Clock's now to the startups file, keeping the
// newest MaxStartups, and returns every recorded startup, this one last.
//
// The startups are returned whatever happens, this one always counted, so
// that a failing disk cannot hide a crash loop:
//   - a corrupt file is moved to the quarantine and replaced by one holding
//     this startup (its *CorruptError is returned with the startups, for the
//     caller to report);
//   - a file that cannot be written (ENOSPC, EROFS, EACCES) leaves the old
//     file, and the error is returned with what was read plus this start;
//   - a file that cannot be read (EACCES, EIO) is never replaced (nothing
//     is written, so no record is lost to a transient fault), and the
//     error is returned with this start alone.
//
// Any error that is not a *CorruptError means the record on disk is
// incomplete: crash restarts cannot all be counted.
func (s *Store) RecordStartup() ([]time.Time, error) {
	now := s.clock.Now().UTC()
	unlock, err := s.writeLocked()
	if err != nil {
		return []time.Time{now}, err
	}
	defer unlock()
	ts, _, rerr := s.readStartups()
	var ce *CorruptError
	if rerr != nil {
		if !errors.As(rerr, &ce) {
			return []time.Time{now}, fmt.Errorf("record startup: %w", rerr)
		}
		ts = nil
		if err := s.moveAside(ce); err != nil {
			return []time.Time{now}, fmt.Errorf("record startup: %v; %w", rerr, err)
		}
	}
	ts = append(ts, now)
	if len(ts) > MaxStartups {
		ts = ts[len(ts)-MaxStartups:]
	}
	if err := s.writeStartups(ts); err != nil {
		return ts, fmt.Errorf("record startup: %w", err)
	}
	return ts, rerr
}

func (s *Store) writeStartups(ts []time.Time) error {
	data, err := encodeStartups(ts)
	if err != nil {
		return err
	}
	return s.replaceFile(s.trackingPath(StartupsFile), data)
}
