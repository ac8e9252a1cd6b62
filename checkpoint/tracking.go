package checkpoint

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

	"golang.org/x/sys/unix"

	"github.com/dynconfig/dynconfig/internal/atomicfile"

	"github.com/dynconfig/dynconfig/internal/strictjson"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names of the tracking files in <dir>/tracking/<componentVersion>/.
const (
	// BadConfigsFile holds the bad marks.
	BadConfigsFile = "bad-configs.json"
	// StartupsFile holds the most recent startup times.
	StartupsFile = "startups.json"
)

// envelopesOnlyFile marks a tracking dir whose files are all written in the
// checksummed envelope format: from then on the plain JSON that versions
// before the envelope wrote is damage (a torn or foreign file that happens
// to parse, which would drop every mark or startup), never migrated again.
// It is an empty file; only its name matters.
const envelopesOnlyFile = "envelopes-only"

// errPlainAfterMigration is the damage of a plain-JSON tracking file in an
// envelopes-only tracking dir.
var errPlainAfterMigration = errors.New("plain JSON without the checksummed envelope, in a tracking dir whose files were already migrated to the envelope format (" + envelopesOnlyFile + ")")

// MaxStartups is how many startup times the startups file keeps: one more
// than the largest crash-loop threshold (10), enough to tell whether the
// startups after any time exceed any valid threshold.
const MaxStartups = 11

// MaxUnreferencedBadMarks bounds the bad marks of configs that nothing on
// the node references any more (see Store.MarkBad).
const MaxUnreferencedBadMarks = 100

// maxTrackingFileSize bounds what is read from a tracking file.
const maxTrackingFileSize = 4 << 20

// BadMark records that a config was found bad: when, the reason that the
// ConfigOK condition reported, and what kind of problem it was.
type BadMark struct {
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	// Problem names the kind of problem (the Controller writes lkg.Problem
	// names: "CrashLoop", "DecodeFailed", "ValidateFailed", "ApplyFailed").
	// Empty in marks older versions wrote.
	Problem string `json:"problem,omitempty"`
}

// CrashLoopProblem is the Problem of a crash-loop mark (the name of
// lkg.ProblemCrashLoop).
const CrashLoopProblem = "CrashLoop"

// IsCrashLoop tells a crash-loop mark (the imperfect signal, which a repair
// of the node and forget-bad can fix) from the certain ones: by its
// Problem, or, for marks of older versions that carry none, by the reason
// they reported ("crash loop detected with current ...").
func (m BadMark) IsCrashLoop() bool {
	if m.Problem != "" {
		return m.Problem == CrashLoopProblem
	}
	return strings.HasPrefix(m.Reason, "crash loop detected")
}

// BadMarks maps a config's mark key (MarkKey) to its mark.
type BadMarks map[string]BadMark

// MarkKey is the key of a config's bad mark: "<uid>/<resourceVersion>/<payload
// key>", so that the same ConfigMap read under another payload key is
// another config. It is empty for the local config. A source without a
// payload key gives "<uid>/<resourceVersion>", the form older versions wrote,
// which marks every payload key of that ConfigMap.
func MarkKey(src *corev1.NodeConfigSource) string {
	k, ok := KeyFromSource(src)
	if !ok {
		return ""
	}
	if pk := src.ConfigMap.KubeletConfigKey; pk != "" {
		return k.String() + "/" + pk
	}
	return k.String()
}

// Lookup returns the mark of src: its own, or a mark older versions made for
// the whole ConfigMap ("<uid>/<resourceVersion>"). The key returned is the
// key of the mark found.
func (m BadMarks) Lookup(src *corev1.NodeConfigSource) (string, BadMark, bool) {
	key := MarkKey(src)
	if key == "" {
		return "", BadMark{}, false
	}
	if b, ok := m[key]; ok {
		return key, b, true
	}
	k, _ := KeyFromSource(src)
	if b, ok := m[k.String()]; ok {
		return k.String(), b, true
	}
	return "", BadMark{}, false
}

