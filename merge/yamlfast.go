package merge

import (
	"slices"
	"strconv"
	"strings"
)

// The YAML fast path.
//
// Configuration files are nearly always written in a small part of YAML:
// block mappings and sequences indented with spaces, plain and quoted
// one-line scalars, comments, {} and []. go.yaml.in/yaml/v2 (what
// sigs.k8s.io/yaml and so the Kubernetes components use) parses them
// through a token scanner, an event parser and a decoder into interface
// values, and resolves every plain scalar by trying strconv.ParseInt,
// ParseUint and ParseFloat in turn, allocating an error each time a string
// is not a number: most of what a merge costs. parseYAMLFast reads that
// part of YAML straight into nodes, scalars as substrings of one copy of
// the document, and resolves plain scalars by yaml.v2's rules (resolve in
// go.yaml.in/yaml/v2: the YAML 1.1 booleans and nulls, decimal integers,
// floats) without errors on the way.
//
// It gives up (ok=false) on anything else: tabs, carriage returns,
// non-ASCII bytes, anchors, aliases, tags, block scalars, multi-line
// scalars, escapes, flow collections other than {} and [], merge keys,
// directives, a second document, and any scalar whose resolution it does
// not reproduce exactly (octal, hexadecimal, underscores, timestamps, .inf).
// Then, and for every error, the full parser decides, so messages and
// semantics stay the library's. TestYAMLFastPath and FuzzYAMLFastPath
// check that both give the same tree and the same problems.

// fastYAML is the state of one fast parse. The current content line (not
// blank, not only a comment) is ind spaces followed by ln.
type fastYAML struct {
	p   *parser
	src string
	pos int // start of the line after the current one
	ind int
	ln  string
	eof bool
}

// parseYAMLFast parses data if it is in the fast path's part of YAML. It
// records no problems: a document with any (a duplicate key) is left to the
// full parser. When ok is false the parser's state is as it was.
func (p *parser) parseYAMLFast(data []byte) (root *node, ok bool) {
	for _, c := range data {
		if c >= 0x7f || (c < 0x20 && c != '\n') {
			return nil, false
		}
	}
	if cap(p.arena.members) == 0 {
		// Sized for a kubelet configuration: the stacks grow once per merge.
		p.arena.members = make([]member, 0, 96)
		p.arena.elems = make([]*node, 0, 16)
		p.arena.keys = make([]string, 0, 96)
	}
	nPath, nMembers, nElems := len(p.path), len(p.arena.members), len(p.arena.elems)
	defer func() {
		if !ok {
			p.path = p.path[:nPath]
			clear(p.arena.members[nMembers:])
			clear(p.arena.elems[nElems:])
			p.arena.members, p.arena.elems = p.arena.members[:nMembers], p.arena.elems[:nElems]
		}
	}()
	f := fastYAML{p: p, src: string(data)}
	f.next()
	if !f.eof && f.ind == 0 && strings.TrimRight(f.ln, " ") == "---" {
		f.next()
	}
	if f.eof || f.ind != 0 || isSeqItem(f.ln) {
		return nil, false
	}
	root, ok = f.mapping(0)
	if !ok || !f.eof {
		return nil, false
	}
	return root, true
}

// next moves to the next content line.
func (f *fastYAML) next() {
	for f.pos < len(f.src) {
		end := strings.IndexByte(f.src[f.pos:], '\n')
		var line string
		if end < 0 {
			line, f.pos = f.src[f.pos:], len(f.src)
		} else {
			line, f.pos = f.src[f.pos:f.pos+end], f.pos+end+1
		}
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		if ind == len(line) || line[ind] == '#' {
			continue
		}
		f.ind, f.ln = ind, line[ind:]
		return
	}
	f.eof, f.ind, f.ln = true, -1, ""
}

func isSeqItem(ln string) bool {
	return ln == "-" || strings.HasPrefix(ln, "- ")
}

