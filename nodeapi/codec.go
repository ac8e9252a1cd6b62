package nodeapi

import (
	"bytes"
	"errors"
	"fmt"

	sigsjson "sigs.k8s.io/json"
)

// The JSON rules every decoder of this package shares (sigs.k8s.io/json, as
// the API server decodes objects): field names match case-sensitively (a
// name spelt in another case is an unknown field), a key may appear once,
// nothing may follow the value. decodeStrict also refuses unknown fields;
// decodeLenient ignores them, for the values dynconfig processes of other
// versions write (ConfigStatus, Claim): see the skew rule in doc.go.

// decodeStrict decodes data into v, refusing unknown and duplicate fields.
// The error is not bounded.
func decodeStrict(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeLenient decodes data into v, refusing duplicate fields and ignoring
// unknown ones. The error is bounded (bound).
func decodeLenient(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return bound(err)
	}
	if len(strict) > 0 {
		return bound(errors.Join(strict...))
	}
	return nil
}

// FormatVersion is the version of the ConfigStatus and Claim formats that
// this package reads and writes. A value without a formatVersion field is
// version 1: writers of this version never write the field, so that every
// reader since the first one reads what they write. A future change that
// an older reader must not ignore writes a higher formatVersion, which this
// version refuses with ErrNewerFormat instead of misreading it.
const FormatVersion = 1

// ErrNewerFormat is wrapped by the decoders of ConfigStatus and Claim for a
// value whose formatVersion is higher than FormatVersion: it was written by
// a newer dynconfig in a format this version does not read. It is neither
// damage nor a verdict: a reader waits (a status) or leaves the Node alone
// (a claim) until it is upgraded.
var ErrNewerFormat = errors.New("written by a newer dynconfig in a format this version does not read")

// formatVersion is the envelope field of ConfigStatus and Claim values,
// decoded with them in one pass (see FormatVersion).
type formatVersion struct {
	FormatVersion int `json:"formatVersion,omitempty"`
}

// check refuses a version this package does not read.
func (v formatVersion) check() error {
	switch {
	case v.FormatVersion < 0:
		return fmt.Errorf("formatVersion: must not be negative, got %d", v.FormatVersion)
	case v.FormatVersion > FormatVersion:
		return fmt.Errorf("formatVersion %d: %w (it reads %d)", v.FormatVersion, ErrNewerFormat, FormatVersion)
	}
	return nil
}

// decodeVersioned decodes an annotation value a controller wrote into e, an
// envelope embedding formatVersion, with the skew rule's reading (doc.go):
// false and no error for a blank value or "null" (no value); an error
// names what was decoded, and wraps ErrNewerFormat for a newer format.
// Callers validate what e holds.
func decodeVersioned(value, what string, e interface{ check() error }) (bool, error) {
	data := bytes.TrimSpace([]byte(value))
	if len(data) == 0 || string(data) == "null" {
		return false, nil
	}
	if err := decodeLenient(data, e); err != nil {
		return false, fmt.Errorf("invalid %s: %w", what, err)
	}
	if err := e.check(); errors.Is(err, ErrNewerFormat) {
		return false, fmt.Errorf("%s: %w", what, err)
	} else if err != nil {
		return false, fmt.Errorf("invalid %s: %w", what, err)
	}
	return true, nil
}
