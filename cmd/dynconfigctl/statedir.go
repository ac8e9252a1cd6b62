package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// The state dir layout (DESIGN.md, "On-disk layout"; package checkpoint).
const (
	checkpointsDir = "checkpoints"
	metaDir        = "meta"
	trackingDir    = "tracking"
)

// maxTrackingFile bounds what inspect --no-lock reads of a tracking file.
// The bad-config file is bounded to lkg.DefaultMaxEntries marks by its writer,
// far below this.
const maxTrackingFile = 4 << 20

// stateDir is a state dir that passed checkStateDir.
type stateDir struct {
	// path is absolute.
	path string
	// versions are the names of the directories under tracking/, sorted.
	versions []string
}

// checkStateDir makes sure dir is an existing dynconfig state dir without
// creating anything: a directory holding checkpoints/, meta/ and tracking/
// directories, as checkpoint.Open lays it out.
func checkStateDir(dir string) (stateDir, error) {
	if dir == "" {
		return stateDir{}, usagef("the state dir must not be empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return stateDir{}, fmt.Errorf("state dir %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return stateDir{}, fmt.Errorf("state dir %s does not exist", abs)
	}
	if err != nil {
		return stateDir{}, fmt.Errorf("state dir %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return stateDir{}, fmt.Errorf("state dir %s is not a directory", abs)
	}
	for _, sub := range []string{checkpointsDir, metaDir, trackingDir} {
		fi, err := os.Lstat(filepath.Join(abs, sub))
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
			return stateDir{}, fmt.Errorf("%s is not a dynconfig state dir: it has no %s/ directory (a state dir holds %s/, %s/ and %s/)",
				abs, sub, checkpointsDir, metaDir, trackingDir)
		}
		if err != nil {
			return stateDir{}, fmt.Errorf("state dir %s: %w", abs, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(abs, trackingDir))
	if err != nil {
		return stateDir{}, fmt.Errorf("state dir %s: list component versions: %w", abs, err)
	}
	sd := stateDir{path: abs}
	for _, e := range entries {
		if e.IsDir() {
			sd.versions = append(sd.versions, e.Name())
		}
	}
	slices.Sort(sd.versions)
	return sd, nil
}

// selectVersions returns the component versions a command looks at: the one
// asked for, which must have a tracking dir, or all of them.
func (sd stateDir) selectVersions(version string) ([]string, error) {
	if version == "" {
		return sd.versions, nil
	}
	if !slices.Contains(sd.versions, version) {
		return nil, fmt.Errorf("state dir %s has no tracking dir for component version %q (%s)",
			sd.path, version, sd.describeVersions())
	}
	return []string{version}, nil
}

func (sd stateDir) describeVersions() string {
	if len(sd.versions) == 0 {
		return fmt.Sprintf("%s/ is empty", trackingDir)
	}
	return "present: " + strings.Join(sd.versions, ", ")
}

func (sd stateDir) trackingDir(version string) string {
	return filepath.Join(sd.path, trackingDir, version)
}

// inUseError is returned when a command needs the state-dir lock and a
// running component holds it.
type inUseError struct {
	dir string
	// hint says what the operator can do.
	hint string
	err  error
}

func (e *inUseError) Error() string {
	return fmt.Sprintf("state dir %s is in use by a running component; %s", e.dir, e.hint)
}
func (e *inUseError) Unwrap() error { return e.err }

// storeOptions are what openStore needs besides the state dir.
type storeOptions struct {
	clock  clock.PassiveClock
	logger klog.Logger
	// lockedHint completes the in-use error.
	lockedHint string
}

// open opens the state dir with checkpoint.Open, which takes its lock.
// checkpoint.Open needs a component version and creates its tracking dir:
// to create nothing, it is given an existing one (version, which the caller
// has checked, or the first present).
func (sd stateDir) open(version string, o storeOptions) (*checkpoint.Store, error) {
	if version == "" {
		if len(sd.versions) == 0 {
			return nil, fmt.Errorf("%s is not a usable dynconfig state dir: %s/ holds no component version directory", sd.path, trackingDir)
		}
		version = sd.versions[0]
	}
	s, err := checkpoint.Open(checkpoint.Options{Dir: sd.path, ComponentVersion: version, Clock: o.clock, Logger: o.logger})
	if errors.Is(err, checkpoint.ErrLocked) {
		return nil, &inUseError{dir: sd.path, hint: o.lockedHint, err: err}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// parseMarkKey parses "<uid>/<resourceVersion>", the form of bad marks and
// checkpoint keys, and validates both parts as checkpoint keys.
func parseMarkKey(s string) (checkpoint.Key, error) {
	uid, rv, ok := strings.Cut(s, "/")
	if !ok {
		return checkpoint.Key{}, usagef("bad mark %q: want UID/RESOURCEVERSION", s)
	}
	k := checkpoint.Key{UID: types.UID(uid), ResourceVersion: rv}
	if err := checkpoint.ValidateKey(k); err != nil {
		return checkpoint.Key{}, &usageError{err: fmt.Errorf("bad mark %q: %w", s, err)}
	}
	return k, nil
}

// readNoFollow reads a regular file of at most limit bytes without following
// a symbolic link, for the files inspect --no-lock reads. A missing file is
// fs.ErrNotExist.
func readNoFollow(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (mode %v)", path, fi.Mode())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}
