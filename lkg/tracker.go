package lkg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// BadConfigsFile is the name of the bad-config file inside a tracking dir.
const BadConfigsFile = "bad-configs.json"

// maxFileSize bounds the bad-config file: DefaultMaxEntries marks with long
// reasons fit many times over.
const maxFileSize = 4 << 20

// DefaultMaxEntries is the number of bad marks a Tracker keeps when
// TrackerOptions.MaxEntries is zero.
const DefaultMaxEntries = 100

// Entry is one bad mark: when a config was found bad and why. Reason is the
// text reported in the ConfigOK condition when the mark was made.
type Entry struct {
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
}

// CorruptError reports a bad-config file that exists but cannot be decoded.
// Callers treat the file as empty: the marks are lost, and a bad config is
// found bad again the next time it is tried.
type CorruptError struct {
	Path string
	Err  error
}

// Error names the file and the problem.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt bad-config file %s: %v", e.Path, e.Err)
}

// Unwrap returns the underlying decode or read error.
func (e *CorruptError) Unwrap() error { return e.Err }

// TrackerOptions configures a Tracker.
type TrackerOptions struct {
	// Dir is the tracking dir the bad-config file lives in. Required. It is
	// created (0700) if missing.
	Dir string
	// Clock stamps new marks. Default: the real clock.
	Clock clock.PassiveClock
	// MaxEntries bounds the file: when a new mark would exceed it, the oldest
	// marks are dropped. Zero means DefaultMaxEntries.
	MaxEntries int
}

// Tracker records which configs are known to be bad, in
// <Dir>/bad-configs.json, keyed "<uid>/<resourceVersion>" (see Key). Every
// write is atomic and durable. A Tracker is not safe for concurrent use; the
// state-dir lock keeps other processes out.
type Tracker struct {
	path  string
	clock clock.PassiveClock
	max   int
}

// NewTracker validates opts and returns a Tracker.
func NewTracker(opts TrackerOptions) (*Tracker, error) {
	if opts.Dir == "" {
		return nil, errors.New("lkg: TrackerOptions.Dir is required")
	}
	if opts.MaxEntries < 0 {
		return nil, fmt.Errorf("lkg: TrackerOptions.MaxEntries must be >= 0, got %d", opts.MaxEntries)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lkg: create tracking dir: %w", err)
	}
	return &Tracker{path: filepath.Join(opts.Dir, BadConfigsFile), clock: opts.Clock, max: opts.MaxEntries}, nil
}

// Path is the bad-config file's path.
func (t *Tracker) Path() string { return t.path }

// Entries returns every bad mark. A missing file is no marks. A file that
// cannot be read or decoded returns an empty map and a *CorruptError.
func (t *Tracker) Entries() (map[string]Entry, error) {
	data, err := atomicfile.ReadRegular(t.path, maxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Entry{}, nil
	}
	if err != nil {
		return map[string]Entry{}, &CorruptError{Path: t.path, Err: err}
	}
	m, err := DecodeBadConfigs(data)
	if err != nil {
		return map[string]Entry{}, &CorruptError{Path: t.path, Err: err}
	}
	return m, nil
}

// Entry returns the mark for key, if any. A corrupt file reads as no marks
// and returns its *CorruptError alongside.
func (t *Tracker) Entry(key string) (Entry, bool, error) {
	m, err := t.Entries()
	e, ok := m[key]
	return e, ok, err
}

// MarkBad records that the config key is bad for reason, stamped with the
// clock's now. A corrupt file is replaced (its *CorruptError is returned
// after the new mark was written, so the caller can log it).
func (t *Tracker) MarkBad(key, reason string) error {
	if err := validKey(key); err != nil {
		return err
	}
	m, rerr := t.Entries()
	var corrupt *CorruptError
	if rerr != nil && !errors.As(rerr, &corrupt) {
		return rerr
	}
	m[key] = Entry{Time: t.clock.Now().UTC(), Reason: reason}
	t.bound(m, key)
	if err := t.write(m); err != nil {
		return err
	}
	return rerr
}

// Forget removes the mark for key; a key without a mark is not an error.
// This is the repair step after a dead end.
func (t *Tracker) Forget(key string) error {
	m, err := t.Entries()
	if err != nil {
		return err
	}
	if _, ok := m[key]; !ok {
		return nil
	}
	delete(m, key)
	return t.write(m)
}

// bound drops the oldest marks (never keep) until m fits.
func (t *Tracker) bound(m map[string]Entry, keep string) {
	if len(m) <= t.max {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != keep {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		ti, tj := m[keys[i]].Time, m[keys[j]].Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys[:len(m)-t.max] {
		delete(m, k)
	}
}

func (t *Tracker) write(m map[string]Entry) error {
	data, err := EncodeBadConfigs(m)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(t.path, data, 0o600); err != nil {
		return fmt.Errorf("lkg: write %s: %w", t.path, err)
	}
	return nil
}

// EncodeBadConfigs serializes marks in the file format:
// {"<uid>/<rv>": {"time": RFC3339, "reason": "..."}}, keys sorted.
func EncodeBadConfigs(m map[string]Entry) ([]byte, error) {
	if m == nil {
		m = map[string]Entry{}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("lkg: encode bad configs: %w", err)
	}
	return append(data, '\n'), nil
}

// DecodeBadConfigs parses the bad-config file format. It rejects anything
// but a JSON object of valid keys to entries with a time, and never panics.
func DecodeBadConfigs(data []byte) (map[string]Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var raw map[string]*Entry
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) != 0 {
		return nil, errors.New("decode: trailing data after the object")
	}
	if raw == nil {
		return nil, errors.New("decode: not a JSON object")
	}
	m := make(map[string]Entry, len(raw))
	for k, e := range raw {
		if err := validKey(k); err != nil {
			return nil, err
		}
		if e == nil || e.Time.IsZero() {
			return nil, fmt.Errorf("entry %q: missing time", k)
		}
		m[k] = *e
	}
	return m, nil
}

// validKey checks the "<uid>/<rv>" shape; the parts themselves are validated
// by the checkpoint store before anything is written under them.
func validKey(k string) error {
	uid, rv, ok := strings.Cut(k, "/")
	if !ok || uid == "" || rv == "" || strings.Contains(rv, "/") {
		return fmt.Errorf("bad-config key %q: want <uid>/<resourceVersion>", k)
	}
	return nil
}
