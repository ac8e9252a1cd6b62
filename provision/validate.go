package provision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
)

// Result is a user-supplied KubeletConfiguration that passed validation.
type Result struct {
	// Config is the configuration as the user wrote it with the platform's
	// values applied by their rules. It is not defaulted: a field is set
	// only when the user or the platform set it, which is what renderers
	// (a kubeadm patch, Bottlerocket settings) need.
	Config *kubeletv1beta1.KubeletConfiguration
	// Document is Config as JSON holding exactly the fields that were set,
	// including those set to their zero value (rotateCertificates: false),
	// which Config cannot tell from unset ones.
	Document []byte
	// User holds only the user's own settings that stand in Config: the
	// fields whose value came from the platform are left out. It is for
	// renderers that deliver the platform's values some other way. An
	// explicitly empty map or list the user wrote is a non-nil empty value
	// here; one that only held platform values is left out (nil).
	User *kubeletv1beta1.KubeletConfiguration
	// UserDocument is User as JSON holding exactly the user's fields that
	// stand in Config, zero values and explicitly empty maps and lists
	// included, as Document does for Config. It has apiVersion and kind.
	UserDocument []byte
	// Warnings name the user values the platform replaced (PlatformWins),
	// one line each, starting with the document name.
	Warnings []string
}

// Validator checks user-supplied KubeletConfiguration documents against the
// kubelet profile and a platform Policy. It holds only read-only data, so
// one Validator may be used from several goroutines at once.
type Validator struct {
	pipe   *merge.Pipeline[kubeletv1beta1.KubeletConfiguration]
	policy compiled
	// userPipe merges under the policy with the user's values standing
	// (compiled.userValues); nil when the policy replaces no user value.
	userPipe *merge.Pipeline[kubeletv1beta1.KubeletConfiguration]
}

// NewValidator prepares a Validator for p. It fails when a field of p is
// not a KubeletConfiguration field, when a value does not fit its field,
// when a field's rule, value and Blocked flag do not go together, or when
// the platform's values alone (over the kubelet's defaults) do not pass the
// kubelet profile's validation.
func NewValidator(p Policy) (*Validator, error) {
	c, err := p.compile()
	if err != nil {
		return nil, err
	}
	pipe, err := merge.New[kubeletv1beta1.KubeletConfiguration](kubelet.Profile{}, merge.Options{Policy: c.merge})
	if err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	// The platform's own values must make a valid configuration: a bad
	// value found here would otherwise fail every user's document.
	if _, err := pipe.Merge(merge.Layers{Flags: c.overrides}); err != nil {
		return nil, fmt.Errorf("provision: policy: the platform's values alone do not pass validation: %w", err)
	}
	v := &Validator{pipe: pipe, policy: c}
	if len(c.replaced) > 0 {
		if v.userPipe, err = merge.New[kubeletv1beta1.KubeletConfiguration](kubelet.Profile{}, merge.Options{Policy: c.userValues()}); err != nil {
			return nil, fmt.Errorf("provision: %w", err)
		}
	}
	return v, nil
}

