package merge

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Profile is what merge needs to know about a configuration type T (a struct
// such as k8s.io/kubelet/config/v1beta1.KubeletConfiguration, used as *T).
type Profile[T any] interface {
	// GroupVersionKind is the apiVersion/kind every document must carry.
	GroupVersionKind() schema.GroupVersionKind
	// Default fills unset fields of obj in place.
	Default(obj *T)
	// Validate returns every problem of obj, with field paths.
	Validate(obj *T) field.ErrorList
}

// DropInDefaulter is an optional interface of a Profile whose component
// defaults the result of a drop-in merge with a narrower function than a
// single config file, as the kubelet does: it applies its load-time defaults
// (the eviction thresholds) to the config file only, and after merging the
// --config-dir drop-ins into the defaulted file it applies only its v1beta1
// defaults. When the profile implements it and a merge has drop-ins, Merge
// calls DefaultDropInMerge on the merged object instead of Default.
type DropInDefaulter[T any] interface {
	// DefaultDropInMerge fills unset fields of a configuration merged from a
	// defaulted base and drop-ins.
	DefaultDropInMerge(obj *T)
}

// Document is one configuration document: YAML or JSON bytes and a name used
// in errors and provenance (a file path, or something like
// "configmap kube-system/kubelet-config key kubelet").
type Document struct {
	Name string
	Data []byte
}

// Layers are the inputs of one merge, lowest precedence first. Built-in
// defaults are below all of them; every field is optional.
type Layers struct {
	// Base is the shared configuration: the init file, or the remote config
	// (a ConfigMap payload), which replaces it. A complete document.
	Base *Document
	// DropIns are applied in order, each as a JSON merge patch (RFC 7386)
	// over the result so far; ReadDropIns lists a directory in the kubelet's
	// --config-dir order.
	DropIns []Document
	// Instance is the instance-specific document of the KEP
	// "Instance-Specific ComponentConfig", applied as a strategic merge patch.
	Instance *Document
	// Flags are explicitly set command-line flags; they override every layer.
	Flags []Override
}

// Options configure a Pipeline. The zero value is strict decoding, no
// policy, and no logging.
type Options struct {
	// Lenient decodes documents with unknown or duplicate fields anyway
	// (unknown fields ignored, the later duplicate wins) and reports what it
	// ignored in Result.Warnings. Type errors are errors in both modes.
	Lenient bool
	// Policy says which fields the platform owns.
	Policy Policy
	// Logger receives the files ReadDropIns skips. The zero Logger discards.
	Logger logr.Logger
}

// Result is a merged, defaulted and validated configuration.
type Result[T any] struct {
	// Object is the configuration.
	Object *T
	// Provenance maps the field path of every set field (a leaf: a scalar, a
	// list, or a map entry; "authentication.webhook.enabled",
	// "featureGates[KubeletTracing]", "clusterDNS") to the layer that set it:
	// a document name, a flag override's Source, the policy owner for
	// platform values, or "defaults".
	Provenance map[string]string
	// Warnings lists what lenient decoding ignored and which user values the
	// platform replaced, one line each, each naming its document.
	Warnings []string

	merged *node
	// baseDefaulted: the drop-ins merged into the defaulted base, so merged
	// holds the defaults too (in the defaults layer).
	baseDefaulted bool
}

// MergedJSON returns the merged configuration as JSON before defaulting:
// only the fields some layer set, in the order they were first set (with
// drop-ins, in the order of the type's fields, since the drop-ins merge into
// the encoded defaulted base).
func (r *Result[T]) MergedJSON() []byte {
	if r.merged == nil {
		return []byte("{}")
	}
	n := r.merged
	if r.baseDefaulted {
		if n = setByLayers(n); n == nil {
			return []byte("{}")
		}
	}
	return appendJSON(nil, n)
}

// setByLayers returns the part of a tree that a layer other than the
// defaults set, or nil if there is none. It copies what it keeps.
func setByLayers(n *node) *node {
	switch n.kind {
	case nObject:
		out := &node{kind: nObject, layer: n.layer}
		for _, m := range n.obj {
			if v := setByLayers(m.val); v != nil {
				out.obj = append(out.obj, member{key: m.key, val: v})
			}
		}
		if len(out.obj) == 0 && (len(n.obj) > 0 || n.layer == 0) {
			return nil
		}
		return out
	default:
		if n.layer == 0 {
			return nil
		}
		return n
	}
}

// setByDocument reports whether a layer other than the defaults set
// anything in the tree n.
func setByDocument(n *node) bool {
	return n != nil && setByLayers(n) != nil
}

// DefaultsLayer is the provenance of fields the profile's Default set.
const DefaultsLayer = "defaults"

// MergedDocument is the document name of validation errors.
const MergedDocument = "merged config"

// Pipeline merges configuration layers for one profile. It holds read-only
// data derived from T and the options, and a cache of field path strings
// behind a lock, so one Pipeline may be used from several goroutines at once.
type Pipeline[T any] struct {
	profile Profile[T]
	gvk     schema.GroupVersionKind
	// apiVersion is gvk's group/version, the apiVersion of every document.
	apiVersion string
	root       *typeInfo
	// typeMetaFields says whether T has apiVersion and kind fields; if not,
	// documents still carry them and they are checked and then dropped.
	typeMetaFields bool
	lenient        bool
	policy         compiledPolicy
	log            logr.Logger
	// paths interns the provenance keys, which are the same field paths
	// merge after merge.
	paths pathInterner
}

// pathInterner hands out one string per field path, so that a merge's
// provenance map does not allocate its keys anew. It keeps at most
// maxInternedPaths (map keys of documents are paths too).
type pathInterner struct {
	mu sync.RWMutex
	m  map[string]string
}

const maxInternedPaths = 4096

func (pi *pathInterner) intern(b []byte) string {
	pi.mu.RLock()
	s, ok := pi.m[string(b)]
	pi.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	pi.mu.Lock()
	if pi.m == nil {
		pi.m = make(map[string]string, 256)
	}
	if len(pi.m) < maxInternedPaths {
		pi.m[s] = s
	}
	pi.mu.Unlock()
	return s
}

// New prepares a pipeline for T. It fails if T is not a struct, if the
// profile has no kind, or if the policy names fields T does not have or gives
// platform values of the wrong type.
func New[T any](profile Profile[T], opts Options) (*Pipeline[T], error) {
	if profile == nil {
		return nil, fmt.Errorf("merge: profile is nil")
	}
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("merge: configuration type %s is not a struct", t)
	}
	gvk := profile.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("merge: profile for %s has an incomplete GroupVersionKind %q", t, gvk.String())
	}
	root, err := buildSchema(t)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	p := &Pipeline[T]{
		profile:    profile,
		gvk:        gvk,
		apiVersion: gvk.GroupVersion().String(),
		root:       root,
		lenient:    opts.Lenient,
		log:        opts.Logger,
	}
	av, kind := root.fields["apiVersion"], root.fields["kind"]
	p.typeMetaFields = av != nil && kind != nil && av.typ.kind == tkString && kind.typ.kind == tkString
	if p.policy, err = compilePolicy(root, opts.Policy); err != nil {
		return nil, fmt.Errorf("merge: policy: %w", err)
	}
	return p, nil
}

