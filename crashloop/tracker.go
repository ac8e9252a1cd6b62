package crashloop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// FileName is the name of the startups file inside the Tracker's directory.
const FileName = "startups.json"

// Options configures a Tracker.
type Options struct {
	// Dir is the tracking directory that holds FileName. Required. It is
	// created with mode 0700 (and missing parents) if it does not exist; the
	// mode of an existing directory is left alone.
	Dir string
	// Clock stamps startups and is the "now" of Tracker.CrashLooping.
	// Default: clock.RealClock{}.
	Clock clock.PassiveClock
}

// Tracker records startups in its file and answers crash-loop questions from
// it. Its methods may be called from several goroutines; across processes
// the caller must hold a lock on the directory.
type Tracker struct {
	path  string
	clock clock.PassiveClock
	// mu serializes the read-modify-write of RecordStartup.
	mu sync.Mutex
}

// New validates opts, makes sure opts.Dir exists, and removes temporary files
// that an interrupted write of the startups file left there (and only those:
// other files in the directory belong to others).
func New(opts Options) (*Tracker, error) {
	if opts.Dir == "" {
		return nil, errors.New("crashloop: Options.Dir is required")
	}
	dir := filepath.Clean(opts.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("crashloop: Options.Dir: create %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crashloop: Options.Dir: list %s: %w", dir, err)
	}
	tempPrefix := atomicfile.TempPrefix + FileName + "-"
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("crashloop: remove stale temporary file %s: %w", p, err)
		}
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return &Tracker{path: filepath.Join(dir, FileName), clock: c}, nil
}

// Path returns the path of the startups file.
func (t *Tracker) Path() string { return t.path }

// Startups returns the recorded startup times in recording order. A missing
// file yields no startups and no error. A corrupt file yields no startups and
// a *CorruptError, which the caller logs and otherwise ignores: the file
// counts as empty. Any other error is an I/O failure reading the file.
func (t *Tracker) Startups() ([]time.Time, error) {
	return t.read()
}

// StartupsSince returns how many recorded startups are strictly after since,
// with the same error contract as Startups (a corrupt file counts 0).
func (t *Tracker) StartupsSince(since time.Time) (int, error) {
	ts, err := t.read()
	return countAfter(ts, since), err
}

// RecordStartup appends the clock's current time to the startups file and
// keeps only the threshold+1 most recently recorded entries. threshold must
// be at least the threshold of the next verdict (pass MaxThreshold when that
// is not known yet), or the history needed to trip it is thrown away.
//
// The error contract:
//   - nil: the startup is recorded.
//   - a *CorruptError (errors.As): the old file was corrupt; it has been
//     replaced by a file holding only this startup, which is recorded. Log it
//     and carry on.
//   - any other error: nothing was written (an invalid threshold, an
//     unreadable file, a failed write).
func (t *Tracker) RecordStartup(threshold int) error {
	if err := ValidateThreshold(threshold); err != nil {
		return fmt.Errorf("record startup in %s: %w", t.path, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()

	ts, err := t.read()
	var corrupt *CorruptError
	if err != nil {
		if !errors.As(err, &corrupt) {
			return fmt.Errorf("record startup: %w", err)
		}
		ts = nil
		// A rename cannot replace a directory. Remove it if it is empty;
		// a directory with content is left for a human to look at.
		if fi, lerr := os.Lstat(t.path); lerr == nil && fi.IsDir() {
			if rerr := os.Remove(t.path); rerr != nil {
				return fmt.Errorf("record startup: cannot replace %v: %w", corrupt, rerr)
			}
		}
	}
	ts = append(ts, t.clock.Now().UTC())
	if keep := threshold + 1; len(ts) > keep {
		ts = ts[len(ts)-keep:]
	}
	data, err := encodeStartups(ts)
	if err != nil {
		return fmt.Errorf("record startup in %s: %w", t.path, err)
	}
	if err := atomicfile.WriteFile(t.path, data, 0o600); err != nil {
		return fmt.Errorf("record startup: %w", err)
	}
	if corrupt != nil {
		return corrupt
	}
	return nil
}

// CrashLooping reads the startups file and returns the CrashLooping verdict
// for a config set as current at currentSetTime with the given trial period
// and threshold, as of the clock's now. The startup of the calling process
// must already be recorded. An invalid threshold is an error. With a corrupt
// file the verdict is false and the *CorruptError is returned for logging, as
// for Startups.
func (t *Tracker) CrashLooping(currentSetTime time.Time, trial time.Duration, threshold int) (bool, error) {
	if err := ValidateThreshold(threshold); err != nil {
		return false, fmt.Errorf("crash-loop verdict from %s: %w", t.path, err)
	}
	ts, err := t.read()
	return CrashLooping(Input{
		Startups:       ts,
		CurrentSetTime: currentSetTime,
		Now:            t.clock.Now(),
		Trial:          trial,
		Threshold:      threshold,
	}), err
}

// read loads the startups file; see Startups for the error contract.
func (t *Tracker) read() ([]time.Time, error) {
	// No symlink followed, and a FIFO put in the file's place cannot block.
	data, err := atomicfile.ReadRegular(t.path, maxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, atomicfile.ErrNotRegular) || errors.Is(err, atomicfile.ErrTooLarge) || errors.Is(err, atomicfile.ErrSymlink) {
		return nil, &CorruptError{Path: t.path, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("read startups file: %w", err)
	}
	ts, err := decodeStartups(data)
	if err != nil {
		return nil, &CorruptError{Path: t.path, Err: err}
	}
	return ts, nil
}