// Validate checks a user's KubeletConfiguration document (YAML or JSON),
// named name in every error (a file name, or the document's place in a
// cluster spec such as "spec.controlPlaneConfiguration.kubeletConfiguration").
//
// apiVersion and kind are required. Decoding is strict: every unknown or
// duplicate key, every value of the wrong type and every null that stands
// for a map value or a list element (see the package doc) is reported with
// its field path, all at once. Then the policy is enforced (blocked fields,
// fields under ErrorIfBoth), the platform's values are applied by their
// rules, and the result is defaulted and validated with the kubelet profile
// (components/kubelet); the defaulted copy is only used for validation.
//
// A user's invalid value is an error under every policy, also where the
// platform's value replaces it (PlatformWins): when the document sets such
// a field, it is first validated with its own values standing (the
// platform's values still fill in what the user did not set), and an error
// about a value the platform would replace says it is the user's value
// ("; the user's value must be valid even though the platform's replaces
// it (owner: ...)"). Only a document that passes that gets the platform's
// values and a warning for each value replaced.
//
// When the document has problems the error is a *merge.Error (errors.As
// finds its parts) whose message has one line per problem, each starting with name; a validation
// error about a value the user did not set ends with "(set by <owner>)" or
// "(set by defaults)". An unknown key that is a kubelet flag rather than a
// configuration field (nodeLabels, cloudProvider, nodeIP) says so. Policy
// violations are reported once the document decodes: a document with
// decode problems reports those only. data is not modified.
func (v *Validator) Validate(data []byte, name string) (*Result, error) {
	if name == "" {
		return nil, fmt.Errorf("provision: document has no name")
	}
	if name == v.policy.merge.Owner || name == merge.DefaultsLayer {
		return nil, fmt.Errorf("provision: document name %q is reserved for the platform's or the default values", name)
	}
	// merge reads null as "not set" everywhere in a complete document, so
	// evictionHard: {memory.available: null} would reach it as
	// evictionHard: {}, "no hard eviction". Nulls that stand for a map value
	// or a list element are refused here, from the user's own tree.
	tree := parseTree(data)
	nulls := findNulls(tree)
	layers := merge.Layers{
		Base:  &merge.Document{Name: name, Data: data},
		Flags: v.policy.overrides,
	}
	// The user's values the platform replaces are validated first, with the
	// user's values standing: the platform's would hide them.
	var err error
	replaced := v.replacedByPlatform(tree)
	if len(replaced) > 0 {
		if _, err = v.userPipe.Merge(layers); err == nil {
			replaced = nil
		}
	}
	var res *merge.Result[kubeletv1beta1.KubeletConfiguration]
	if err == nil {
		res, err = v.pipe.Merge(layers)
	}
	var me *merge.Error
	if err != nil && errors.As(err, &me) {
		addFlagHints(me)
		nameValidation(me, name)
		noteUserValues(me, replaced, v.policy.merge.Owner)
	}
	if len(nulls) > 0 {
		return nil, nullsError(err, name, nulls)
	}
	if err != nil {
		return nil, err
	}
	doc := res.MergedJSON()
	cfg := new(kubeletv1beta1.KubeletConfiguration)
	if err := json.Unmarshal(doc, cfg); err != nil {
		return nil, fmt.Errorf("provision: %s: decoding the merged document: %w", name, err)
	}
	userDoc, user, err := v.userView(doc, res.Provenance, tree)
	if err != nil {
		return nil, fmt.Errorf("provision: %s: %w", name, err)
	}
	return &Result{Config: cfg, Document: doc, User: user, UserDocument: userDoc, Warnings: res.Warnings}, nil
}

// ValidateMap is Validate for a configuration held as an unstructured map,
// as a cluster spec decoded with sigs.k8s.io/yaml or encoding/json holds it.
// The map is marshalled to JSON and never modified. Values encoding/json
// cannot marshal (a NaN, a map with non-string keys as gopkg.in/yaml.v2
// produces, a func) are reported as a *merge.Error, each with its path,
// all at once.
func (v *Validator) ValidateMap(obj map[string]any, name string) (*Result, error) {
	if obj == nil {
		return v.Validate(nil, name)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		var problems []merge.Problem
		findUnmarshallable(reflect.ValueOf(obj), "", &problems)
		if len(problems) == 0 {
			return nil, fmt.Errorf("provision: %s: %w", name, err)
		}
		return nil, &merge.Error{Decode: []*merge.DecodeError{{Document: name, Problems: problems}}}
	}
	return v.Validate(data, name)
}