// GroupVersionKind returns the profile's apiVersion/kind.
func (p *Pipeline[T]) GroupVersionKind() schema.GroupVersionKind { return p.gvk }

// mergeRun is the state of one Merge call.
type mergeRun struct {
	a        arena
	names    []string // layer index -> name
	errs     Error
	warnings []string
}

func (r *mergeRun) layer(name string) int32 {
	r.names = append(r.names, name)
	return int32(len(r.names) - 1)
}

// Merge merges the layers, defaults and validates the result. It does no
// I/O. On failure it returns an *Error listing every problem: the decode
// problems of all documents, policy violations, and then (only when all
// documents were fine) the validation errors of the merged configuration.
func (p *Pipeline[T]) Merge(l Layers) (*Result[T], error) {
	r := &mergeRun{names: make([]string, 1, 4+len(l.DropIns)+len(l.Flags))}
	r.names[0] = DefaultsLayer

	var base, inst *node
	var docs []*node // decoded document layers, for the policy checks
	var docNames []string
	if l.Base != nil {
		base = p.decode(r, l.Base, modeDocument, "")
		docs, docNames = append(docs, base), append(docNames, l.Base.Name)
	}
	dropIns := make([]*node, len(l.DropIns))
	for i := range l.DropIns {
		dropIns[i] = p.decode(r, &l.DropIns[i], modeMergePatch, "")
		docs, docNames = append(docs, dropIns[i]), append(docNames, l.DropIns[i].Name)
	}
	if l.Instance != nil {
		shared := ""
		if l.Base != nil {
			shared = l.Base.Name
		}
		inst = p.decode(r, l.Instance, modeStrategic, shared)
		docs, docNames = append(docs, inst), append(docNames, l.Instance.Name)
	}

	// Policy: locked fields and ErrorIfBoth platform values must not be set
	// by any document.
	for i, d := range docs {
		if d == nil {
			continue
		}
		for _, lf := range p.policy.locked {
			if touches(d, lf.segs) {
				r.errs.Policy = append(r.errs.Policy, &PolicyError{Document: docNames[i], Path: lf.path, Owner: p.policy.owner, Locked: true})
			}
		}
		for _, pv := range p.policy.platform {
			if pv.rule == ErrorIfBoth && touches(d, pv.segs) {
				r.errs.Policy = append(r.errs.Policy, &PolicyError{Document: docNames[i], Path: pv.path, Owner: p.policy.owner})
			}
		}
	}

	// Merge the documents: base, then drop-ins (JSON merge patch), then the
	// instance (strategic merge patch). Nothing is serialized in between,
	// except the defaulted base when there are drop-ins.
	root := base
	if root == nil {
		root = r.a.new(nObject, 0)
	}
	if len(l.DropIns) > 0 && len(r.errs.Decode) == 0 {
		baseName := DefaultsLayer
		if l.Base != nil {
			baseName = l.Base.Name
		}
		root = p.defaultBase(r, root, baseName)
	}
	for _, d := range dropIns {
		if d != nil {
			root = mergePatch(&r.a, root, d)
		}
	}
	if inst != nil {
		s := strategic{a: &r.a}
		if merged := s.mergeObject(root, inst, p.root); merged != nil {
			root = merged
		}
		if len(s.problems) > 0 {
			r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: l.Instance.Name, Problems: s.problems})
		}
	}

	p.applyPlatform(r, root)
	p.applyOverrides(r, root, l.Flags)
	p.ensureTypeMeta(r, root)

	if !r.errs.empty() {
		return nil, &r.errs
	}

	obj := new(T)
	if err := assign(reflect.ValueOf(obj).Elem(), root, p.root); err != nil {
		// The layers were checked; this is a bug, not bad input.
		r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: MergedDocument, Problems: []Problem{{Type: ProblemInvalidValue, Detail: err.Error()}}})
		return nil, &r.errs
	}
	if !p.typeMetaFields {
		root.del("apiVersion")
		root.del("kind")
	}
	prov := make(map[string]string, 128)
	setTree, onlySet := root, false
	if len(l.DropIns) > 0 {
		// Only what the layers set (setByLayers, without the copy): the
		// defaults of the base are found below, as for a merge without
		// drop-ins.
		if markUnset(root) {
			setTree = r.a.new(nObject, 0)
		} else {
			onlySet = true
		}
	}
	pw := provenanceWalk{names: r.names, out: prov, paths: &p.paths, onlySet: onlySet}
	pw.tree(setTree, p.root, make([]byte, 0, 128))

	if d, ok := p.profile.(DropInDefaulter[T]); ok && len(l.DropIns) > 0 {
		d.DefaultDropInMerge(obj)
	} else {
		p.profile.Default(obj)
	}
	pw.defaults(reflect.ValueOf(obj).Elem(), p.root, setTree, make([]byte, 0, 128))

	if errs := p.profile.Validate(obj); len(errs) > 0 {
		r.errs.Validation = &ValidationError{Document: MergedDocument, Errors: errs, Provenance: prov}
		return nil, &r.errs
	}
	return &Result[T]{Object: obj, Provenance: prov, Warnings: r.warnings, merged: root, baseDefaulted: len(l.DropIns) > 0}, nil
}

