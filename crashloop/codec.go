package crashloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// maxFileSize bounds how much of the startups file is read. A file this
// package writes holds at most MaxThreshold+1 timestamps of about 40 bytes;
// anything near this size was not written by it.
const maxFileSize = 64 << 10

// decodeStartups parses the content of a startups file: a JSON list of RFC
// 3339 timestamps (a fractional second is allowed). Errors name the offending
// entry by index.
func decodeStartups(data []byte) ([]time.Time, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty content, want a JSON list of timestamps")
	}
	var stamps []string
	if err := json.Unmarshal(data, &stamps); err != nil {
		return nil, fmt.Errorf("want a JSON list of timestamps: %w", err)
	}
	if stamps == nil {
		// json.Unmarshal accepts null for a slice.
		return nil, errors.New("null, want a JSON list of timestamps")
	}
	out := make([]time.Time, len(stamps))
	for i, s := range stamps {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = t
	}
	return out, nil
}

// encodeStartups is the inverse of decodeStartups. Each timestamp keeps its
// own offset and all of its nanoseconds; a year outside 0000..9999 cannot be
// written as RFC 3339 and is an error.
func encodeStartups(ts []time.Time) ([]byte, error) {
	stamps := make([]string, len(ts))
	for i, t := range ts {
		if y := t.Year(); y < 0 || y > 9999 {
			return nil, fmt.Errorf("[%d]: year %d of %v cannot be written as RFC 3339", i, y, t)
		}
		stamps[i] = t.Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(stamps)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
