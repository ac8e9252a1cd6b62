package bottlerocket

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The encoder below writes the small subset of TOML v1.0.0 that
// settings.kubernetes needs: one table of scalars and string lists, and
// subtables of string to string. It is deliberately not general: each value
// kind has exactly one spelling, so equal inputs give equal bytes.

// value is one TOML value. Implementations append their TOML spelling.
type value interface {
	appendTOML(b []byte) ([]byte, error)
}

type (
	tomlString  string
	tomlInt     int64
	tomlBool    bool
	tomlStrings []string
	// tomlTable is written as its own [parent.key] table, not inline.
	tomlTable map[string]string
)

func (s tomlString) appendTOML(b []byte) ([]byte, error) { return appendBasicString(b, string(s)) }

func (i tomlInt) appendTOML(b []byte) ([]byte, error) { return strconv.AppendInt(b, int64(i), 10), nil }

func (v tomlBool) appendTOML(b []byte) ([]byte, error) { return strconv.AppendBool(b, bool(v)), nil }

func (l tomlStrings) appendTOML(b []byte) ([]byte, error) {
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ", "...)
		}
		var err error
		if b, err = appendBasicString(b, s); err != nil {
			return b, fmt.Errorf("list item %d: %w", i, err)
		}
	}
	return append(b, ']'), nil
}

// appendTOML is never called for a table: encodeTable writes tables as
// headers. It exists so tomlTable satisfies value.
func (t tomlTable) appendTOML(b []byte) ([]byte, error) {
	return b, fmt.Errorf("internal error: a table cannot be written as an inline value")
}

// encodeTable writes the table named by path with entries, scalars first
// (keys sorted), then one subtable per tomlTable entry (keys sorted, and keys
// sorted within each). A table with no scalars still gets its header so the
// document is never empty.
func encodeTable(path []string, entries map[string]value) ([]byte, error) {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	b := make([]byte, 0, 64+32*len(entries))
	b = appendHeader(b, path)
	var subtables []string
	for _, k := range keys {
		v := entries[k]
		if _, ok := v.(tomlTable); ok {
			subtables = append(subtables, k)
			continue
		}
		var err error
		if b, err = appendKeyValue(b, k, v); err != nil {
			return nil, err
		}
	}
	for _, k := range subtables {
		t := entries[k].(tomlTable)
		b = append(b, '\n')
		b = appendHeader(b, append(slices.Clip(path), k))
		tkeys := make([]string, 0, len(t))
		for tk := range t {
			tkeys = append(tkeys, tk)
		}
		slices.Sort(tkeys)
		for _, tk := range tkeys {
			var err error
			if b, err = appendKeyValue(b, tk, tomlString(t[tk])); err != nil {
				return nil, fmt.Errorf("table %s: %w", k, err)
			}
		}
	}
	return b, nil
}

func appendHeader(b []byte, path []string) []byte {
	b = append(b, '[')
	for i, p := range path {
		if i > 0 {
			b = append(b, '.')
		}
		b = appendKey(b, p)
	}
	return append(b, "]\n"...)
}

func appendKeyValue(b []byte, k string, v value) ([]byte, error) {
	if !utf8.ValidString(k) {
		return b, fmt.Errorf("key %q is not valid UTF-8", k)
	}
	b = appendKey(b, k)
	b = append(b, " = "...)
	b, err := v.appendTOML(b)
	if err != nil {
		return b, fmt.Errorf("key %s: %w", k, err)
	}
	return append(b, '\n'), nil
}

// appendKey writes k bare when TOML allows it (A-Za-z0-9_-, non-empty) and
// as a quoted basic string otherwise, so a dotted eviction signal such as
// memory.available stays one key instead of becoming a nested table.
func appendKey(b []byte, k string) []byte {
	if isBareKey(k) {
		return append(b, k...)
	}
	// Keys are checked for valid UTF-8 by the caller; quoting cannot fail.
	b, _ = appendBasicString(b, k)
	return b
}

func isBareKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// appendBasicString writes s as a TOML basic string. TOML requires escaping
// the quote, the backslash and every control character except tab (we escape
// tab too); DEL counts as a control character. A TOML document must be valid
// UTF-8, and a basic string has no escape for a raw byte, so invalid UTF-8 is
// an error rather than something silently replaced.
func appendBasicString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return b, fmt.Errorf("string %q is not valid UTF-8", s)
	}
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\f':
			b = append(b, `\f`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			if r < 0x20 || r == 0x7f {
				b = append(b, `\u`...)
				b = append(b, fmt.Sprintf("%04X", r)...)
				continue
			}
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"'), nil
}

// joinSorted is a small helper for error messages listing accepted values.
func joinSorted(vals []string) string {
	s := slices.Clone(vals)
	slices.Sort(s)
	return strings.Join(s, ", ")
}