// defaultBase returns the base the drop-ins merge into, as the kubelet builds
// it for --config-dir: the base document decoded, defaulted with the
// profile's Default, and encoded again with encoding/json (fields at their
// zero value are left out where the type says omitempty). Values the
// defaults supplied carry the defaults layer; values the base set, and the
// defaults left alone, keep the base's layer (for provenance, and for the
// policy's view of what a document set).
func (p *Pipeline[T]) defaultBase(r *mergeRun, base *node, baseName string) *node {
	obj := new(T)
	if err := assign(reflect.ValueOf(obj).Elem(), base, p.root); err != nil {
		// The base was checked; this is a bug, not bad input.
		r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: baseName, Problems: []Problem{{Type: ProblemInvalidValue, Detail: err.Error()}}})
		return base
	}
	p.profile.Default(obj)
	defaulted, err := encodeValue(&r.a, 0, reflect.ValueOf(obj).Elem(), p.root)
	if errors.Is(err, errEncodeFallback) {
		defaulted, err = fromGo(&r.a, 0, obj)
	}
	if err != nil {
		// encoding/json refuses a few values (NaN); so does the kubelet.
		r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: baseName, Problems: []Problem{{Type: ProblemInvalidValue,
			Detail: "the defaulted configuration cannot be encoded for the drop-ins to merge into: " + err.Error()}}})
		return base
	}
	if !p.typeMetaFields {
		defaulted.del("apiVersion")
		defaulted.del("kind")
	}
	keepBaseLayers(defaulted, base, p.root)
	return defaulted
}