// ValidateKubeletConfiguration validates a user's KubeletConfiguration
// document with no platform policy; see Validator.Validate. It returns
// the configuration as the user wrote it, not defaulted.
func ValidateKubeletConfiguration(data []byte, name string) (*kubeletv1beta1.KubeletConfiguration, error) {
	v, err := NewValidator(Policy{})
	if err != nil {
		return nil, err
	}
	res, err := v.Validate(data, name)
	if err != nil {
		return nil, err
	}
	return res.Config, nil
}

// ValidateKubeletConfigurationMap validates a user's KubeletConfiguration
// held as an unstructured map, with no platform policy; see
// Validator.ValidateMap. The map is never modified.
func ValidateKubeletConfigurationMap(obj map[string]any, name string) (*kubeletv1beta1.KubeletConfiguration, error) {
	v, err := NewValidator(Policy{})
	if err != nil {
		return nil, err
	}
	res, err := v.ValidateMap(obj, name)
	if err != nil {
		return nil, err
	}
	return res.Config, nil
}

// userView returns doc without the fields whose value came from the
// platform, as provenance tells, as JSON and decoded. An object or list
// left empty by that is removed too, unless the user's own document (mine,
// nil if unknown) has it explicitly empty: a platform value under a map
// (featureGates[X]) must not leave behind an empty map the user never
// wrote, which renderers would read as "set to nothing".
func (v *Validator) userView(doc []byte, provenance map[string]string, mine map[string]any) ([]byte, *kubeletv1beta1.KubeletConfiguration, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // integers above 2^53 stay exact
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil, nil, fmt.Errorf("decoding the merged document: %w", err)
	}
	owner := v.policy.merge.Owner
	for _, f := range v.policy.fromPlatform {
		if !fromLayer(provenance, f.Path, owner) {
			continue
		}
		segs := splitPath(f.Path)
		deletePath(tree, segs)
		for i := len(segs) - 1; i > 0; i-- {
			if !emptyAt(tree, segs[:i]) || explicitlyEmpty(mine, segs[:i]) {
				break
			}
			deletePath(tree, segs[:i])
		}
	}
	data, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the user's fields: %w", err)
	}
	user := new(kubeletv1beta1.KubeletConfiguration)
	if err := json.Unmarshal(data, user); err != nil {
		return nil, nil, fmt.Errorf("decoding the user's fields: %w", err)
	}
	return data, user, nil
}

// emptyAt says whether tree has an empty object at segs.
func emptyAt(tree map[string]any, segs []string) bool {
	for _, s := range segs {
		next, ok := tree[s].(map[string]any)
		if !ok {
			return false
		}
		tree = next
	}
	return len(tree) == 0
}

// fromLayer says whether some leaf at or below path was set by layer.
func fromLayer(provenance map[string]string, path, layer string) bool {
	for p, l := range provenance {
		if l != layer {
			continue
		}
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}

// splitPath splits a field path in merge's notation ("a.b", "m[key]",
// "m[key].c") into its field names and map keys.
func splitPath(path string) []string {
	var segs []string
	for len(path) > 0 {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(segs, path[1:])
			}
			segs = append(segs, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				return append(segs, path)
			}
			segs = append(segs, path[:end])
			path = path[end:]
		}
	}
	return segs
}

// deletePath removes the value at segs from tree, if it is there.
func deletePath(tree map[string]any, segs []string) {
	for i, s := range segs {
		if i == len(segs)-1 {
			delete(tree, s)
			return
		}
		next, ok := tree[s].(map[string]any)
		if !ok {
			return
		}
		tree = next
	}
}

// nameValidation makes validation errors start with the user's document
// name instead of merge's "merged config", and keeps the "(set by ...)"
// note only for values the user did not set: the platform's or the
// defaults.
func nameValidation(me *merge.Error, name string) {
	ve := me.Validation
	if ve == nil {
		return
	}
	prov := make(map[string]string, len(ve.Provenance))
	for path, layer := range ve.Provenance {
		if layer != name {
			prov[path] = layer
		}
	}
	ve.Document = name
	ve.Provenance = prov
}

