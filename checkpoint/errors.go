package checkpoint

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned (wrapped) by Load for a checkpoint that is not
	// on disk, and by SetCurrent and SetLastKnownGood for a source whose
	// checkpoint is not on disk.
	ErrNotFound = errors.New("checkpoint not found")

	// ErrCorrupt matches every *CorruptError with errors.Is.
	ErrCorrupt = errors.New("corrupt file")

	// ErrLocked is returned (wrapped) by Open when another Store, in this or
	// another process, holds the state dir.
	ErrLocked = errors.New("state dir is locked")

	// ErrClosed is returned by the methods of a closed Store.
	ErrClosed = errors.New("checkpoint store is closed")

	// ErrNewerFormat is returned (wrapped) for a pointer or checkpoint
	// written by a newer version of this package in a format this one does
	// not read (see the compatibility policy in the package documentation).
	// It is not damage: the file is not moved to the quarantine, and GC
	// removes nothing while a pointer reads so.
	ErrNewerFormat = errors.New("written by a newer version in a format this version does not read")
)

// CorruptError reports a state file (checkpoint, pointer, bad marks,
// startups) that cannot be trusted: missing where it must exist, empty,
// truncated, garbage, a checksum mismatch, an unknown envelope version,
// content for another key, or not a regular file. It is the one corruption
// type of the state dir; errors.Is(err, ErrCorrupt) matches it.
type CorruptError struct {
	// Path is the file that is corrupt.
	Path string
	// Err says what is wrong with it.
	Err error
	// MovedTo is where the Store moved the file (into <dir>/quarantine),
	// or "" when it was left in place (Inspect never moves anything).
	MovedTo string
}

// Error names the file, what is wrong with it, and where it went.
func (e *CorruptError) Error() string {
	if e.MovedTo != "" {
		return fmt.Sprintf("corrupt file %s: %v (moved to %s)", e.Path, e.Err, e.MovedTo)
	}
	return fmt.Sprintf("corrupt file %s: %v", e.Path, e.Err)
}

// Unwrap returns e.Err.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true for every *CorruptError.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(path string, format string, args ...any) *CorruptError {
	return &CorruptError{Path: path, Err: fmt.Errorf(format, args...)}
}
