package merge

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// docMode says how a layer's tree is read.
type docMode uint8

const (
	// modeDocument: a complete document (the shared/base layer). null means
	// "not set" and is dropped.
	modeDocument docMode = iota
	// modeMergePatch: a JSON merge patch (drop-ins, flag overrides). null
	// deletes; no directives.
	modeMergePatch
	// modeStrategic: a strategic merge patch (the instance layer). null
	// deletes; $patch directives are allowed outside atomic lists.
	modeStrategic
)

// The strategic merge patch directive keys.
const (
	directiveKey          = "$patch"
	retainKeysKey         = "$retainKeys"
	setElementOrderPrefix = "$setElementOrder/"
	deleteFromListPrefix  = "$deleteFromPrimitiveList/"
)

// checker walks one layer's tree against the configuration type: it reports
// unknown fields, wrong types and out-of-range values with their paths (all of
// them, not only the first), drops what must not reach the merge (unknown
// fields in lenient mode, nulls of a complete document), and decodes values
// with custom decoders once, caching the result in the node.
type checker struct {
	mode     docMode
	lenient  bool
	problems []Problem
	warnings []Problem
	path     []pathSeg
	// atomic counts enclosing lists that a strategic merge replaces as a
	// whole: directives inside them would be data, not directives.
	atomic int
}

func (c *checker) add(t ProblemType, field, detail string) {
	c.problems = append(c.problems, Problem{Type: t, Path: renderPath(c.path), Field: field, Detail: detail})
}

func (c *checker) push(s pathSeg) { c.path = append(c.path, s) }
func (c *checker) pop()           { c.path = c.path[:len(c.path)-1] }

// check validates a non-nil node against t.
func (c *checker) check(n *node, t *typeInfo) {
	if n.kind == nNull {
		return // null unsets (or, in a patch, deletes): always allowed
	}
	t = t.deref()
	switch t.kind {
	case tkAny:
	case tkBool:
		if n.kind != nBool {
			c.wrongType(n, t)
		}
	case tkString:
		if n.kind != nString {
			c.wrongType(n, t)
		}
	case tkInt:
		if n.kind != nNumber {
			c.wrongType(n, t)
			return
		}
		if _, err := strconv.ParseInt(n.str, 10, t.bits); err != nil {
			c.numberError(n, t, err)
		}
	case tkUint:
		if n.kind != nNumber {
			c.wrongType(n, t)
			return
		}
		if _, err := strconv.ParseUint(n.str, 10, t.bits); err != nil {
			c.numberError(n, t, err)
		}
	case tkFloat:
		if n.kind != nNumber {
			c.wrongType(n, t)
			return
		}
		if _, err := strconv.ParseFloat(n.str, t.bits); err != nil {
			c.numberError(n, t, err)
		}
	case tkOpaque:
		v, err := decodeOpaque(n, t)
		if err != nil {
			c.add(ProblemInvalidValue, "", fmt.Sprintf("cannot decode %s as %s: %v", describeValue(n), t.rtype, err))
			return
		}
		if n.kind != nObject && n.kind != nArray {
			n.decoded = v
		}
	case tkStruct:
		if n.kind != nObject {
			c.wrongType(n, t)
			return
		}
		c.checkObject(n, t, nil)
	case tkMap:
		if n.kind != nObject {
			c.wrongType(n, t)
			return
		}
		c.checkObject(n, t, nil)
	case tkSlice:
		if n.kind != nArray {
			c.wrongType(n, t)
			return
		}
		// Lists reached here (not through a field with patchStrategy merge)
		// are replaced as a whole by every merge.
		c.atomic++
		defer func() { c.atomic-- }()
		for i, e := range n.arr {
			c.push(pathSeg{index: i, kind: segIndex})
			c.check(e, t.elem)
			c.pop()
		}
	}
}

// checkList checks a list field, knowing its patch strategy.
func (c *checker) checkList(n *node, t *typeInfo, f *fieldInfo) {
	if n.kind != nArray || t.kind != tkSlice {
		c.check(n, t)
		return
	}
	mergeList := f != nil && f.strategy == "merge"
	if !mergeList {
		c.atomic++
		defer func() { c.atomic-- }()
	}
	et := t.elem.deref()
	for i, e := range n.arr {
		c.push(pathSeg{index: i, kind: segIndex})
		if mergeList && e.kind == nObject && (et.kind == tkStruct || et.kind == tkMap) {
			c.checkObject(e, et, f)
		} else {
			c.check(e, t.elem)
		}
		c.pop()
	}
}

