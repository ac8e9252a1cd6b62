package merge

import (
	"fmt"
	"sort"
	"strconv"
)

// strategic applies a strategic merge patch (the instance layer) to a tree,
// driven by the configuration type: objects merge by key (structs and Go maps
// alike, whatever their values are), lists are replaced unless their field
// says patchStrategy:"merge", null deletes, and $patch directives work.
//
// It follows k8s.io/apimachinery's strategicpatch.StrategicMergePatch except
// for the differences the table "Differences from strategicpatch" of the
// package documentation lists.
//
// Unknown fields never get here: the checker has reported them.
type strategic struct {
	a        *arena
	problems []Problem
	path     []pathSeg
}

func (s *strategic) add(detail string) {
	s.problems = append(s.problems, Problem{Type: ProblemMerge, Path: renderPath(s.path), Detail: detail})
}

// merge merges patch over orig (nil when absent) at a position of type t
// (nil when the schema says nothing, under interface{} fields); f is the
// struct field holding the value, for its patch strategy. nil means delete.
func (s *strategic) merge(orig, patch *node, t *typeInfo, f *fieldInfo) *node {
	if t != nil {
		if t = t.deref(); t.kind == tkAny {
			t = nil // interface{}: no schema below this point
		}
	}
	switch patch.kind {
	case nNull:
		return nil
	case nObject:
		if t != nil && t.kind == tkOpaque {
			return patch
		}
		if f != nil && f.strategy == "replace" {
			orig = nil
		}
		return s.mergeObject(orig, patch, t)
	case nArray:
		isMergeList := f != nil && f.strategy == "merge" && t != nil && t.kind == tkSlice
		if !isMergeList {
			return patch
		}
		if orig != nil && orig.kind == nArray {
			return s.mergeList(orig, patch, t, f)
		}
		// Nothing to merge with: the patch list, without its directives.
		return s.withoutDirectiveElements(patch, t)
	default:
		return patch
	}
}

func (s *strategic) directive(patch *node, t *typeInfo) string {
	if t != nil && t.kind == tkStruct {
		if _, isField := t.fields[directiveKey]; isField {
			return ""
		}
	}
	if d := patch.get(directiveKey); d != nil && d.kind == nString {
		return d.str
	}
	return ""
}

// mergeObject merges a patch object over orig.
func (s *strategic) mergeObject(orig, patch *node, t *typeInfo) *node {
	switch s.directive(patch, t) {
	case "delete":
		return nil
	case "replace":
		orig = nil
	}
	out := orig
	if out == nil || out.kind != nObject {
		out = s.a.new(nObject, patch.layer)
	}
	for _, m := range patch.obj {
		var (
			ft  *typeInfo
			f   *fieldInfo
			seg = pathSeg{name: m.key, kind: segKey}
		)
		if t != nil {
			switch t.kind {
			case tkStruct:
				if f = t.fields[m.key]; f != nil {
					ft, seg.kind = f.typ, segField
				} else if m.key == directiveKey {
					continue
				}
			case tkMap:
				if m.key == directiveKey {
					continue
				}
				ft = t.elem
			}
		} else if m.key == directiveKey {
			continue
		}
		i := indexOf(out, m.key)
		var cur *node
		if i >= 0 {
			cur = out.obj[i].val
		}
		s.path = append(s.path, seg)
		r := s.merge(cur, m.val, ft, f)
		s.path = s.path[:len(s.path)-1]
		switch {
		case r == nil && i >= 0:
			out.obj = append(out.obj[:i], out.obj[i+1:]...)
		case r == nil:
		case i >= 0:
			out.obj[i].val = r
		default:
			out.obj = append(out.obj, member{key: m.key, val: r})
		}
	}
	return out
}

// withoutDirectiveElements cleans a merge list that has nothing to merge with.
func (s *strategic) withoutDirectiveElements(patch *node, t *typeInfo) *node {
	et := t.elem
	out := s.a.new(nArray, patch.layer)
	out.arr = make([]*node, 0, len(patch.arr))
	for i, e := range patch.arr {
		if e.kind == nObject && e.get(directiveKey) != nil {
			continue
		}
		if e.kind == nObject {
			s.path = append(s.path, pathSeg{index: i, kind: segIndex})
			e = s.mergeObject(nil, e, et.deref())
			s.path = s.path[:len(s.path)-1]
		}
		out.arr = append(out.arr, e)
	}
	return out
}

