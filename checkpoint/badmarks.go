package checkpoint

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// readBadMarks is decodeBadMarks for the start path, where a node with a
// full list (MaxUnreferencedBadMarks) paid most of its read time for
// encoding/json's reflection over a hundred small objects and a regular
// expression per key. It reads the file as encodeBadMarks writes it with a
// hand-written scanner: an object of mark keys, each an object of exactly
// the fields time, reason and (optionally) problem, with string values;
// keys checked by a test that accepts only what validateMarkKey accepts.
//
// Anything else (other spellings encoding/json accepts: case-folded or
// repeated field names, nulls, duplicate keys, trailing data; any value or
// key that is or may be invalid) is decided by decodeBadMarks itself, so the
// result and every error are the same as decodeBadMarks's.
// FuzzReadBadMarks compares the two.
func readBadMarks(data []byte) (BadMarks, bool, error) {
	payload, legacy, err := openEnvelope(data, badMarksVersion, "badConfigs")
	if err != nil {
		return nil, false, err
	}
	m, ok := scanBadMarks(payload)
	if !ok {
		return decodeBadMarks(data)
	}
	return m, legacy, nil
}

// scanBadMarks parses a bad-marks payload of the common form; ok is false
// for anything it leaves to decodeBadMarks.
func scanBadMarks(payload []byte) (BadMarks, bool) {
	s := badMarksScanner{data: payload}
	if !s.consume('{') {
		return nil, false
	}
	m := make(BadMarks, len(payload)/128) // a mark takes 100 to 200 bytes
	if s.consume('}') {
		return m, s.end()
	}
	for {
		key, ok := s.str()
		if !ok || !s.consume(':') || !s.consume('{') {
			return nil, false
		}
		if _, dup := m[key]; dup || !markKeyValid(key) {
			return nil, false
		}
		var b BadMark
		var seen [3]bool
		for {
			lit, ok := s.strLiteral()
			if !ok || !s.consume(':') {
				return nil, false
			}
			var field int
			switch string(lit[1 : len(lit)-1]) { // escaped names: decodeBadMarks
			case "time":
				field = 0
				lit, ok := s.strLiteral()
				if !ok || b.Time.UnmarshalJSON(lit) != nil {
					return nil, false
				}
			case "reason":
				field = 1
				if b.Reason, ok = s.str(); !ok {
					return nil, false
				}
			case "problem":
				field = 2
				if b.Problem, ok = s.str(); !ok {
					return nil, false
				}
			default:
				return nil, false // unknown, or a spelling encoding/json folds
			}
			if seen[field] {
				return nil, false
			}
			seen[field] = true
			if s.consume(',') {
				continue
			}
			if !s.consume('}') {
				return nil, false
			}
			break
		}
		if b.Time.IsZero() {
			return nil, false
		}
		m[key] = b
		if s.consume(',') {
			continue
		}
		if !s.consume('}') {
			return nil, false
		}
		return m, s.end()
	}
}

// badMarksScanner reads JSON tokens from data.
type badMarksScanner struct {
	data []byte
	pos  int
	buf  []byte // for unescaping
}

func (s *badMarksScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// consume skips white space and then c, reporting whether c was there.
func (s *badMarksScanner) consume(c byte) bool {
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *badMarksScanner) end() bool {
	s.skipSpace()
	return s.pos == len(s.data)
}

// strLiteral returns the next JSON string with its quotes, unparsed.
func (s *badMarksScanner) strLiteral() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.pos - 1
	for s.pos < len(s.data) {
		// Jump to the next quote; what lies before it must have no
		// control characters, and a backslash escapes the byte after it.
		j := bytes.IndexByte(s.data[s.pos:], '"')
		if j < 0 {
			return nil, false
		}
		end := s.pos + j
		for s.pos < end {
			switch c := s.data[s.pos]; {
			case c < 0x20:
				return nil, false
			case c == '\\':
				s.pos += 2
			default:
				s.pos++
			}
		}
		if s.pos == end {
			s.pos++
			return s.data[start:s.pos], true
		}
		// The quote was escaped (the backslash's byte was it): look further.
	}
	return nil, false
}

// str returns the next JSON string's value, as encoding/json decodes it.
func (s *badMarksScanner) str() (string, bool) {
	lit, ok := s.strLiteral()
	if !ok {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	if !utf8.Valid(body) {
		return "", false // encoding/json would replace the bad bytes
	}
	if bytes.IndexByte(body, '\\') < 0 {
		switch string(body) { // the problems the Controller writes: no copy
		case "CrashLoop":
			return "CrashLoop", true
		case "DecodeFailed":
			return "DecodeFailed", true
		case "ValidateFailed":
			return "ValidateFailed", true
		case "ApplyFailed":
			return "ApplyFailed", true
		}
		return string(body), true
	}
	// The escapes encoding/json writes; the rest (surrogate pairs, bad
	// escapes) is left to it.
	out := s.buf[:0]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i++; i == len(body) {
			return "", false
		}
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+4 >= len(body) {
				return "", false
			}
			var r rune
			for _, h := range body[i+1 : i+5] {
				switch {
				case h >= '0' && h <= '9':
					r = r<<4 | rune(h-'0')
				case h >= 'a' && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case h >= 'A' && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return "", false
				}
			}
			if r >= 0xd800 && r < 0xe000 {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += 4
		default:
			return "", false
		}
	}
	s.buf = out
	return string(out), true
}

// markKeyValid reports whether key is a mark key that validateMarkKey
// accepts, by a plain byte test for the usual keys (ASCII UIDs and
// resourceVersions, ConfigMap keys) and validateMarkKey for the rest.
func markKeyValid(key string) bool {
	uid, rest, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	rv, payloadKey, three := strings.Cut(rest, "/")
	if plainComponent(uid, maxComponentLen) && plainComponent(rv, maxFileNameLen) &&
		(!three || plainConfigMapKey(payloadKey)) {
		return true
	}
	return validateMarkKey(key) == nil
}

// plainComponent: printable ASCII without slashes, within maxLen, and none
// of the names validateComponent refuses.
func plainComponent(s string, maxLen int) bool {
	if s == "" || s == "." || s == ".." || len(s) > maxLen || strings.HasPrefix(s, atomicfile.TempPrefix) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' || c == '\\' {
			return false
		}
	}
	return true
}

// plainConfigMapKey: what validation.IsConfigMapKey accepts ([-._a-zA-Z0-9],
// at most 253 bytes, not "." and not starting with "..").
func plainConfigMapKey(s string) bool {
	if s == "" || len(s) > 253 || s == "." || strings.HasPrefix(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}
