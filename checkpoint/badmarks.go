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
			lit, _, ok := s.strLiteral()
			if !ok || !s.consume(':') {
				return nil, false
			}
			var field int
			switch string(lit[1 : len(lit)-1]) { // escaped names: decodeBadMarks
			case "time":
				field = 0
				lit, _, ok := s.strLiteral()
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

// strStop marks the bytes a JSON string scan stops at: the closing quote,
// a backslash, control characters (not allowed in JSON strings), and bytes
// of multi-byte UTF-8 sequences (to be validated).
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// strLiteral returns the next JSON string with its quotes, unparsed, and
// whether it has escapes or bytes beyond ASCII.
func (s *badMarksScanner) strLiteral() (lit []byte, plain bool, ok bool) {
	if !s.consume('"') {
		return nil, false, false
	}
	start, data := s.pos-1, s.data
	plain = true
	for i := s.pos; i < len(data); i++ {
		c := data[i]
		if !strStop[c] {
			continue
		}
		switch {
		case c == '"':
			s.pos = i + 1
			return data[start:s.pos], plain, true
		case c == '\\':
			if i+1 < len(data) && data[i+1] < 0x20 {
				return nil, false, false
			}
			plain = false
			i++ // the escaped byte
		case c < 0x20:
			return nil, false, false
		default:
			plain = false // checked as UTF-8 by str
		}
	}
	return nil, false, false
}

// str returns the next JSON string's value, as encoding/json decodes it.
func (s *badMarksScanner) str() (string, bool) {
	lit, plain, ok := s.strLiteral()
	if !ok {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	if !plain && !utf8.Valid(body) {
		return "", false // encoding/json would replace the bad bytes
	}
	if plain || bytes.IndexByte(body, '\\') < 0 {
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