// mergeList merges two lists of a field with patchStrategy merge, keeping
// the element order strategicpatch produces: patch elements in patch order,
// the original's other elements interleaved where the original had them.
func (s *strategic) mergeList(orig, patch *node, t *typeInfo, f *fieldInfo) *node {
	if len(orig.arr) == 0 && len(patch.arr) == 0 {
		return orig
	}
	kind, ok := s.elementKind(orig, patch)
	if !ok {
		return nil
	}
	et := t.elem.deref()
	out := s.a.new(nArray, patch.layer)

	if kind != nObject {
		// A set of scalars: union, first occurrence kept.
		merged := make([]*node, 0, len(orig.arr)+len(patch.arr))
		for _, e := range orig.arr {
			if indexScalar(merged, e) < 0 {
				merged = append(merged, e)
			}
		}
		for _, e := range patch.arr {
			if indexScalar(merged, e) < 0 {
				merged = append(merged, e)
			}
		}
		key := func(n *node) *node { return n }
		out.arr = normalizeOrder(merged, patch.arr, orig.arr, key)
		return out
	}

	mergeKey := f.mergeKey
	if mergeKey == "" {
		s.add("cannot merge a list of objects without a merge key (patchMergeKey)")
		return nil
	}
	keyOf := func(n *node) *node {
		if n.kind != nObject {
			return nil
		}
		return n.get(mergeKey)
	}
	for i, e := range orig.arr {
		if keyOf(e) == nil {
			s.path = append(s.path, pathSeg{index: i, kind: segIndex})
			s.add(fmt.Sprintf("list element has no merge key %q", mergeKey))
			s.path = s.path[:len(s.path)-1]
			return nil
		}
	}

	// Directive elements first: deletions by merge key, or replace.
	base := append([]*node(nil), orig.arr...)
	var patchItems []*node
	replace := false
	for _, e := range patch.arr {
		switch s.directive(e, et) {
		case "delete":
			kv := keyOf(e)
			kept := base[:0]
			for _, b := range base {
				if !scalarEqual(keyOf(b), kv) {
					kept = append(kept, b)
				}
			}
			base = kept
		case "replace":
			replace = true
		default:
			patchItems = append(patchItems, e)
		}
	}
	if replace {
		// The patch's elements become the list; like strategicpatch, order
		// them as an original list (elements sharing a merge key together).
		items := cleanAll(s, patchItems, et)
		out.arr = normalizeOrder(items, nil, items, keyOf)
		return out
	}

	merged := append([]*node(nil), base...)
	for i, p := range patchItems {
		kv := keyOf(p)
		s.path = append(s.path, pathSeg{index: i, kind: segIndex})
		if kv == nil {
			s.add(fmt.Sprintf("list element has no merge key %q", mergeKey))
			s.path = s.path[:len(s.path)-1]
			return nil
		}
		found := -1
		for j, m := range merged {
			if scalarEqual(keyOf(m), kv) {
				found = j
				break
			}
		}
		if found >= 0 {
			merged[found] = s.mergeObject(merged[found], p, et)
		} else {
			merged = append(merged, s.mergeObject(nil, p, et))
		}
		s.path = s.path[:len(s.path)-1]
	}
	out.arr = normalizeOrder(merged, patchItems, base, keyOf)
	return out
}

func cleanAll(s *strategic, items []*node, et *typeInfo) []*node {
	out := make([]*node, 0, len(items))
	for _, e := range items {
		if e.kind == nObject {
			e = s.mergeObject(nil, e, et)
		}
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// elementKind returns the JSON type shared by all elements of both lists.
func (s *strategic) elementKind(lists ...*node) (nodeKind, bool) {
	kind, seen := nNull, false
	for _, l := range lists {
		for _, e := range l.arr {
			if !seen {
				kind, seen = e.kind, true
				continue
			}
			if e.kind != kind {
				s.add("cannot merge a list whose elements have different types")
				return 0, false
			}
		}
	}
	if kind == nArray {
		s.add("cannot merge a list of lists")
		return 0, false
	}
	return kind, true
}

// normalizeOrder orders a merged list as strategicpatch does: the elements
// named in the patch, in patch order, interleaved with the original-only
// elements in original order, an original-only element going first when the
// original had it before the patch element being placed.
func normalizeOrder(merged, patchOrder, serverOrder []*node, key func(*node) *node) []*node {
	index := func(list []*node, n *node) int {
		k := key(n)
		for i, e := range list {
			if scalarEqual(key(e), k) {
				return i
			}
		}
		return -1
	}
	var inPatch, serverOnly []*node
	for _, m := range merged {
		if index(patchOrder, m) >= 0 {
			inPatch = append(inPatch, m)
		} else {
			serverOnly = append(serverOnly, m)
		}
	}
	byOrder := func(list []*node, order []*node) {
		sort.SliceStable(list, func(i, j int) bool {
			if ii := index(order, list[i]); ii >= 0 {
				if ij := index(order, list[j]); ij >= 0 {
					return ii < ij
				}
			}
			return true
		})
	}
	byOrder(inPatch, patchOrder)
	byOrder(serverOnly, serverOrder)

	out := make([]*node, 0, len(merged))
	i, j := 0, 0
	for len(out) < len(merged) {
		switch {
		case i >= len(serverOnly):
			out = append(out, inPatch[j])
			j++
		case j >= len(inPatch):
			out = append(out, serverOnly[i])
			i++
		default:
			li, ri := index(serverOrder, serverOnly[i]), index(serverOrder, inPatch[j])
			if li >= 0 && ri >= 0 && li < ri {
				out = append(out, serverOnly[i])
				i++
			} else {
				out = append(out, inPatch[j])
				j++
			}
		}
	}
	return out
}

func indexScalar(list []*node, n *node) int {
	for i, e := range list {
		if scalarEqual(e, n) {
			return i
		}
	}
	return -1
}

// scalarEqual compares two scalar nodes as JSON values (numbers by value).
// Objects and lists are never equal, as in strategicpatch.
func scalarEqual(a, b *node) bool {
	if a == nil || b == nil || a.kind != b.kind {
		return false
	}
	switch a.kind {
	case nNull:
		return true
	case nBool:
		return a.b == b.b
	case nString:
		return a.str == b.str
	case nNumber:
		if a.str == b.str {
			return true
		}
		x, err1 := strconv.ParseFloat(a.str, 64)
		y, err2 := strconv.ParseFloat(b.str, 64)
		return err1 == nil && err2 == nil && x == y
	}
	return false
}