// keepBaseLayers gives the nodes of the defaulted tree that hold the value
// the base document set the base's node back (its layer and decoded value).
// A value the defaults changed (a negative podPidsLimit, a rounded quantity)
// keeps the defaulted node.
func keepBaseLayers(defaulted, base *node, t *typeInfo) {
	if t != nil {
		t = t.deref()
	}
	if defaulted.kind != nObject || base.kind != nObject || t == nil || (t.kind != tkStruct && t.kind != tkMap) {
		return
	}
	for _, m := range base.obj {
		i := indexOf(defaulted, m.key)
		if i < 0 {
			continue // the encoding left it out: a zero value
		}
		var ft *typeInfo
		if t.kind == tkStruct {
			f := t.fields[m.key]
			if f == nil {
				continue
			}
			ft = f.typ
		} else {
			ft = t.elem
		}
		d := defaulted.obj[i].val
		if d.kind == nObject && m.val.kind == nObject && ft.deref().kind != tkOpaque {
			d.layer = m.val.layer // the base wrote the object, if only {}
			keepBaseLayers(d, m.val, ft)
			continue
		}
		if sameValue(d, m.val, ft) {
			defaulted.obj[i].val = m.val
		}
	}
}

// sameValue reports whether two nodes decode to the same value of type t.
func sameValue(a, b *node, t *typeInfo) bool {
	if sameJSON(a, b) {
		return true
	}
	if t.rtype == durationType && a.kind == nString && b.kind == nString {
		// Durations are the same when they encode the same (String is
		// one-to-one): compare them decoded, as decodeOpaque decodes them.
		da, errA := decodeOpaque(a, t)
		db, errB := decodeOpaque(b, t)
		if errA == nil && errB == nil {
			return *da.(*metav1.Duration) == *db.(*metav1.Duration)
		}
	}
	va, vb := reflect.New(t.rtype), reflect.New(t.rtype)
	if assign(va.Elem(), a, t) != nil || assign(vb.Elem(), b, t) != nil {
		return false
	}
	ea, errA := json.Marshal(va.Interface())
	eb, errB := json.Marshal(vb.Interface())
	return errA == nil && errB == nil && string(ea) == string(eb)
}

// sameJSON reports whether two trees encode to the same JSON (appendJSON),
// without encoding them.
func sameJSON(a, b *node) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case nNull:
		return true
	case nBool:
		return a.b == b.b
	case nNumber, nString:
		return a.str == b.str
	case nObject:
		if len(a.obj) != len(b.obj) {
			return false
		}
		for i := range a.obj {
			if a.obj[i].key != b.obj[i].key || !sameJSON(a.obj[i].val, b.obj[i].val) {
				return false
			}
		}
		return true
	default:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !sameJSON(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	}
}