// mapping reads the block mapping whose keys are at column indent; the
// current line is its first entry.
func (f *fastYAML) mapping(indent int) (*node, bool) {
	p := f.p
	if len(p.path) > maxDepth {
		return nil, false
	}
	n := p.arena.new(nObject, p.layer)
	a := p.arena
	base := len(a.members)
	for !f.eof && f.ind == indent {
		if isSeqItem(f.ln) {
			return nil, false
		}
		rawKey, rest, ok := splitKey(f.ln)
		if !ok {
			return nil, false
		}
		key, ok := resolveKey(rawKey)
		if !ok {
			return nil, false
		}
		p.path = append(p.path, pathSeg{name: key, kind: segField})
		rest = strings.TrimLeft(rest, " ")
		var v *node
		if rest == "" || rest[0] == '#' {
			f.next()
			switch {
			case !f.eof && f.ind > indent && isSeqItem(f.ln):
				v, ok = f.sequence(f.ind)
			case !f.eof && f.ind > indent:
				v, ok = f.mapping(f.ind)
			case !f.eof && f.ind == indent && isSeqItem(f.ln):
				v, ok = f.sequence(indent)
			default:
				v = p.arena.new(nNull, p.layer)
			}
		} else {
			v, ok = f.scalar(rest)
			f.next()
			if ok && !f.eof && f.ind > indent {
				ok = false // a multi-line scalar, or an error
			}
		}
		p.path = p.path[:len(p.path)-1]
		if !ok {
			return nil, false
		}
		a.members = append(a.members, member{key: key, val: v})
	}
	if !f.eof && f.ind > indent {
		return nil, false
	}
	// The members were collected on the arena's stack (nested mappings are
	// done before their parent's next member): one exact allocation.
	ms := a.members[base:]
	if hasDuplicateKey(ms, &a.keys) {
		return nil, false // yaml.v2 keeps both; the full parser reports it
	}
	n.obj = make([]member, len(ms))
	copy(n.obj, ms)
	clear(ms)
	a.members = a.members[:base]
	return n, true
}

// hasDuplicateKey reports whether two members have the same key; scratch
// is reused for big objects.
func hasDuplicateKey(ms []member, scratch *[]string) bool {
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := 0; j < i; j++ {
				if ms[i].key == ms[j].key {
					return true
				}
			}
		}
		return false
	}
	keys := (*scratch)[:0]
	for _, m := range ms {
		keys = append(keys, m.key)
	}
	slices.Sort(keys)
	*scratch = keys
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] {
			return true
		}
	}
	return false
}

// sequence reads the block sequence whose dashes are at column indent.
func (f *fastYAML) sequence(indent int) (*node, bool) {
	p := f.p
	if len(p.path) > maxDepth {
		return nil, false
	}
	n := p.arena.new(nArray, p.layer)
	a := p.arena
	base := len(a.elems)
	for i := 0; !f.eof && f.ind == indent && isSeqItem(f.ln); i++ {
		spaces := 1
		for spaces < len(f.ln) && f.ln[spaces] == ' ' {
			spaces++
		}
		item := f.ln[spaces:]
		if item == "" || item[0] == '#' || isSeqItem(item) {
			return nil, false // a nested block, a null item, a nested sequence
		}
		p.path = append(p.path, pathSeg{index: i, kind: segIndex})
		var e *node
		var ok bool
		if looksLikeEntry(item) {
			// A mapping whose first key is on the dash's line.
			f.ind, f.ln = indent+spaces, item
			e, ok = f.mapping(indent + spaces)
		} else {
			e, ok = f.scalar(item)
			f.next()
			if ok && !f.eof && f.ind > indent {
				ok = false
			}
		}
		p.path = p.path[:len(p.path)-1]
		if !ok {
			return nil, false
		}
		a.elems = append(a.elems, e)
	}
	if !f.eof && f.ind > indent {
		return nil, false
	}
	es := a.elems[base:]
	n.arr = make([]*node, len(es))
	copy(n.arr, es)
	clear(es)
	a.elems = a.elems[:base]
	return n, true
}

