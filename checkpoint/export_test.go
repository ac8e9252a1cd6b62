package checkpoint

import (
	"sync/atomic"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// CountSyncs makes s add every fsync it makes to n (atomicfile.CountSyncs),
// for the tests and benchmarks that count the durability cost of an
// operation. Call it before s is used.
func CountSyncs(s *Store, n *atomic.Int64) { s.sync = []atomicfile.Option{atomicfile.CountSyncs(n)} }

// Exported for the external tests (fuzzing and the corruption matrix).
var (
	EncodeCheckpoint = encodeCheckpoint
	DecodeCheckpoint = decodeCheckpoint
	EncodePointer    = encodePointer
	DecodePointer    = decodePointer
)

// Name-length limits, so tests probe exactly at the boundary.
const (
	MaxUIDLen = maxComponentLen
	MaxRVLen  = maxFileNameLen
)

// Tracking-file codecs, for the fuzz targets.
var (
	EncodeBadMarks = encodeBadMarks
	DecodeBadMarks = decodeBadMarks
	EncodeStartups = encodeStartups
	DecodeStartups = decodeStartups
)

// Exists reports whether the checkpoint k is on disk (Store.has).
func (s *Store) Exists(k Key) (bool, error) { return s.has(k) }

// TrackingDir returns <Dir>/tracking/<ComponentVersion>, which Open created.
func (s *Store) TrackingDir() string { return s.trackingDir }