// validateMarkKey checks the "<uid>/<rv>[/<payload key>]" shape and that each
// part is safe.
func validateMarkKey(key string) error {
	parts := strings.Split(key, "/")
	if len(parts) != 2 && len(parts) != 3 {
		return fmt.Errorf("bad-mark key %q: want <uid>/<resourceVersion>[/<payload key>]", key)
	}
	if err := ValidateKey(Key{UID: types.UID(parts[0]), ResourceVersion: parts[1]}); err != nil {
		return fmt.Errorf("bad-mark key %q: %w", key, err)
	}
	if len(parts) == 3 {
		if errs := validation.IsConfigMapKey(parts[2]); len(errs) > 0 {
			return fmt.Errorf("bad-mark key %q: payload key: %s", key, strings.Join(errs, "; "))
		}
	}
	return nil
}

// markKeyMatches reports whether the mark key matches pattern: the same key,
// or pattern "<uid>/<rv>" and a key of that ConfigMap, or pattern "<uid>" and
// a key of any resourceVersion of it.
func markKeyMatches(key, pattern string) bool {
	return key == pattern || strings.HasPrefix(key, pattern+"/")
}

// encodeBadMarks serializes marks into a bad-configs envelope; keys are
// sorted (encoding/json sorts map keys), times in UTC.
func encodeBadMarks(m BadMarks) ([]byte, error) {
	out := make(BadMarks, len(m))
	for k, v := range m {
		v.Time = v.Time.UTC()
		out[k] = v
	}
	payload, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("serialize bad marks: %w", err)
	}
	return envelope(badMarksVersion, "badConfigs", payload), nil
}

// decodeBadMarks parses a bad-configs file: the checksummed envelope, or the
// plain object older versions wrote (legacy is then true, and the caller
// rewrites the file). Every error means the data is corrupt.
func decodeBadMarks(data []byte) (m BadMarks, legacy bool, err error) {
	payload, legacy, err := openEnvelope(data, badMarksVersion, "badConfigs")
	if err != nil {
		return nil, false, err
	}
	var raw map[string]*BadMark
	if err := strictjson.Unmarshal(payload, &raw); err != nil {
		return nil, false, fmt.Errorf("decode bad marks: %w", err)
	}
	if raw == nil {
		return nil, false, errors.New("decode bad marks: not a JSON object")
	}
	m = make(BadMarks, len(raw))
	// In key order: the first bad key is the error, the same on every read
	// (map order is random; FuzzReadBadMarks compares two reads).
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b := raw[k]
		if err := validateMarkKey(k); err != nil {
			return nil, false, err
		}
		if b == nil || b.Time.IsZero() {
			return nil, false, fmt.Errorf("bad mark %q: missing time", k)
		}
		m[k] = *b
	}
	return m, legacy, nil
}

// encodeStartups serializes startup times into a startups envelope.
func encodeStartups(ts []time.Time) ([]byte, error) {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	payload, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("serialize startups: %w", err)
	}
	return envelope(startupsVersion, "startups", payload), nil
}

// decodeStartups parses a startups file: the checksummed envelope, or the
// plain list older versions wrote (legacy is then true). Every error means
// the data is corrupt.
func decodeStartups(data []byte) (ts []time.Time, legacy bool, err error) {
	payload, legacy, err := openEnvelope(data, startupsVersion, "startups")
	if err != nil {
		return nil, false, err
	}
	var raw []*time.Time
	if err := strictjson.Unmarshal(payload, &raw); err != nil {
		return nil, false, fmt.Errorf("decode startups: %w", err)
	}
	if raw == nil {
		return nil, false, errors.New("decode startups: not a JSON list")
	}
	if len(raw) > MaxStartups*4 {
		return nil, false, fmt.Errorf("decode startups: %d entries, more than any writer keeps", len(raw))
	}
	ts = make([]time.Time, 0, len(raw))
	for i, t := range raw {
		if t == nil || t.IsZero() {
			return nil, false, fmt.Errorf("decode startups: entry %d is not a time", i)
		}
		ts = append(ts, *t)
	}
	return ts, legacy, nil
}