// isKeyChar: the characters of the plain keys the fast path reads.
func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '/' || c == '-' || c == '$'
}

// splitKey splits "key: rest" (or "key:"), for plain keys of isKeyChar
// that do not start with '-' or '.'.
func splitKey(ln string) (key, rest string, ok bool) {
	if ln == "" || ln[0] == '-' || ln[0] == '.' {
		return "", "", false
	}
	i := 0
	for i < len(ln) && isKeyChar(ln[i]) {
		i++
	}
	if i == 0 || i == len(ln) || ln[i] != ':' || (i+1 < len(ln) && ln[i+1] != ' ') {
		return "", "", false
	}
	if i > maxFastKey {
		// yaml.v2 takes a plain key only within 1024 characters of its
		// ':' (a "simple key"); near that limit the full parser decides.
		return "", "", false
	}
	return ln[:i], ln[i+1:], true
}

// maxFastKey is the longest key the fast path reads; longer ones go to the
// full parser, which applies yaml.v2's 1024-character limit on simple keys
// (found by FuzzYAMLFastPath).
const maxFastKey = 512

// looksLikeEntry reports whether a sequence item is a mapping entry.
func looksLikeEntry(item string) bool {
	_, _, ok := splitKey(item)
	return ok
}

// resolveKey converts a plain key as sigs.k8s.io/yaml does: the key is
// resolved like a value (yes is true, 010 is 8), then written as a string.
func resolveKey(raw string) (string, bool) {
	kind, b, _, ok := resolvePlain(raw)
	if !ok {
		return "", false
	}
	switch kind {
	case nString:
		return raw, true
	case nBool:
		return strconv.FormatBool(b), true
	case nNumber:
		if isCanonicalInt(raw) {
			return raw, true
		}
	}
	return "", false // null and float keys: the full parser
}

