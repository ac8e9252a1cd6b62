package merge

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Override sets one field on top of every other layer: the representation of
// an explicitly set command-line flag.
type Override struct {
	// Path is the field path, such as "port", "authentication.anonymous.enabled"
	// or "featureGates[KubeletTracing]".
	Path string
	// Value is a JSON-compatible Go value of the field's JSON form (a string
	// for a duration; nil deletes the field).
	Value any
	// Source names the override in errors and provenance, e.g. "flag --port".
	// Empty means "flags".
	Source string
	// Merge merges an object value into the field's current value by key
	// (JSON merge patch), as the kubelet does for --feature-gates, instead of
	// replacing it, as the kubelet does for --eviction-hard.
	Merge bool
}

// FlagBinding says which configuration field a command-line flag sets.
type FlagBinding struct {
	// Path is the field path.
	Path string
	// Merge is copied to Override.Merge.
	Merge bool
}

// FlagOverrides returns an Override for every flag of fs that was set on the
// command line (pflag's Changed) and has a binding, in fs's lexical order.
// Flags without a binding are not configuration fields and are skipped. The
// flag's text is converted to the field's JSON form: numbers and booleans
// parsed, lists taken from pflag.SliceValue or split at commas, maps parsed
// from "key=value,key=value".
func (p *Pipeline[T]) FlagOverrides(fs *pflag.FlagSet, bindings map[string]FlagBinding) ([]Override, error) {
	var out []Override
	var errs []string
	fs.Visit(func(fl *pflag.Flag) {
		b, ok := bindings[fl.Name]
		if !ok || !fl.Changed {
			return
		}
		segs, typ, err := parsePath(p.root, b.Path)
		if err != nil {
			errs = append(errs, fmt.Sprintf("flag --%s: %v", fl.Name, err))
			return
		}
		v, err := flagValue(fl, typ)
		if err != nil {
			errs = append(errs, fmt.Sprintf("flag --%s (%s): %v", fl.Name, renderPath(segs), err))
			return
		}
		out = append(out, Override{Path: renderPath(segs), Value: v, Source: "flag --" + fl.Name, Merge: b.Merge})
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("merge: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

func flagValue(fl *pflag.Flag, t *typeInfo) (any, error) {
	t = t.deref()
	switch t.kind {
	case tkSlice:
		var items []string
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			items = sv.GetSlice()
		} else {
			s := strings.TrimSuffix(strings.TrimPrefix(fl.Value.String(), "["), "]")
			if s != "" {
				items = strings.Split(s, ",")
			}
		}
		list := make([]any, len(items))
		for i, it := range items {
			v, err := scalarFromText(strings.TrimSpace(it), t.elem.deref())
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			list[i] = v
		}
		return list, nil
	case tkMap:
		m := map[string]any{}
		s := strings.TrimSpace(fl.Value.String())
		if s == "" {
			return m, nil
		}
		for _, kv := range strings.Split(s, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%q is not key=value", kv)
			}
			v, err := scalarFromText(strings.TrimSpace(val), t.elem.deref())
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k, err)
			}
			m[strings.TrimSpace(k)] = v
		}
		return m, nil
	case tkStruct:
		return nil, fmt.Errorf("bound to an object; bind flags to single fields")
	default:
		return scalarFromText(fl.Value.String(), t)
	}
}

// scalarFromText converts flag text to the JSON form of a scalar field.
func scalarFromText(s string, t *typeInfo) (any, error) {
	switch t.kind {
	case tkBool:
		return strconv.ParseBool(s)
	case tkInt:
		if _, err := strconv.ParseInt(s, 10, t.bits); err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case tkUint:
		if _, err := strconv.ParseUint(s, 10, t.bits); err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case tkFloat:
		if _, err := strconv.ParseFloat(s, t.bits); err != nil {
			return nil, err
		}
		return json.Number(s), nil
	case tkString, tkOpaque, tkAny:
		return s, nil
	}
	return nil, fmt.Errorf("cannot set %s from a flag", t.describe())
}

// applyOverrides sets the flag overrides on the merged tree.
func (p *Pipeline[T]) applyOverrides(r *mergeRun, root *node, overrides []Override) {
	for _, o := range overrides {
		src := o.Source
		if src == "" {
			src = "flags"
		}
		layer := r.layer(src)
		segs, typ, err := parsePath(p.root, o.Path)
		if err != nil {
			r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: src, Problems: []Problem{{Type: ProblemPath, Detail: err.Error()}}})
			continue
		}
		n, err := fromGo(&r.a, layer, o.Value)
		if err != nil {
			r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: src, Problems: []Problem{{Type: ProblemWrongType, Path: renderPath(segs), Detail: err.Error()}}})
			continue
		}
		c := checker{mode: modeMergePatch, path: segs, lenient: false}
		c.check(n, typ)
		if len(c.problems) > 0 {
			r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: src, Problems: c.problems})
			continue
		}
		switch {
		case n.kind == nNull:
			deleteAt(root, segs)
		case o.Merge && n.kind == nObject:
			setAt(&r.a, root, segs, mergePatch(&r.a, lookup(root, segs), n))
		default:
			setAt(&r.a, root, segs, n)
		}
	}
}
