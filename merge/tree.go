package merge

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// nodeKind is the JSON type of a node.
type nodeKind uint8

const (
	nNull nodeKind = iota
	nBool
	nNumber
	nString
	nObject
	nArray
)

func (k nodeKind) String() string {
	switch k {
	case nNull:
		return "null"
	case nBool:
		return "bool"
	case nNumber:
		return "number"
	case nString:
		return "string"
	case nObject:
		return "object"
	default:
		return "list"
	}
}

// node is one value of a parsed document: a JSON tree that remembers key order
// and which layer set it. Every layer is parsed once into nodes; merges move
// and replace nodes without serializing anything.
type node struct {
	kind nodeKind
	b    bool
	// unset: markUnset found that no layer but the defaults set anything
	// in this subtree.
	unset bool
	// str holds a string value, or a number as a JSON literal (exactly as
	// encoding/json would receive it after sigs.k8s.io/yaml's YAML-to-JSON).
	str string
	obj []member
	arr []*node
	// layer indexes the layer (document, flag, platform) that set this node.
	layer int32
	// decoded caches the value a custom decoder (UnmarshalJSON/UnmarshalText)
	// produced while the layer was checked, as a pointer to the Go value.
	decoded any
}

// member is one key of an object node.
type member struct {
	key string
	val *node
}

// get returns the value of key, or nil.
func (n *node) get(key string) *node {
	for i := range n.obj {
		if n.obj[i].key == key {
			return n.obj[i].val
		}
	}
	return nil
}

// set replaces or appends key.
func (n *node) set(key string, v *node) {
	for i := range n.obj {
		if n.obj[i].key == key {
			n.obj[i].val = v
			return
		}
	}
	n.obj = append(n.obj, member{key: key, val: v})
}

// del removes key, keeping the order of the others.
func (n *node) del(key string) {
	for i := range n.obj {
		if n.obj[i].key == key {
			n.obj = append(n.obj[:i], n.obj[i+1:]...)
			return
		}
	}
}

// arena hands out nodes from slabs: a document of a few hundred values costs a
// handful of allocations instead of one per value. It also lends the parsers
// of one merge their scratch stacks.
type arena struct {
	slab []node
	// members and elems are the YAML fast path's stacks of the objects and
	// lists being read; keys its scratch for finding duplicates.
	members []member
	elems   []*node
	keys    []string
}

func (a *arena) new(kind nodeKind, layer int32) *node {
	if len(a.slab) == cap(a.slab) {
		// Slabs double up to 1024 nodes: small merges stay small.
		a.slab = make([]node, 0, min(max(2*cap(a.slab), 64), 1024))
	}
	a.slab = a.slab[:len(a.slab)+1]
	n := &a.slab[len(a.slab)-1]
	n.kind, n.layer = kind, layer
	return n
}

// appendJSON writes n as compact JSON, keys in their order.
func appendJSON(buf []byte, n *node) []byte {
	switch n.kind {
	case nNull:
		return append(buf, "null"...)
	case nBool:
		return strconv.AppendBool(buf, n.b)
	case nNumber:
		return append(buf, n.str...)
	case nString:
		return appendJSONString(buf, n.str)
	case nObject:
		buf = append(buf, '{')
		for i, m := range n.obj {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, m.key)
			buf = append(buf, ':')
			buf = appendJSON(buf, m.val)
		}
		return append(buf, '}')
	default:
		buf = append(buf, '[')
		for i, e := range n.arr {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, e)
		}
		return append(buf, ']')
	}
}

func appendJSONString(buf []byte, s string) []byte {
	simple := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			simple = false
			break
		}
	}
	if simple {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(buf, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

// formatFloat renders a YAML float as encoding/json would marshal a float64,
// so that the number literal our decoder sees is the one the kubelet's
// YAML-to-JSON conversion would have produced. ok is false for NaN and
// infinities, which JSON cannot carry.
func formatFloat(f float64) (s string, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	abs := math.Abs(f)
	fmtByte := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtByte = 'e'
	}
	s = strconv.FormatFloat(f, fmtByte, -1, 64)
	if fmtByte == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(s)
		if n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
	}
	return s, true
}

// describeValue renders a scalar node for an error message, shortened.
func describeValue(n *node) string {
	switch n.kind {
	case nString:
		s := n.str
		if len(s) > 64 {
			s = s[:61] + "..."
		}
		return "string " + strconv.Quote(s)
	case nNumber:
		return "number " + n.str
	case nBool:
		return "bool " + strconv.FormatBool(n.b)
	case nNull:
		return "null"
	case nObject:
		return "object"
	default:
		return "list"
	}
}

// pathSeg is one step of a field path: a struct field, a map key or a list index.
type pathSeg struct {
	name  string
	index int
	kind  segKind
}

type segKind uint8

const (
	segField segKind = iota
	segKey
	segIndex
)

// renderPath prints a path the way k8s.io/apimachinery's field.Path does:
// fields joined by dots, map keys and list indexes in brackets.
func renderPath(segs []pathSeg) string {
	var b strings.Builder
	for _, s := range segs {
		switch s.kind {
		case segField:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		case segKey:
			b.WriteByte('[')
			b.WriteString(s.name)
			b.WriteByte(']')
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		}
	}
	return b.String()
}