// scalar reads a one-line value: quoted, {} or [], or plain.
func (f *fastYAML) scalar(s string) (*node, bool) {
	p := f.p
	switch s[0] {
	case '"', '\'':
		q := s[0]
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return nil, false // multi-line
		}
		body := s[1 : 1+end]
		after := s[2+end:]
		if (q == '"' && strings.IndexByte(body, '\\') >= 0) || (q == '\'' && strings.HasPrefix(after, "'")) || !onlyComment(after) {
			return nil, false
		}
		n := p.arena.new(nString, p.layer)
		n.str = body
		return n, true
	case '{':
		if len(s) < 2 || s[1] != '}' || !onlyComment(s[2:]) {
			return nil, false
		}
		return p.arena.new(nObject, p.layer), true
	case '[':
		return f.flowSequence(s)
	case '-':
		if len(s) == 1 || s[1] == ' ' {
			return nil, false
		}
	case '?', ':', ',', ']', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`', '<':
		return nil, false
	}
	// A plain scalar: up to a comment, without trailing spaces.
	if i := strings.Index(s, " #"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") {
		return nil, false
	}
	kind, b, num, ok := resolvePlain(s)
	if !ok {
		return nil, false
	}
	n := p.arena.new(kind, p.layer)
	switch kind {
	case nBool:
		n.b = b
	case nNumber:
		n.str = num
	case nString:
		n.str = s
	}
	return n, true
}

// flowSequence reads a one-line flow sequence of scalars, such as
// [10.96.0.10] or [a, "b"]; nothing nested, no empty or trailing entries.
func (f *fastYAML) flowSequence(s string) (*node, bool) {
	p := f.p
	end := strings.IndexByte(s, ']')
	if end < 0 || !onlyComment(s[end+1:]) {
		return nil, false
	}
	n := p.arena.new(nArray, p.layer)
	body := strings.Trim(s[1:end], " ")
	if body == "" {
		n.arr = []*node{}
		return n, true
	}
	for item := range strings.SplitSeq(body, ",") {
		item = strings.Trim(item, " ")
		if item == "" || strings.ContainsAny(item, "[]{}#:?") {
			return nil, false
		}
		if (item[0] == '"' || item[0] == '\'') && (len(item) < 2 || item[len(item)-1] != item[0] || strings.IndexByte(item[1:len(item)-1], item[0]) >= 0) {
			return nil, false
		}
		e, ok := f.scalar(item)
		if !ok {
			return nil, false
		}
		n.arr = append(n.arr, e)
	}
	return n, true
}

// onlyComment reports whether what follows a value on its line is nothing
// or a comment.
func onlyComment(s string) bool {
	t := strings.TrimLeft(s, " ")
	return t == "" || (t[0] == '#' && len(t) < len(s))
}

// resolvePlain resolves a plain scalar as yaml.v2 does for an untyped
// target: nNull, nBool (b), nNumber (num, as fromYAML would write it) or
// nString. ok is false for what the fast path leaves to yaml.v2.
func resolvePlain(s string) (kind nodeKind, b bool, num string, ok bool) {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return nBool, true, "", true
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return nBool, false, "", true
	case "~", "null", "Null", "NULL":
		return nNull, false, "", true
	}
	c := s[0]
	switch {
	case c == '.':
		// A float if strconv.ParseFloat takes it (.5, .inf is in yaml.v2's
		// table): leave anything that might be one to yaml.v2.
		if strings.Trim(s, "0123456789eE+-._ninfatNINFAT") == "" {
			return 0, false, "", false
		}
		return nString, false, "", true
	case c >= '0' && c <= '9' || c == '+' || c == '-':
	default:
		return nString, false, "", true
	}
	// yaml.v2 tries, in order: a timestamp (YYYY-...), an integer
	// (strconv.ParseInt/ParseUint, base prefixes, underscores removed), a
	// float (its yamlStyleFloat pattern, then strconv.ParseFloat), 0b/-0b.
	if len(s) > 4 && isDigits(s[:4]) && s[4] == '-' {
		return 0, false, "", false
	}
	if strings.IndexByte(s, '_') >= 0 || strings.Contains(s, ".inf") || strings.Contains(s, ".Inf") || strings.Contains(s, ".INF") {
		return 0, false, "", false
	}
	if isCanonicalInt(s) {
		return nNumber, false, s, true
	}
	dots := 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch >= '0' && ch <= '9', ch >= 'a' && ch <= 'f', ch >= 'A' && ch <= 'F',
			ch == 'x', ch == 'X', ch == 'o', ch == 'O', ch == '+', ch == '-':
		case ch == '.':
			dots++
		default:
			// No integer, float or 0b form has this character.
			return nString, false, "", true
		}
	}
	if dots > 1 {
		return nString, false, "", true // no number has two dots (10.96.0.10)
	}
	if isYAMLFloat(s) && strings.ContainsAny(s, ".eE") {
		// Not an integer in any base (a dot or an exponent), so a float.
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false, "", false
		}
		str, fine := formatFloat(f)
		if !fine {
			return 0, false, "", false
		}
		return nNumber, false, str, true
	}
	return 0, false, "", false
}

// isCanonicalInt: an optional minus and 1 to 18 decimal digits without a
// leading zero, or 0: parsed by yaml.v2 as an int and written back by
// strconv.Itoa as the same text.
func isCanonicalInt(s string) bool {
	d := s
	if strings.HasPrefix(d, "-") {
		d = d[1:]
		if d == "0" {
			return false
		}
	}
	if d == "" || len(d) > 18 || !isDigits(d) {
		return false
	}
	return d == "0" || d[0] != '0'
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// isYAMLFloat matches yaml.v2's yamlStyleFloat:
// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
func isYAMLFloat(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	} else {
		if digits() == 0 {
			return false
		}
		if i < len(s) && s[i] == '.' {
			i++
			digits()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
