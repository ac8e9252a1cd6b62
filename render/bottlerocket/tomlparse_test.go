package bottlerocket

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseTOML is a strict reader for the TOML subset Render writes: table
// headers with bare or quoted keys, and key = value lines whose values are
// basic strings, decimal integers, booleans or arrays of basic strings. It
// applies TOML's rules for that subset (escapes, control characters, no key
// or table defined twice, no leading zeros) and rejects anything else, so
// output it accepts is valid TOML. It exists only to check Render's output
// without a TOML dependency.
func parseTOML(doc string) (map[string]any, error) {
	if !utf8.ValidString(doc) {
		return nil, fmt.Errorf("document is not valid UTF-8")
	}
	root := map[string]any{}
	cur := root
	definedTables := map[string]bool{}
	for n, line := range strings.Split(doc, "\n") {
		ln := n + 1
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: unterminated table header", ln)
			}
			path, rest, err := parseKeyPath(line[1:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", ln, err)
			}
			if rest != "]" {
				return nil, fmt.Errorf("line %d: junk after table header: %q", ln, rest)
			}
			id := strings.Join(quoteAll(path), ".")
			if definedTables[id] {
				return nil, fmt.Errorf("line %d: table [%s] defined twice", ln, id)
			}
			definedTables[id] = true
			t := root
			for _, k := range path {
				next, ok := t[k]
				if !ok {
					nt := map[string]any{}
					t[k] = nt
					t = nt
					continue
				}
				nt, ok := next.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("line %d: %q is a value, not a table", ln, k)
				}
				t = nt
			}
			cur = t
			continue
		}
		path, rest, err := parseKeyPath(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		if len(path) != 1 {
			return nil, fmt.Errorf("line %d: dotted keys are outside the subset", ln)
		}
		rest, ok := strings.CutPrefix(rest, "= ")
		if !ok {
			return nil, fmt.Errorf("line %d: want \" = \" after key", ln)
		}
		v, rest, err := parseValue(rest)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		if rest != "" {
			return nil, fmt.Errorf("line %d: junk after value: %q", ln, rest)
		}
		if _, dup := cur[path[0]]; dup {
			return nil, fmt.Errorf("line %d: key %q defined twice", ln, path[0])
		}
		cur[path[0]] = v
	}
	return root, nil
}

func quoteAll(path []string) []string {
	out := make([]string, len(path))
	for i, p := range path {
		out[i] = strconv.Quote(p)
	}
	return out
}

// parseKeyPath reads dot-separated keys and returns them with the text after
// the path, with spaces around the path trimmed.
func parseKeyPath(s string) ([]string, string, error) {
	var path []string
	for {
		s = strings.TrimLeft(s, " ")
		var k string
		var err error
		if strings.HasPrefix(s, `"`) {
			k, s, err = parseBasicString(s)
			if err != nil {
				return nil, "", err
			}
		} else {
			i := 0
			for i < len(s) && isBareKey(s[i:i+1]) {
				i++
			}
			if i == 0 {
				return nil, "", fmt.Errorf("empty bare key at %q", s)
			}
			k, s = s[:i], s[i:]
		}
		path = append(path, k)
		s = strings.TrimLeft(s, " ")
		if !strings.HasPrefix(s, ".") {
			return path, s, nil
		}
		s = s[1:]
	}
}

func parseValue(s string) (any, string, error) {
	switch {
	case strings.HasPrefix(s, `"`):
		return parseBasicString(s)
	case strings.HasPrefix(s, "["):
		s = s[1:]
		list := []string{}
		if rest, ok := strings.CutPrefix(s, "]"); ok {
			return list, rest, nil
		}
		for {
			v, rest, err := parseBasicString(s)
			if err != nil {
				return nil, "", fmt.Errorf("array item: %w", err)
			}
			list = append(list, v)
			if r, ok := strings.CutPrefix(rest, "]"); ok {
				return list, r, nil
			}
			r, ok := strings.CutPrefix(rest, ", ")
			if !ok {
				return nil, "", fmt.Errorf("want \", \" or \"]\" in array at %q", rest)
			}
			s = r
		}
	case s == "true":
		return true, "", nil
	case s == "false":
		return false, "", nil
	default:
		digits := strings.TrimLeft(s, "+-")
		if len(s)-len(digits) > 1 || digits == "" || (len(digits) > 1 && digits[0] == '0') {
			return nil, "", fmt.Errorf("bad value %q", s)
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("bad integer %q: %w", s, err)
		}
		return i, "", nil
	}
}

// parseBasicString reads a TOML basic string at the start of s.
func parseBasicString(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", fmt.Errorf("want a string at %q", s)
	}
	var b strings.Builder
	i := 1
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			return b.String(), s[i+1:], nil
		case r == '\\':
			if i+1 >= len(s) {
				return "", "", fmt.Errorf("dangling backslash")
			}
			esc := s[i+1]
			i += 2
			switch esc {
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case '"':
				b.WriteByte('"')
			case '\\':
				b.WriteByte('\\')
			case 'u', 'U':
				n := 4
				if esc == 'U' {
					n = 8
				}
				if i+n > len(s) {
					return "", "", fmt.Errorf("short \\%c escape", esc)
				}
				code, err := strconv.ParseUint(s[i:i+n], 16, 32)
				if err != nil || !utf8.ValidRune(rune(code)) {
					return "", "", fmt.Errorf("bad \\%c escape %q", esc, s[i:i+n])
				}
				b.WriteRune(rune(code))
				i += n
			default:
				return "", "", fmt.Errorf("bad escape \\%c", esc)
			}
			continue
		case r == '\t':
		case r < 0x20 || r == 0x7f:
			return "", "", fmt.Errorf("raw control character %U in string", r)
		}
		b.WriteRune(r)
		i += size
	}
	return "", "", fmt.Errorf("unterminated string")
}