// replacedByPlatform returns the PlatformWins paths that the user's
// document (tree, nil if it does not parse) sets to something other than
// null.
func (v *Validator) replacedByPlatform(tree map[string]any) []string {
	if v.userPipe == nil || tree == nil {
		return nil
	}
	var out []string
	for _, path := range v.policy.replaced {
		var cur any = tree
		for _, seg := range splitPath(path) {
			obj, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = obj[seg]
		}
		if cur != nil {
			out = append(out, path)
		}
	}
	return out
}

// noteUserValues adds to each validation error at or below one of the
// paths replaced (user values the platform replaces) that the value is the
// user's and must be valid all the same: without it, an error about a value
// the result does not hold would puzzle.
func noteUserValues(me *merge.Error, replaced []string, owner string) {
	if me.Validation == nil || len(replaced) == 0 {
		return
	}
	note := fmt.Sprintf("the user's value must be valid even though the platform's replaces it (owner: %q)", owner)
	errs := make(field.ErrorList, len(me.Validation.Errors))
	for i, fe := range me.Validation.Errors {
		for _, path := range replaced {
			if fe.Field == path || strings.HasPrefix(fe.Field, path+".") || strings.HasPrefix(fe.Field, path+"[") {
				c := *fe
				if c.Detail == "" {
					c.Detail = note
				} else {
					c.Detail += "; " + note
				}
				fe = &c
				break
			}
		}
		errs[i] = fe
	}
	me.Validation.Errors = errs
}

// flagOnly returns the kubelet flag for a key users put in a
// KubeletConfiguration although it exists only as a flag.
func flagOnly(key string) (string, bool) {
	switch key {
	case "nodeLabels":
		return "--node-labels", true
	case "cloudProvider":
		return "--cloud-provider", true
	case "nodeIP":
		return "--node-ip", true
	case "hostnameOverride":
		return "--hostname-override", true
	}
	return "", false
}

// addFlagHints explains unknown top-level keys that are kubelet flags.
func addFlagHints(me *merge.Error) {
	for _, d := range me.Decode {
		for i, p := range d.Problems {
			if p.Type != merge.ProblemUnknownField || p.Path != "" || p.Detail != "" {
				continue
			}
			if flag, ok := flagOnly(p.Field); ok {
				d.Problems[i].Detail = "a kubelet flag (" + flag + "), not a KubeletConfiguration field"
			}
		}
	}
}

// findUnmarshallable records every value below v that encoding/json cannot
// marshal, with its path in field.Path notation.
func findUnmarshallable(v reflect.Value, path string, out *[]merge.Problem) {
	bad := func(detail string) {
		*out = append(*out, merge.Problem{Type: merge.ProblemWrongType, Path: path, Detail: detail})
	}
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Type().Implements(reflect.TypeFor[json.Marshaler]()) {
		if _, err := json.Marshal(v.Interface()); err != nil {
			bad(err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			bad("value " + strconv.FormatFloat(f, 'g', -1, 64) + " has no JSON form")
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			bad("a map with " + v.Type().Key().String() + " keys has no JSON form; keys must be strings")
			return
		}
		iter := v.MapRange()
		var keys []string
		vals := map[string]reflect.Value{}
		for iter.Next() {
			k := iter.Key().String()
			keys = append(keys, k)
			vals[k] = iter.Value()
		}
		sort.Strings(keys)
		for _, k := range keys {
			findUnmarshallable(vals[k], joinKey(path, k), out)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte marshals as base64
		}
		for i := 0; i < v.Len(); i++ {
			findUnmarshallable(v.Index(i), path+"["+strconv.Itoa(i)+"]", out)
		}
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		bad("a value of type " + v.Type().String() + " has no JSON form")
	}
}

// joinKey appends a key to a path with a dot; an untyped map cannot tell
// struct fields from map keys, and most keys here are fields.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