// decode parses and checks one document. shared names the base document
// when decoding the instance, whose apiVersion/kind must match it.
func (p *Pipeline[T]) decode(r *mergeRun, doc *Document, mode docMode, shared string) *node {
	layer := r.layer(doc.Name)
	ps := parser{arena: &r.a, layer: layer, lenient: p.lenient}
	root := ps.parse(doc.Data)
	problems := ps.problems
	warnings := ps.warnings
	if root != nil {
		tm := p.checkTypeMeta(root, shared)
		c := checker{mode: mode, lenient: p.lenient, path: make([]pathSeg, 0, 8)}
		if !p.typeMetaFields {
			// Check apiVersion/kind above, not as fields of T.
			av, kind := root.get("apiVersion"), root.get("kind")
			root.del("apiVersion")
			root.del("kind")
			defer func() {
				if av != nil {
					root.set("apiVersion", av)
				}
				if kind != nil {
					root.set("kind", kind)
				}
			}()
		}
		c.checkObject(root, p.root, nil)
		problems = append(tm, append(problems, c.problems...)...)
		warnings = append(warnings, c.warnings...)
	}
	for _, w := range warnings {
		r.warnings = append(r.warnings, doc.Name+": "+w.String())
	}
	if len(problems) > 0 {
		r.errs.Decode = append(r.errs.Decode, &DecodeError{Document: doc.Name, Problems: problems})
		return nil
	}
	return root
}

func (p *Pipeline[T]) checkTypeMeta(root *node, shared string) []Problem {
	var problems []Problem
	want := [...]struct{ key, value string }{
		{"apiVersion", p.apiVersion},
		{"kind", p.gvk.Kind},
	}
	for _, w := range want {
		v := root.get(w.key)
		if v != nil && v.kind == nString && v.str == w.value {
			continue
		}
		expected := strconv.Quote(w.value)
		if shared != "" {
			expected += " (the same as the shared document " + shared + ")"
		}
		switch {
		case v == nil || v.kind == nNull:
			problems = append(problems, Problem{Type: ProblemTypeMeta, Path: w.key, Detail: "missing, expected " + expected})
		case v.kind != nString:
			problems = append(problems, Problem{Type: ProblemTypeMeta, Path: w.key, Detail: "expected " + expected + ", got " + describeValue(v)})
		case v.str != w.value:
			problems = append(problems, Problem{Type: ProblemTypeMeta, Path: w.key, Detail: "expected " + expected + ", got " + strconv.Quote(v.str)})
		}
	}
	return problems
}

// ensureTypeMeta sets apiVersion and kind when no document did.
func (p *Pipeline[T]) ensureTypeMeta(r *mergeRun, root *node) {
	if !p.typeMetaFields {
		return
	}
	for _, kv := range [...][2]string{{"apiVersion", p.apiVersion}, {"kind", p.gvk.Kind}} {
		if root.get(kv[0]) == nil {
			n := r.a.new(nString, 0)
			n.str = kv[1]
			root.set(kv[0], n)
		}
	}
}

// markUnset marks the nodes that setByLayers would leave out (nothing in
// them was set by a layer other than the defaults) and reports whether n is
// one.
func markUnset(n *node) bool {
	if n.kind != nObject {
		n.unset = n.layer == 0
		return n.unset
	}
	kept := 0
	for _, m := range n.obj {
		if !markUnset(m.val) {
			kept++
		}
	}
	n.unset = kept == 0 && (len(n.obj) > 0 || n.layer == 0)
	return n.unset
}

// provenanceWalk fills a merge's provenance map.
type provenanceWalk struct {
	names []string // layer index -> name
	out   map[string]string
	paths *pathInterner
	// onlySet: members marked unset (markUnset) are not there, so that the
	// walks see the tree setByLayers would return.
	onlySet bool
}

// child returns n's member key as the walk sees it.
func (pw *provenanceWalk) child(n *node, key string) *node {
	c := n.get(key)
	if pw.onlySet && c != nil && c.unset {
		return nil
	}
	return c
}

