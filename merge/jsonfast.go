package merge

import "unicode/utf8"

// The JSON fast path.
//
// parseJSON reads a JSON document token by token with encoding/json's
// Decoder, which keeps number literals and shows duplicate keys, but whose
// scanner allocates a syntax error at the end of every scalar token to find
// where it ends. parseJSONFast reads the common case (valid JSON without
// string escapes or duplicate keys, nested less than maxFastJSONDepth) in
// one pass, straight into nodes, strings as substrings of one copy of the
// document. Everything else, and every error, is parseJSON's.
// TestJSONFastPath and FuzzJSONFastPath check that both give the same tree.

// maxFastJSONDepth bounds the nesting the fast path reads (the full
// parser's limit, maxDepth, is far above any configuration).
const maxFastJSONDepth = 64

type fastJSON struct {
	p   *parser
	src string
	pos int
}

// parseJSONFast parses data, which starts with '{', if it is in the fast
// path's part of JSON. When ok is false the parser's state is as it was.
func (p *parser) parseJSONFast(data []byte) (root *node, ok bool) {
	a := p.arena
	nMembers, nElems := len(a.members), len(a.elems)
	defer func() {
		if !ok {
			clear(a.members[nMembers:])
			clear(a.elems[nElems:])
			a.members, a.elems = a.members[:nMembers], a.elems[:nElems]
		}
	}()
	f := fastJSON{p: p, src: string(data)}
	f.space()
	if f.pos >= len(f.src) || f.src[f.pos] != '{' {
		return nil, false
	}
	root, ok = f.value(0)
	if !ok {
		return nil, false
	}
	f.space()
	return root, f.pos == len(f.src)
}

func (f *fastJSON) space() {
	for f.pos < len(f.src) {
		switch f.src[f.pos] {
		case ' ', '\t', '\n', '\r':
			f.pos++
		default:
			return
		}
	}
}

func (f *fastJSON) value(depth int) (*node, bool) {
	p := f.p
	f.space()
	if f.pos >= len(f.src) {
		return nil, false
	}
	switch c := f.src[f.pos]; {
	case c == '{':
		return f.object(depth + 1)
	case c == '[':
		return f.array(depth + 1)
	case c == '"':
		s, ok := f.str()
		if !ok {
			return nil, false
		}
		n := p.arena.new(nString, p.layer)
		n.str = s
		return n, true
	case c == '-' || c >= '0' && c <= '9':
		num, ok := f.number()
		if !ok {
			return nil, false
		}
		n := p.arena.new(nNumber, p.layer)
		n.str = num
		return n, true
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(f.src)-f.pos >= len(lit) && f.src[f.pos:f.pos+len(lit)] == lit {
				f.pos += len(lit)
				if lit == "null" {
					return p.arena.new(nNull, p.layer), true
				}
				n := p.arena.new(nBool, p.layer)
				n.b = lit == "true"
				return n, true
			}
		}
	}
	return nil, false
}

func (f *fastJSON) object(depth int) (*node, bool) {
	if depth > maxFastJSONDepth {
		return nil, false
	}
	p, a := f.p, f.p.arena
	n := a.new(nObject, p.layer)
	f.pos++ // '{'
	base := len(a.members)
	f.space()
	if f.pos < len(f.src) && f.src[f.pos] == '}' {
		f.pos++
		return n, true
	}
	for {
		f.space()
		if f.pos >= len(f.src) || f.src[f.pos] != '"' {
			return nil, false
		}
		key, ok := f.str()
		if !ok {
			return nil, false
		}
		f.space()
		if f.pos >= len(f.src) || f.src[f.pos] != ':' {
			return nil, false
		}
		f.pos++
		v, ok := f.value(depth)
		if !ok {
			return nil, false
		}
		a.members = append(a.members, member{key: key, val: v})
		f.space()
		if f.pos >= len(f.src) {
			return nil, false
		}
		if f.src[f.pos] == ',' {
			f.pos++
			continue
		}
		if f.src[f.pos] != '}' {
			return nil, false
		}
		f.pos++
		break
	}
	ms := a.members[base:]
	if hasDuplicateKey(ms, &a.keys) {
		return nil, false // parseJSON reports it
	}
	n.obj = make([]member, len(ms))
	copy(n.obj, ms)
	clear(ms)
	a.members = a.members[:base]
	return n, true
}

func (f *fastJSON) array(depth int) (*node, bool) {
	if depth > maxFastJSONDepth {
		return nil, false
	}
	p, a := f.p, f.p.arena
	n := a.new(nArray, p.layer)
	f.pos++ // '['
	base := len(a.elems)
	f.space()
	if f.pos < len(f.src) && f.src[f.pos] == ']' {
		f.pos++
		return n, true
	}
	for {
		e, ok := f.value(depth)
		if !ok {
			return nil, false
		}
		a.elems = append(a.elems, e)
		f.space()
		if f.pos >= len(f.src) {
			return nil, false
		}
		if f.src[f.pos] == ',' {
			f.pos++
			continue
		}
		if f.src[f.pos] != ']' {
			return nil, false
		}
		f.pos++
		break
	}
	es := a.elems[base:]
	n.arr = make([]*node, len(es))
	copy(n.arr, es)
	clear(es)
	a.elems = a.elems[:base]
	return n, true
}

// str reads a string without escapes or control characters, in valid
// UTF-8 (encoding/json would replace invalid bytes); the cursor is on its
// opening quote.
func (f *fastJSON) str() (string, bool) {
	start := f.pos + 1
	ascii := true
	for i := start; i < len(f.src); i++ {
		switch c := f.src[i]; {
		case c == '"':
			s := f.src[start:i]
			if !ascii && !utf8.ValidString(s) {
				return "", false
			}
			f.pos = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// number reads a number by JSON's grammar and returns its literal, as
// json.Number keeps it.
func (f *fastJSON) number() (string, bool) {
	s, i := f.src, f.pos
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if digits() == 0 {
		return "", false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return "", false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return "", false
		}
	}
	lit := s[f.pos:i]
	f.pos = i
	return lit, true
}