// openEnvelope returns the verified payload of an envelope of version, whose
// payload is under field. Data that is no envelope but plain JSON of the
// payload's shape (an object or a list, as older versions wrote tracking
// files) is returned as legacy, unverified.
func openEnvelope(data []byte, version, field string) (payload json.RawMessage, legacy bool, err error) {
	if p, ok := canonicalPayload(data, version, field); ok {
		return p, false, nil
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, false, errors.New("empty file")
	}
	var fields map[string]json.RawMessage
	if trimmed[0] == '{' {
		if err := json.Unmarshal(trimmed, &fields); err != nil {
			return nil, false, fmt.Errorf("decode envelope: %w", err)
		}
	}
	if _, ok := fields["version"]; !ok {
		// Older versions wrote the payload alone: a list of startups, or an
		// object of marks whose keys are never "version".
		return trimmed, true, nil
	}
	if len(fields) != 3 {
		return nil, false, fmt.Errorf("envelope has %d fields, want version, sha256 and %s", len(fields), field)
	}
	var got, sum string
	if err := json.Unmarshal(fields["version"], &got); err != nil {
		return nil, false, fmt.Errorf("decode envelope version: %w", err)
	}
	if err := json.Unmarshal(fields["sha256"], &sum); err != nil {
		return nil, false, fmt.Errorf("decode envelope checksum: %w", err)
	}
	payload = fields[field]
	if err := verify(got, version, sum, payload); err != nil {
		return nil, false, err
	}
	return payload, false, nil
}

// sortedMarkKeys returns the keys of m, oldest mark first (ties by key).
func sortedMarkKeys(m BadMarks) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ti, tj := m[keys[i]].Time, m[keys[j]].Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return keys[i] < keys[j]
	})
	return keys
}

// migrateTracking makes this version's tracking dir envelopes-only, once.
// A tracking dir the Store just created is marked at once. One that exists
// without the marker may hold files older versions wrote in plain JSON:
// each is read and rewritten in the envelope format, and only when both
// files are envelopes (or missing, or damaged, which no migration repairs)
// is the marker written. A file that cannot be read or written (EIO,
// EACCES, a read-only or full file system) leaves the dir unmarked, to be
// migrated on a later Open; Open never fails for it.
//
// The caller is Open, with the lock held, before the Store is shared.
func (s *Store) migrateTracking(fresh bool) {
	marker := filepath.Join(s.trackingDir, envelopesOnlyFile)
	if !fresh || s.readOnly {
		_, err := os.Lstat(marker)
		if err == nil {
			s.envelopesOnly = true
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Error(err, "Cannot tell whether the tracking files were migrated to the envelope format; plain files of older versions are still read")
			return
		}
		if s.readOnly {
			return // migrated when the state dir is writable again
		}
		if ts, legacy, err := s.readStartups(); err == nil && legacy {
			if err := s.writeStartups(ts); err != nil {
				s.log.Error(err, "Rewriting the startups in the envelope format")
				return
			}
		} else if err != nil && !errors.Is(err, ErrCorrupt) {
			s.log.Error(err, "Reading the startups to migrate them to the envelope format")
			return
		}
		if m, legacy, err := s.readBadMarks(); err == nil && legacy {
			if err := s.writeBadMarks(m); err != nil {
				s.log.Error(err, "Rewriting the bad marks in the envelope format")
				return
			}
		} else if err != nil && !errors.Is(err, ErrCorrupt) {
			s.log.Error(err, "Reading the bad marks to migrate them to the envelope format")
			return
		}
	}
	fd, err := unix.Open(marker, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, filePerm)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		s.log.Error(&fs.PathError{Op: "create", Path: marker, Err: err}, "Cannot mark the tracking dir envelopes-only; plain files of older versions are still read")
		return
	}
	if err == nil {
		_ = unix.Close(fd)
	}
	// The marker is empty: only its entry must be durable.
	if err := atomicfile.SyncDir(s.trackingDir, s.sync...); err != nil {
		s.log.Error(err, "Syncing the tracking dir after marking it envelopes-only")
	}
	s.envelopesOnly = true
}

// plainAfterMigration is the damage of a tracking file read in the plain
// format of older versions (legacy) from an envelopes-only tracking dir, or
// nil.
func plainAfterMigration(path string, legacy, envelopesOnly bool) error {
	if legacy && envelopesOnly {
		return &CorruptError{Path: path, Err: errPlainAfterMigration}
	}
	return nil
}