// tree records the layer of every leaf of the merged tree.
func (pw *provenanceWalk) tree(n *node, t *typeInfo, path []byte) {
	if t != nil {
		t = t.deref()
	}
	if n.kind == nObject && len(n.obj) > 0 && (t == nil || t.kind == tkStruct || t.kind == tkMap) {
		for _, m := range n.obj {
			if pw.onlySet && m.val.unset {
				continue
			}
			var ft *typeInfo
			p := path
			if t != nil && t.kind == tkStruct {
				f := t.fields[m.key]
				if f == nil {
					continue
				}
				ft = f.typ
				if len(p) > 0 {
					p = append(p, '.')
				}
				p = append(p, m.key...)
			} else {
				if t != nil {
					ft = t.elem
				}
				p = append(p, '[')
				p = append(p, m.key...)
				p = append(p, ']')
			}
			pw.tree(m.val, ft, p)
		}
		return
	}
	if n.kind == nNull || len(path) == 0 {
		return
	}
	pw.out[pw.paths.intern(path)] = pw.names[n.layer]
}

// defaults records, as set by the defaults, every non-zero leaf of the
// defaulted object that no layer set (n is the merged tree at v's position,
// nil where no layer set anything).
func (pw *provenanceWalk) defaults(v reflect.Value, t *typeInfo, n *node, path []byte) {
	switch t.kind {
	case tkPtr:
		if v.IsNil() {
			return
		}
		if et := t.deref(); et.kind != tkStruct && et.kind != tkMap {
			// A pointer to a leaf is set when it is not nil, even to false.
			if n == nil && len(path) > 0 {
				pw.out[pw.paths.intern(path)] = DefaultsLayer
			}
			return
		}
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		pw.defaults(v, t.deref(), n, path)
		return
	case tkStruct:
		if n != nil && n.kind != nObject {
			return
		}
		for _, f := range t.fieldList {
			fv, ok := fieldIfSet(v, f.index)
			if !ok {
				continue
			}
			var child *node
			if n != nil {
				child = pw.child(n, f.name)
			}
			p := path
			if len(p) > 0 {
				p = append(p, '.')
			}
			p = append(p, f.name...)
			pw.defaults(fv, f.typ, child, p)
		}
		return
	case tkMap:
		if n != nil && n.kind != nObject {
			return
		}
		if v.IsNil() {
			return
		}
		if v.Len() == 0 {
			if n == nil {
				pw.out[pw.paths.intern(path)] = DefaultsLayer
			}
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			key := mapKeyString(iter.Key())
			var child *node
			if n != nil {
				child = pw.child(n, key)
			}
			p := append(append(append(path, '['), key...), ']')
			pw.defaults(iter.Value(), t.elem, child, p)
		}
		return
	}
	if n == nil && !isZero(v, t) && len(path) > 0 {
		pw.out[pw.paths.intern(path)] = DefaultsLayer
	}
}

// isZero reports whether v holds its type's zero value, for types with
// custom JSON encoding by what they encode to (a Quantity decoded from "0"
// is not the zero struct, but is zero).
func isZero(v reflect.Value, t *typeInfo) bool {
	if v.IsZero() {
		return true
	}
	if t.kind != tkOpaque {
		return false
	}
	if t.rtype == durationType {
		return v.Field(0).Int() == 0 // "0s" is the zero Duration's encoding
	}
	got, err := json.Marshal(v.Interface())
	if err != nil {
		return false
	}
	zero, err := json.Marshal(reflect.Zero(v.Type()).Interface())
	return err == nil && string(got) == string(zero)
}

// fieldIfSet walks an index path, reporting false at a nil embedded pointer.
func fieldIfSet(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func mapKeyString(k reflect.Value) string {
	switch k.Kind() {
	case reflect.String:
		return k.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10)
	}
	if m, ok := k.Interface().(interface{ MarshalText() ([]byte, error) }); ok {
		if b, err := m.MarshalText(); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(k.Interface())
}

// DecodeDocument is a profile's codec: it strictly decodes one document
// (YAML or JSON), defaults and validates it. Errors name the document and
// every field at fault (*Error). For many documents, build a Pipeline once.
func DecodeDocument[T any](profile Profile[T], name string, data []byte) (*T, error) {
	p, err := New(profile, Options{})
	if err != nil {
		return nil, err
	}
	res, err := p.Merge(Layers{Base: &Document{Name: name, Data: data}})
	if err != nil {
		return nil, err
	}
	return res.Object, nil
}
