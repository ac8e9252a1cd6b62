package merge

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// typeKind says how a Go type is decoded from, and merged as, JSON.
type typeKind uint8

const (
	tkAny    typeKind = iota // interface{}: any JSON value, decoded as sigs.k8s.io/json does
	tkBool                   // bool kinds
	tkInt                    // signed integer kinds
	tkUint                   // unsigned integer kinds
	tkFloat                  // float kinds
	tkString                 // string kinds
	tkStruct                 // structs without custom JSON decoding
	tkMap                    // maps with string, integer or text-unmarshalable keys
	tkSlice                  // slices other than []byte
	tkPtr                    // pointers: null means nil
	tkOpaque                 // custom JSON/text decoding, []byte, arrays, non-empty interfaces: decoded as a whole
)

// typeInfo describes one Go type for decoding and merging. It is built once per
// Pipeline from reflection and never changes afterwards.
type typeInfo struct {
	kind  typeKind
	rtype reflect.Type
	bits  int // for tkInt, tkUint, tkFloat

	// tkStruct
	fields    map[string]*fieldInfo
	fieldList []*fieldInfo // in declaration order, promoted fields included

	// tkMap: the key kind (tkString, tkInt, tkUint or tkOpaque for text keys)
	keyKind typeKind
	// tkMap, tkSlice, tkPtr
	elem *typeInfo

	// tkOpaque: which decoding interface the pointer to the type implements
	jsonUnmarshaler bool
	textUnmarshaler bool

	// marshaler: encoding/json encodes the type with its own MarshalJSON or
	// MarshalText (see encodeValue).
	marshaler bool
	// encodeOrder (tkStruct) lists fieldList in encoding/json's order: by
	// index sequence, promoted fields where their embedded struct is.
	encodeOrder []*fieldInfo
}

// fieldInfo describes one JSON field of a struct.
type fieldInfo struct {
	name  string
	index []int // reflect index path, through embedded structs
	typ   *typeInfo
	// strategy is the strategic merge patch strategy from the patchStrategy
	// tag, retainKeys removed: "", "merge" or "replace".
	strategy string
	mergeKey string // patchMergeKey tag
	// unsettable names the unexported struct type of an embedded pointer
	// the field is promoted through: like encoding/json, we cannot
	// allocate it, and setting the field is an error.
	unsettable string
	// omitEmpty: the json tag says omitempty.
	omitEmpty bool
	// encodeFallback: the json tag has an option encodeValue does not
	// reproduce (string, omitzero).
	encodeFallback bool
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// schemaBuilder turns Go types into typeInfo, sharing one typeInfo per type so
// recursive types terminate.
type schemaBuilder struct {
	seen map[reflect.Type]*typeInfo
}

func buildSchema(t reflect.Type) (*typeInfo, error) {
	b := &schemaBuilder{seen: map[reflect.Type]*typeInfo{}}
	return b.build(t)
}

func (b *schemaBuilder) build(t reflect.Type) (*typeInfo, error) {
	if ti, ok := b.seen[t]; ok {
		return ti, nil
	}
	ti := &typeInfo{rtype: t, marshaler: implementsMarshaler(t)}
	b.seen[t] = ti

	if t.Kind() != reflect.Pointer {
		pt := reflect.PointerTo(t)
		switch {
		case pt.Implements(jsonUnmarshalerType):
			ti.kind, ti.jsonUnmarshaler = tkOpaque, true
			return ti, nil
		case pt.Implements(textUnmarshalerType):
			ti.kind, ti.textUnmarshaler = tkOpaque, true
			return ti, nil
		}
	}

	switch t.Kind() {
	case reflect.Bool:
		ti.kind = tkBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		ti.kind, ti.bits = tkInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		ti.kind, ti.bits = tkUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		ti.kind, ti.bits = tkFloat, t.Bits()
	case reflect.String:
		ti.kind = tkString
	case reflect.Interface:
		if t.NumMethod() == 0 {
			ti.kind = tkAny
		} else {
			ti.kind = tkOpaque
		}
	case reflect.Pointer:
		ti.kind = tkPtr
		elem, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		ti.elem = elem
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(jsonUnmarshalerType) &&
			!reflect.PointerTo(t.Elem()).Implements(textUnmarshalerType) {
			ti.kind = tkOpaque // []byte is base64 in JSON
			return ti, nil
		}
		ti.kind = tkSlice
		elem, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		ti.elem = elem
	case reflect.Map:
		kt := t.Key()
		switch {
		case reflect.PointerTo(kt).Implements(textUnmarshalerType):
			// encoding/json prefers UnmarshalText even for string kinds.
			ti.keyKind = tkOpaque
		case kt.Kind() == reflect.String:
			ti.keyKind = tkString
		default:
			switch kt.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				ti.keyKind = tkInt
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				ti.keyKind = tkUint
			default:
				// encoding/json cannot decode such a map either; let it say so.
				ti.kind = tkOpaque
				return ti, nil
			}
		}
		ti.kind = tkMap
		elem, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		ti.elem = elem
	case reflect.Struct:
		ti.kind = tkStruct
		if err := b.structFields(ti); err != nil {
			return nil, err
		}
	default:
		// Arrays, channels, functions, complex numbers: leave them to the JSON
		// decoder, which accepts arrays and rejects the rest with its own error.
		ti.kind = tkOpaque
	}
	return ti, nil
}

