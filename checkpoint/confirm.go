package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// ConfirmationFile is the name of the confirmation record in <dir>/meta/:
// what the state dir knows of current's confirm-or-revert deadline (see
// lkg.ConfirmDeadline).
//
// It lives beside the pointers, not in a component version's tracking
// dir, because the first run it belongs to is current's pointer's: a
// component upgraded while a config is confirmed but still on trial keeps
// the confirmation. Versions before it never read it (they list no file of
// meta/ but their pointers' and temporary files), and a record that an
// older version left behind when it moved current elsewhere belongs to no
// run any more (Confirmation.For): it is ignored, and replaced by the next
// record.
const ConfirmationFile = "confirmed"

// confirmationVersion is the envelope version of the confirmation record.
const confirmationVersion = "dynconfig.io/confirmation/v1"

// Confirmation is the record of one run of current: the config and its
// first run identify the run, so that a reassigned config, or one that
// forget-bad gave a fresh trial (its first run cleared and recorded anew),
// starts with no confirmation and a new deadline.
type Confirmation struct {
	// Config is current's MarkKey.
	Config string `json:"config"`
	// FirstRun is current's first run, as its pointer records it.
	FirstRun time.Time `json:"firstRun"`
	// Anchor, when not zero, is the deadline's start instead of FirstRun:
	// recorded when the clock was found behind the start (stepped back).
	Anchor time.Time `json:"anchor,omitzero"`
	// Confirmed, when not zero, is when the component confirmed this run of
	// current healthy.
	Confirmed time.Time `json:"confirmed,omitzero"`
}

// For reports whether c is the record of p's run: the same config and the
// same first run. A record of another run reads as none.
func (c Confirmation) For(p Pointer) bool {
	key := MarkKey(p.Source)
	return key != "" && c.Config == key && !p.FirstRun.IsZero() && c.FirstRun.Equal(p.FirstRun)
}

// errNotCurrentRun is returned when a record is asked for a run that is
// not current's any more.
var errNotCurrentRun = errors.New("current is not the run the record is for")

// Confirmation returns the confirmation record. A missing file is the
// zero Confirmation. A corrupt one is moved to the quarantine and reads as
// none, with its *CorruptError: a lost confirmation can only roll back a
// config that is not confirmed again in time, never keep a bad one. A
// record of a newer format wraps ErrNewerFormat and is left in place; any
// other error (EIO, EACCES) is returned as it is.
func (s *Store) Confirmation() (Confirmation, error) {
	unlock, err := s.readLocked()
	if err != nil {
		return Confirmation{}, err
	}
	c, err := readConfirmation(s.pointerPath(ConfirmationFile))
	unlock()
	return c, s.quarantineIfCorrupt(err)
}

// ConfirmCurrent records that the component confirmed run healthy at at,
// unless it is confirmed already. run is current's pointer as the caller
// read it: when current is another config or run now, nothing is written
// and the error says so.
func (s *Store) ConfirmCurrent(run Pointer, at time.Time) (Confirmation, error) {
	return s.updateConfirmation(run, func(c *Confirmation) {
		if c.Confirmed.IsZero() {
			c.Confirmed = at
		}
	})
}

// AnchorCurrent records at as the start of run's deadline (the clock was
// found behind the start), like ConfirmCurrent.
func (s *Store) AnchorCurrent(run Pointer, at time.Time) (Confirmation, error) {
	return s.updateConfirmation(run, func(c *Confirmation) { c.Anchor = at })
}

func (s *Store) updateConfirmation(run Pointer, set func(*Confirmation)) (Confirmation, error) {
	unlock, err := s.writeLocked()
	if err != nil {
		return Confirmation{}, err
	}
	defer unlock()
	cur, err := s.readPointerLocked(currentFile)
	if err != nil {
		return Confirmation{}, fmt.Errorf("record confirmation: %w", err)
	}
	if MarkKey(cur.Source) == "" || MarkKey(cur.Source) != MarkKey(run.Source) || !cur.FirstRun.Equal(run.FirstRun) || cur.FirstRun.IsZero() {
		return Confirmation{}, fmt.Errorf("record confirmation of %s first run %v: %w", MarkKey(run.Source), run.FirstRun, errNotCurrentRun)
	}
	path := s.pointerPath(ConfirmationFile)
	c, err := readConfirmation(path)
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		if qerr := s.moveAside(ce); qerr != nil {
			s.log.Error(qerr, "Cannot move a corrupt file to the quarantine", "path", ce.Path)
		}
		c = Confirmation{}
	case err != nil && !errors.Is(err, ErrNewerFormat):
		return Confirmation{}, fmt.Errorf("record confirmation: %w", err)
	}
	if !c.For(cur) {
		c = Confirmation{Config: MarkKey(cur.Source), FirstRun: cur.FirstRun}
	}
	set(&c)
	data, err := encodeConfirmation(c)
	if err != nil {
		return Confirmation{}, err
	}
	if err := s.replaceFile(path, data); err != nil {
		return Confirmation{}, fmt.Errorf("record confirmation: %w", err)
	}
	return c, nil
}

// InspectConfirmation reads the confirmation record of the state dir at dir
// without its lock and without writing anything (like Inspect).
func InspectConfirmation(dir string) (Confirmation, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Confirmation{}, err
	}
	return readConfirmation(filepath.Join(abs, metaDir, ConfirmationFile))
}

// readConfirmation reads the record at path: zero when missing, a
// *CorruptError when damaged.
func readConfirmation(path string) (Confirmation, error) {
	data, err := readTracking(path)
	if err != nil || data == nil {
		return Confirmation{}, err
	}
	c, err := decodeConfirmation(data)
	switch {
	case errors.Is(err, ErrNewerFormat):
		return Confirmation{}, fmt.Errorf("confirmation record %s: %w", path, err)
	case err != nil:
		return Confirmation{}, &CorruptError{Path: path, Err: err}
	}
	return c, nil
}

func encodeConfirmation(c Confirmation) ([]byte, error) {
	c.FirstRun, c.Anchor, c.Confirmed = c.FirstRun.UTC(), c.Anchor.UTC(), c.Confirmed.UTC()
	payload, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("serialize confirmation: %w", err)
	}
	return envelope(confirmationVersion, "confirmation", payload), nil
}

// decodeConfirmation parses and verifies a confirmation envelope. Fields
// this version does not know are ignored (the compatibility policy: a later
// version of this format adds only fields an older reader may ignore).
func decodeConfirmation(data []byte) (Confirmation, error) {
	payload, legacy, err := openEnvelope(data, confirmationVersion, "confirmation")
	if err != nil {
		return Confirmation{}, err
	}
	if legacy {
		return Confirmation{}, errors.New("no envelope")
	}
	var c Confirmation
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&c); err != nil {
		return Confirmation{}, fmt.Errorf("decode confirmation: %w", err)
	}
	if dec.More() {
		return Confirmation{}, errors.New("decode confirmation: trailing data")
	}
	if err := validateMarkKey(c.Config); err != nil {
		return Confirmation{}, fmt.Errorf("confirmation: %w", err)
	}
	if c.FirstRun.IsZero() {
		return Confirmation{}, errors.New("confirmation: missing firstRun")
	}
	return c, nil
}
