package merge

import (
	"fmt"
	"strings"
)

// parsePath splits a field path such as "authentication.webhook.enabled" or
// "featureGates[KubeletTracing]" and resolves it against the configuration
// type. A map key is written in brackets; after a map field a dotted name is
// accepted as a key too ("featureGates.KubeletTracing"). List elements cannot
// be addressed: lists are set as a whole.
func parsePath(root *typeInfo, path string) ([]pathSeg, *typeInfo, error) {
	if path == "" {
		return nil, nil, fmt.Errorf("empty field path")
	}
	var segs []pathSeg
	t := root
	rest := path
	for rest != "" {
		t = t.deref()
		var seg pathSeg
		switch {
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, nil, fmt.Errorf("field path %q: unclosed [", path)
			}
			seg = pathSeg{name: rest[1:end], kind: segKey}
			rest = rest[end+1:]
			if rest != "" && rest[0] != '.' && rest[0] != '[' {
				return nil, nil, fmt.Errorf("field path %q: expected . or [ after ]", path)
			}
		default:
			if len(segs) > 0 {
				if rest[0] != '.' {
					return nil, nil, fmt.Errorf("field path %q: expected . or [", path)
				}
				rest = rest[1:]
			}
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			seg = pathSeg{name: rest[:end], kind: segField}
			rest = rest[end:]
			if t.kind == tkMap {
				seg.kind = segKey
			}
		}
		if seg.name == "" {
			return nil, nil, fmt.Errorf("field path %q: empty segment", path)
		}
		switch {
		case t.kind == tkStruct && seg.kind == segField:
			f := t.fields[seg.name]
			if f == nil {
				return nil, nil, fmt.Errorf("field path %q: no field %q in %s", path, seg.name, t.rtype)
			}
			t = f.typ
		case t.kind == tkMap && seg.kind == segKey:
			t = t.elem
		case t.kind == tkStruct:
			return nil, nil, fmt.Errorf("field path %q: [%s] used on object %s; use .%s", path, seg.name, t.rtype, seg.name)
		default:
			return nil, nil, fmt.Errorf("field path %q: %s is not an object (it is %s)", path, renderPath(segs), t.describe())
		}
		segs = append(segs, seg)
	}
	return segs, t, nil
}

// lookup returns the node at segs, or nil.
func lookup(n *node, segs []pathSeg) *node {
	for _, s := range segs {
		if n == nil || n.kind != nObject {
			return nil
		}
		n = n.get(s.name)
	}
	return n
}

// setAt stores v at segs under root, creating objects on the way (marked with
// v's layer) and replacing non-objects that are in the way.
func setAt(a *arena, root *node, segs []pathSeg, v *node) {
	n := root
	for i, s := range segs {
		if i == len(segs)-1 {
			n.set(s.name, v)
			return
		}
		next := n.get(s.name)
		if next == nil || next.kind != nObject {
			next = a.new(nObject, v.layer)
			n.set(s.name, next)
		}
		n = next
	}
}

// deleteAt removes the node at segs, if any.
func deleteAt(root *node, segs []pathSeg) {
	parent := lookup(root, segs[:len(segs)-1])
	if parent != nil && parent.kind == nObject {
		parent.del(segs[len(segs)-1].name)
	}
}

// touches reports whether the tree sets anything at segs: a value at the
// path or below it, or null at the path or above it (a deletion).
func touches(root *node, segs []pathSeg) bool {
	n := root
	for _, s := range segs {
		if n.kind == nNull {
			return true
		}
		if n.kind != nObject {
			return false
		}
		if n = n.get(s.name); n == nil {
			return false
		}
	}
	return true
}