// candidate is one JSON field found while walking a struct and its embedded
// structs, before the encoding/json dominance rules pick a winner per name.
type candidate struct {
	name       string
	tagged     bool
	index      []int
	sf         reflect.StructField
	unsettable string
}

// structFields lists the JSON fields of a struct with the same visibility rules
// as encoding/json: exported fields, json:"-" skipped, embedded structs without
// a name promoted, and among fields with the same name the shallowest wins,
// then the only tagged one; otherwise the name is ambiguous and dropped.
func (b *schemaBuilder) structFields(ti *typeInfo) error {
	type queued struct {
		t          reflect.Type
		index      []int
		unsettable string
	}
	current := []queued{}
	next := []queued{{t: ti.rtype}}
	visited := map[reflect.Type]bool{}
	var all [][]candidate // per depth

	for len(next) > 0 {
		current, next = next, current[:0]
		var level []candidate
		for _, q := range current {
			if visited[q.t] {
				continue
			}
			visited[q.t] = true
			for i := 0; i < q.t.NumField(); i++ {
				sf := q.t.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := make([]int, len(q.index)+1)
				copy(index, q.index)
				index[len(q.index)] = i

				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					level = append(level, candidate{name: name, tagged: tagged, index: index, sf: sf, unsettable: q.unsettable})
					continue
				}
				// An embedded struct without a name: its fields are promoted.
				unsettable := q.unsettable
				if unsettable == "" && !sf.IsExported() && sf.Type.Kind() == reflect.Pointer {
					unsettable = ft.String()
				}
				next = append(next, queued{t: ft, index: index, unsettable: unsettable})
			}
		}
		all = append(all, level)
	}

	ti.fields = map[string]*fieldInfo{}
	for _, level := range all {
		byName := map[string][]candidate{}
		var order []string
		for _, c := range level {
			if _, done := ti.fields[c.name]; done {
				continue // a shallower field with this name dominates
			}
			if _, ok := byName[c.name]; !ok {
				order = append(order, c.name)
			}
			byName[c.name] = append(byName[c.name], c)
		}
		for _, name := range order {
			cs := byName[name]
			winner, ok := dominant(cs)
			if !ok {
				// Ambiguous at this depth: encoding/json ignores the name, and
				// so do we; deeper fields with the same name stay hidden too.
				ti.fields[name] = nil
				continue
			}
			ft, err := b.build(winner.sf.Type)
			if err != nil {
				return err
			}
			strategy, err := patchStrategy(winner.sf.Tag.Get("patchStrategy"))
			if err != nil {
				return fmt.Errorf("%s.%s: %w", ti.rtype, winner.sf.Name, err)
			}
			fi := &fieldInfo{
				name:       name,
				index:      winner.index,
				typ:        ft,
				strategy:   strategy,
				mergeKey:   winner.sf.Tag.Get("patchMergeKey"),
				unsettable: winner.unsettable,
			}
			if _, opts, ok := strings.Cut(winner.sf.Tag.Get("json"), ","); ok {
				for o := range strings.SplitSeq(opts, ",") {
					switch o {
					case "omitempty":
						fi.omitEmpty = true
					case "string", "omitzero":
						fi.encodeFallback = true
					}
				}
			}
			ti.fields[name] = fi
			ti.fieldList = append(ti.fieldList, fi)
		}
	}
	for name, fi := range ti.fields {
		if fi == nil {
			delete(ti.fields, name)
		}
	}
	ti.encodeOrder = slices.Clone(ti.fieldList)
	slices.SortStableFunc(ti.encodeOrder, func(a, b *fieldInfo) int { return slices.Compare(a.index, b.index) })
	return nil
}

func dominant(cs []candidate) (candidate, bool) {
	if len(cs) == 1 {
		return cs[0], true
	}
	var tagged []candidate
	for _, c := range cs {
		if c.tagged {
			tagged = append(tagged, c)
		}
	}
	if len(tagged) == 1 {
		return tagged[0], true
	}
	return candidate{}, false
}

// validTagName mirrors encoding/json's check of a json tag name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c > 127:
		default:
			return false
		}
	}
	return true
}

// patchStrategy reduces a patchStrategy tag to the strategy that matters when
// applying a patch: retainKeys only acts through a $retainKeys directive, which
// configuration files do not carry.
func patchStrategy(tag string) (string, error) {
	if tag == "" {
		return "", nil
	}
	var out string
	for _, s := range strings.Split(tag, ",") {
		switch s {
		case "retainKeys":
		case "merge", "replace":
			if out != "" {
				return "", fmt.Errorf("unexpected patch strategy %q", tag)
			}
			out = s
		default:
			return "", fmt.Errorf("unknown patch strategy %q", tag)
		}
	}
	return out, nil
}

// describe names the JSON shape a type expects, for error messages.
func (ti *typeInfo) describe() string {
	switch ti.kind {
	case tkPtr:
		return ti.elem.describe()
	case tkStruct:
		return "object"
	case tkMap:
		return "object"
	case tkSlice:
		return "list"
	case tkAny:
		return "any value"
	default:
		return ti.rtype.String()
	}
}

// deref skips pointers.
func (ti *typeInfo) deref() *typeInfo {
	for ti.kind == tkPtr {
		ti = ti.elem
	}
	return ti
}