// checkObject checks the members of an object against a struct or map type.
// listField is set when the object is an element of a merge list.
func (c *checker) checkObject(n *node, t *typeInfo, listField *fieldInfo) {
	out := n.obj[:0]
	for _, m := range n.obj {
		if c.isDirective(m.key, t) {
			if c.checkDirective(n, m, t, listField) {
				out = append(out, m)
			}
			continue
		}
		if m.val.kind == nNull && (c.mode == modeDocument || c.atomic > 0) {
			// A complete document, or an element of a list that every
			// merge replaces as a whole (a complete value in any layer):
			// null is the same as absent. As jsonpatch.MergePatch, which
			// prunes such nulls, and strategicpatch where the base lacks
			// the list.
			continue
		}
		if t.kind == tkMap {
			c.push(pathSeg{name: m.key, kind: segKey})
			c.checkMapKey(m.key, t)
			c.check(m.val, t.elem)
			c.pop()
			out = append(out, m)
			continue
		}
		f := t.fields[m.key]
		if f == nil {
			c.unknownField(m.key)
			continue
		}
		c.push(pathSeg{name: m.key, kind: segField})
		if f.unsettable != "" && m.val.kind != nNull {
			c.add(ProblemInvalidValue, "", "cannot set a field promoted through an embedded pointer to the unexported struct "+f.unsettable)
			c.pop()
			continue
		}
		if ft := f.typ.deref(); ft.kind == tkSlice && c.mode == modeStrategic {
			c.checkList(m.val, ft, f)
		} else {
			c.check(m.val, f.typ)
		}
		c.pop()
		out = append(out, m)
	}
	// Clear the tail so dropped nodes are not kept alive by the slice.
	for i := len(out); i < len(n.obj); i++ {
		n.obj[i] = member{}
	}
	n.obj = out
}

func (c *checker) unknownField(key string) {
	detail := ""
	if c.mode != modeStrategic && isDirectiveName(key) {
		detail = "strategic merge directives are only allowed in the instance document"
	}
	if c.lenient {
		c.warnings = append(c.warnings, Problem{Type: ProblemUnknownField, Path: renderPath(c.path), Field: key, Detail: detail})
		return
	}
	c.add(ProblemUnknownField, key, detail)
}

func isDirectiveName(key string) bool {
	return key == directiveKey || key == retainKeysKey ||
		strings.HasPrefix(key, setElementOrderPrefix) || strings.HasPrefix(key, deleteFromListPrefix)
}

func (c *checker) isDirective(key string, t *typeInfo) bool {
	if c.mode != modeStrategic || !isDirectiveName(key) {
		return false
	}
	if t.kind == tkStruct {
		_, isField := t.fields[key]
		return !isField
	}
	return true
}

// checkDirective validates one directive member; it reports whether to keep it.
func (c *checker) checkDirective(obj *node, m member, t *typeInfo, listField *fieldInfo) bool {
	if c.atomic > 0 {
		c.add(ProblemDirective, m.key, fmt.Sprintf("directive %s is not allowed inside a list that is replaced as a whole (no patchStrategy merge)", m.key))
		return false
	}
	if m.key != directiveKey {
		c.add(ProblemDirective, m.key, fmt.Sprintf("directive %s is not supported in configuration files; only $patch: replace and $patch: delete are", m.key))
		return false
	}
	if m.val.kind != nString || (m.val.str != "replace" && m.val.str != "delete") {
		c.add(ProblemDirective, m.key, fmt.Sprintf("$patch must be \"replace\" or \"delete\", got %s", describeValue(m.val)))
		return false
	}
	if m.val.str == "delete" && len(c.path) == 0 {
		c.add(ProblemDirective, m.key, "$patch: delete is not allowed at the document root")
		return false
	}
	if listField != nil && m.val.str == "delete" && listField.mergeKey != "" && obj.get(listField.mergeKey) == nil {
		c.add(ProblemDirective, m.key, fmt.Sprintf("$patch: delete in a list element needs the merge key %q", listField.mergeKey))
		return false
	}
	return true
}

func (c *checker) checkMapKey(key string, t *typeInfo) {
	var err error
	switch t.keyKind {
	case tkInt:
		_, err = strconv.ParseInt(key, 10, t.rtype.Key().Bits())
	case tkUint:
		_, err = strconv.ParseUint(key, 10, t.rtype.Key().Bits())
	case tkOpaque:
		kp := reflect.New(t.rtype.Key())
		err = kp.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(key))
	}
	if err != nil {
		c.add(ProblemInvalidValue, "", fmt.Sprintf("invalid map key %q for %s: %v", key, t.rtype.Key(), err))
	}
}

func (c *checker) wrongType(n *node, t *typeInfo) {
	detail := "expected " + t.describe() + ", got " + describeValue(n)
	if t.kind == tkString && (n.kind == nNumber || n.kind == nBool) {
		detail += " (quote the value to make it a string)"
	}
	c.add(ProblemWrongType, "", detail)
}

func (c *checker) numberError(n *node, t *typeInfo, err error) {
	if isRangeErr(err) {
		c.add(ProblemInvalidValue, "", fmt.Sprintf("number %s overflows %s", n.str, t.rtype))
		return
	}
	c.add(ProblemWrongType, "", fmt.Sprintf("expected %s, got number %s", t.rtype, n.str))
}

