// Package strictjson decodes dynconfig's own records (the state dir's files
// and the kubelet state record): an unknown field and anything after the
// value are errors, so that a record a newer or damaged writer left is
// never half read.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Unmarshal decodes data into v, refusing unknown fields and trailing
// data.
func Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
