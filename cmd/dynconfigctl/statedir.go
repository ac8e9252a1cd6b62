package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// The top-level directories of a state dir (package checkpoint). They are
// only checked for, before checkpoint.Open, which would create them: the CLI
// never creates a state dir where there was none. Every file in them is read
// by package checkpoint (checkpoint.Inspect, checkpoint.Store), never here.
const (
	checkpointsDir = "checkpoints"
	metaDir        = "meta"
	trackingDir    = "tracking"
)

// stateDir is a state dir that passed checkStateDir.
type stateDir struct {
	// path is absolute.
	path string
	// versions are the names of the directories under tracking/, sorted.
	versions []string
}

// checkStateDir makes sure dir is an existing dynconfig state dir without
// creating anything: a directory holding checkpoints/, meta/ and tracking/
// directories, as checkpoint.Open lays it out. It is checked before
// checkpoint.Open, which would create a state dir anywhere.
func checkStateDir(dir string) (stateDir, error) { return checkLayout(dir, false) }

// checkStateDirToRead is checkStateDir for a command that only reads: a
// layout directory that is there but is not a directory (a file, a FIFO, a
// symbolic link) is damage to show, not a reason to refuse.
func checkStateDirToRead(dir string) (stateDir, error) { return checkLayout(dir, true) }

func checkLayout(dir string, readOnly bool) (stateDir, error) {
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
	// A state dir is recognised by its layout: one that lost a
	// sub-directory is damaged (inspect shows what is left and names what
	// is missing), not "not a state dir". A directory with fewer than two of
	// checkpoints/, meta/, tracking/ and the lock file is refused, so that a
	// typo never gets a layout created in it.
	found := 0
	for _, sub := range []string{checkpointsDir, metaDir, trackingDir, "lock"} {
		fi, err := os.Lstat(filepath.Join(abs, sub))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return stateDir{}, fmt.Errorf("state dir %s: %w", abs, err)
		case sub != "lock" && !fi.IsDir() && !readOnly:
			return stateDir{}, fmt.Errorf("%s is damaged: %s is not a directory; inspect it with dynconfigctl inspect", abs, filepath.Join(abs, sub))
		}
		found++
	}
	if found < 2 {
		return stateDir{}, fmt.Errorf("%s is not a dynconfig state dir: it has no %s/ directory (a state dir holds %s/, %s/ and %s/)",
			abs, metaDir, checkpointsDir, metaDir, trackingDir)
	}
	sd := stateDir{path: abs}
	tracking := filepath.Join(abs, trackingDir)
	if fi, err := os.Lstat(tracking); err != nil || !fi.IsDir() {
		return sd, nil // missing or not a directory: checkpoint.Inspect reports it
	}
	entries, err := os.ReadDir(tracking)
	if err != nil {
		return stateDir{}, fmt.Errorf("state dir %s: list component versions: %w", abs, err)
	}
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

// parseMarkPattern parses the mark argument of forget-bad:
// "<uid>/<resourceVersion>", every payload key of that ConfigMap version (and
// the marks older versions wrote, which have no payload key), or
// "<uid>/<resourceVersion>/<payload key>", one config, the form of the keys
// inspect shows. Each part is validated as package checkpoint validates it.
func parseMarkPattern(s string) (string, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 2 && len(parts) != 3 {
		return "", usagef("bad mark %q: want UID/RESOURCEVERSION or UID/RESOURCEVERSION/PAYLOADKEY", s)
	}
	k := checkpoint.Key{UID: types.UID(parts[0]), ResourceVersion: parts[1]}
	if err := checkpoint.ValidateKey(k); err != nil {
		return "", &usageError{err: fmt.Errorf("bad mark %q: %w", s, err)}
	}
	if len(parts) == 3 {
		if errs := validation.IsConfigMapKey(parts[2]); len(errs) > 0 {
			return "", usagef("bad mark %q: payload key %q: %s", s, parts[2], strings.Join(errs, "; "))
		}
	}
	return s, nil
}

// markMatches reports whether the bad-mark key matches pattern as
// checkpoint.Store.ForgetBad matches it: the same key, or a key of the
// ConfigMap version (or ConfigMap) that pattern names.
func markMatches(key, pattern string) bool {
	return key == pattern || strings.HasPrefix(key, pattern+"/")
}
