package merge

import (
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errEncodeFallback says that encodeValue met something it does not
// reproduce exactly (a ",string" or "omitzero" field, a map with non-string
// keys, a float32, a string that is not valid UTF-8, ...): the caller encodes
// with encoding/json and parses the result instead (fromGo), which is exact
// by definition and only slower.
var errEncodeFallback = errors.New("merge: value needs encoding/json")

var (
	// durationType is metav1.Duration, the most common opaque type of
	// Kubernetes configurations, encoded and decoded without encoding/json
	// (encodeValue, decodeOpaque) exactly as its methods do.
	durationType      = reflect.TypeFor[metav1.Duration]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodeValue builds the node tree that json.Marshal of v, parsed back by
// this package, would give, without the bytes in between: struct fields in
// encoding/json's order with its omitempty rule, maps by sorted key, nil
// pointers, slices and maps as null, and values with their own
// MarshalJSON/MarshalText encoded by encoding/json one by one (a Duration,
// a Quantity). v must be addressable (reached from a pointer), as the
// defaulted object is, so that pointer-receiver marshalers are used as
// encoding/json uses them. It returns errEncodeFallback where it would not
// be exact, and encoding/json's own error for values json.Marshal refuses.
func encodeValue(a *arena, layer int32, v reflect.Value, t *typeInfo) (*node, error) {
	if t.rtype == durationType {
		// metav1.Duration.MarshalJSON is json.Marshal(d.Duration.String()):
		// plain ASCII, nothing to escape.
		n := a.new(nString, layer)
		n.str = time.Duration(v.Field(0).Int()).String()
		return n, nil
	}
	if t.marshaler {
		return encodeMarshaler(a, layer, v)
	}
	switch t.kind {
	case tkPtr:
		if v.IsNil() {
			return a.new(nNull, layer), nil
		}
		return encodeValue(a, layer, v.Elem(), t.elem)
	case tkBool:
		n := a.new(nBool, layer)
		n.b = v.Bool()
		return n, nil
	case tkString:
		if v.Kind() != reflect.String {
			return nil, errEncodeFallback
		}
		s := v.String()
		if !utf8.ValidString(s) {
			return nil, errEncodeFallback // encoding/json rewrites invalid bytes
		}
		n := a.new(nString, layer)
		n.str = s
		return n, nil
	case tkInt:
		n := a.new(nNumber, layer)
		n.str = strconv.FormatInt(v.Int(), 10)
		return n, nil
	case tkUint:
		n := a.new(nNumber, layer)
		n.str = strconv.FormatUint(v.Uint(), 10)
		return n, nil
	case tkFloat:
		if t.bits != 64 {
			return nil, errEncodeFallback
		}
		s, ok := formatFloat(v.Float())
		if !ok {
			return nil, errEncodeFallback // json.Marshal fails; let it say why
		}
		n := a.new(nNumber, layer)
		n.str = s
		return n, nil
	case tkStruct:
		n := a.new(nObject, layer)
		for _, f := range t.encodeOrder {
			if f.encodeFallback {
				return nil, errEncodeFallback
			}
			fv, ok := fieldIfSet(v, f.index)
			if !ok || (f.omitEmpty && isEmptyJSONValue(fv)) {
				continue
			}
			m, err := encodeValue(a, layer, fv, f.typ)
			if err != nil {
				return nil, err
			}
			if n.obj == nil {
				n.obj = make([]member, 0, len(t.encodeOrder))
			}
			n.obj = append(n.obj, member{key: f.name, val: m})
		}
		return n, nil
	case tkMap:
		if v.IsNil() {
			return a.new(nNull, layer), nil
		}
		if t.rtype.Key().Kind() != reflect.String {
			return nil, errEncodeFallback
		}
		n := a.new(nObject, layer)
		n.obj = make([]member, 0, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			m, err := encodeValue(a, layer, iter.Value(), t.elem)
			if err != nil {
				return nil, err
			}
			n.obj = append(n.obj, member{key: iter.Key().String(), val: m})
		}
		if len(n.obj) > 16 {
			slices.SortFunc(n.obj, func(x, y member) int { return strings.Compare(x.key, y.key) })
		} else {
			sortMembers(n.obj)
		}
		return n, nil
	case tkSlice:
		if v.IsNil() {
			return a.new(nNull, layer), nil
		}
		n := a.new(nArray, layer)
		n.arr = make([]*node, v.Len())
		for i := range n.arr {
			e, err := encodeValue(a, layer, v.Index(i), t.elem)
			if err != nil {
				return nil, err
			}
			n.arr[i] = e
		}
		return n, nil
	default: // tkAny, tkOpaque: whatever encoding/json makes of it
		return encodeMarshaler(a, layer, v)
	}
}

// encodeMarshaler encodes one value with encoding/json and parses the
// (usually tiny: "10s", "100Mi") result.
func encodeMarshaler(a *arena, layer int32, v reflect.Value) (*node, error) {
	var data []byte
	var err error
	if v.CanAddr() && v.Kind() != reflect.Interface {
		// Call MarshalJSON itself, as encoding/json does for an addressable
		// value; a simple scalar result is what json.Marshal would return
		// after compacting and escaping it, once parsed.
		if m, ok := v.Addr().Interface().(json.Marshaler); ok {
			if data, err = m.MarshalJSON(); err == nil {
				if n := simpleJSONScalar(a, layer, data); n != nil {
					return n, nil
				}
			}
		}
	}
	if v.CanAddr() {
		data, err = json.Marshal(v.Addr().Interface())
	} else {
		data, err = json.Marshal(v.Interface())
	}
	if err != nil {
		return nil, err
	}
	if n := simpleJSONScalar(a, layer, data); n != nil {
		return n, nil
	}
	return parseJSONValue(a, layer, data)
}

// simpleJSONScalar returns the node of a JSON literal that needs no
// unescaping (a string without backslashes, a number, true, false, null),
// or nil.
func simpleJSONScalar(a *arena, layer int32, data []byte) *node {
	if len(data) == 0 {
		return nil
	}
	switch c := data[0]; {
	case c == '"':
		if len(data) < 2 || data[len(data)-1] != '"' {
			return nil
		}
		body := data[1 : len(data)-1]
		for _, b := range body {
			if b == '\\' || b == '"' || b < 0x20 {
				return nil
			}
		}
		if !utf8.Valid(body) {
			return nil
		}
		n := a.new(nString, layer)
		n.str = string(body)
		return n
	case c == '-' || (c >= '0' && c <= '9'):
		for _, b := range data {
			if !(b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E') {
				return nil
			}
		}
		n := a.new(nNumber, layer)
		n.str = string(data)
		return n
	}
	switch string(data) {
	case "true", "false":
		n := a.new(nBool, layer)
		n.b = data[0] == 't'
		return n
	case "null":
		return a.new(nNull, layer)
	}
	return nil
}

// isEmptyJSONValue is encoding/json's omitempty test.
func isEmptyJSONValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// implementsMarshaler reports whether encoding/json encodes t (or, when
// addressable, *t) with a MarshalJSON or MarshalText method.
func implementsMarshaler(t reflect.Type) bool {
	if t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) {
		return t.Kind() != reflect.Pointer // a pointer is handled as tkPtr, nil first
	}
	if t.Kind() != reflect.Pointer {
		pt := reflect.PointerTo(t)
		return pt.Implements(jsonMarshalerType) || pt.Implements(textMarshalerType)
	}
	return false
}