// decodeOpaque decodes a node into a new value of a type with custom JSON
// decoding, exactly as encoding/json would hand it over. It returns a pointer.
func decodeOpaque(n *node, t *typeInfo) (any, error) {
	if t.rtype == durationType && n.kind == nString && utf8.ValidString(n.str) {
		// metav1.Duration.UnmarshalJSON: the JSON string, then
		// time.ParseDuration. Its errors come from the method itself.
		if d, err := time.ParseDuration(n.str); err == nil {
			return &metav1.Duration{Duration: d}, nil
		}
	}
	ptr := reflect.New(t.rtype)
	switch {
	case t.jsonUnmarshaler:
		err := ptr.Interface().(json.Unmarshaler).UnmarshalJSON(appendJSON(nil, n))
		return ptr.Interface(), err
	case t.textUnmarshaler && n.kind == nString:
		err := ptr.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.str))
		return ptr.Interface(), err
	default:
		strictErrs, err := kjson.UnmarshalStrict(appendJSON(nil, n), ptr.Interface())
		if err == nil && len(strictErrs) > 0 {
			err = strictErrs[0]
		}
		return ptr.Interface(), err
	}
}

// assign stores a checked tree into v, a settable value of type t, the way
// encoding/json would decode the tree's JSON into it. null leaves v unchanged.
func assign(v reflect.Value, n *node, t *typeInfo) error {
	if n.kind == nNull {
		return nil
	}
	switch t.kind {
	case tkPtr:
		if v.IsNil() {
			v.Set(reflect.New(t.rtype.Elem()))
		}
		return assign(v.Elem(), n, t.elem)
	case tkBool:
		v.SetBool(n.b)
	case tkString:
		v.SetString(n.str)
	case tkInt:
		i, err := strconv.ParseInt(n.str, 10, t.bits)
		if err != nil {
			return err
		}
		v.SetInt(i)
	case tkUint:
		u, err := strconv.ParseUint(n.str, 10, t.bits)
		if err != nil {
			return err
		}
		v.SetUint(u)
	case tkFloat:
		f, err := strconv.ParseFloat(n.str, t.bits)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case tkAny:
		v.Set(reflect.ValueOf(toAny(n)))
	case tkOpaque:
		d := n.decoded
		if d == nil {
			var err error
			if d, err = decodeOpaque(n, t); err != nil {
				return err
			}
		}
		v.Set(reflect.ValueOf(d).Elem())
	case tkStruct:
		for _, m := range n.obj {
			f := t.fields[m.key]
			if f == nil {
				continue // a directive, or a field dropped in lenient mode
			}
			fv, err := fieldByIndex(v, f.index)
			if err != nil {
				return err
			}
			if err := assign(fv, m.val, f.typ); err != nil {
				return fmt.Errorf("%s: %w", m.key, err)
			}
		}
	case tkMap:
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(t.rtype, len(n.obj)))
		}
		// One key and one element value for the whole map: SetMapIndex
		// copies them.
		ev := reflect.New(t.rtype.Elem()).Elem()
		var kv reflect.Value
		if t.keyKind == tkString {
			kv = reflect.New(t.rtype.Key()).Elem()
		}
		for i, m := range n.obj {
			k := kv
			if t.keyKind == tkString {
				kv.SetString(m.key)
			} else {
				var err error
				if k, err = mapKey(m.key, t); err != nil {
					return err
				}
			}
			if i > 0 {
				ev.SetZero()
			}
			if err := assign(ev, m.val, t.elem); err != nil {
				return fmt.Errorf("[%s]: %w", m.key, err)
			}
			v.SetMapIndex(k, ev)
		}
	case tkSlice:
		s := reflect.MakeSlice(t.rtype, len(n.arr), len(n.arr))
		for i, e := range n.arr {
			if err := assign(s.Index(i), e, t.elem); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		v.Set(s)
	}
	return nil
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded pointers.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, error) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, fmt.Errorf("cannot set embedded pointer to unexported struct %s", v.Type().Elem())
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, nil
}

func mapKey(key string, t *typeInfo) (reflect.Value, error) {
	kt := t.rtype.Key()
	switch t.keyKind {
	case tkString:
		return reflect.ValueOf(key).Convert(kt), nil
	case tkInt:
		i, err := strconv.ParseInt(key, 10, kt.Bits())
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(i).Convert(kt), nil
	case tkUint:
		u, err := strconv.ParseUint(key, 10, kt.Bits())
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(u).Convert(kt), nil
	default:
		kp := reflect.New(kt)
		if err := kp.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(key)); err != nil {
			return reflect.Value{}, err
		}
		return kp.Elem(), nil
	}
}

// toAny converts a node into the value sigs.k8s.io/json produces for an
// interface{} target: integers as int64, other numbers as float64.
func toAny(n *node) any {
	switch n.kind {
	case nNull:
		return nil
	case nBool:
		return n.b
	case nString:
		return n.str
	case nNumber:
		if i, err := strconv.ParseInt(n.str, 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(n.str, 64)
		return f
	case nObject:
		m := make(map[string]any, len(n.obj))
		for _, mb := range n.obj {
			m[mb.key] = toAny(mb.val)
		}
		return m
	default:
		s := make([]any, len(n.arr))
		for i, e := range n.arr {
			s[i] = toAny(e)
		}
		return s
	}
}
