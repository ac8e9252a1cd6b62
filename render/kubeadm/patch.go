package kubeadm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/internal/kubeletdoc"
)

// Target is kubeadm's patch target for the kubelet's configuration file.
const Target = "kubeletconfiguration"

// DefaultDirectory is the patches directory of the EKS Anywhere design and
// of the Cluster API documentation.
const DefaultDirectory = "/etc/kubernetes/patches"

// PatchType is the patch format kubeadm reads from the file name.
type PatchType string

// The patch types written here. kubeadm also knows "json" (RFC 6902
// operations), which a set of fields has no natural form in.
const (
	// Strategic is a strategic merge patch, kubeadm's default. For
	// KubeletConfiguration, whose lists carry no merge strategy, it
	// merges objects and maps by key and replaces lists.
	Strategic PatchType = "strategic"
	// Merge is a JSON merge patch (RFC 7386). Over a KubeletConfiguration
	// it gives the same result as Strategic.
	Merge PatchType = "merge"
)

// Options choose the patch file's name.
type Options struct {
	// Suffix goes between the target and the patch type; kubeadm applies
	// the files of a target in the lexical order of their names, so the
	// suffix orders several patches. It may not contain ".", "+", "/" or
	// control characters. Empty: no suffix.
	Suffix string
	// PatchType is written into the name after "+". Empty: no "+patchtype"
	// in the name, which kubeadm reads as Strategic.
	PatchType PatchType
}

// Patch is one file for kubeadm's patches directory.
type Patch struct {
	// Name is the file name, target[suffix][+patchtype].yaml.
	Name string
	// Content is the YAML patch: apiVersion, kind and the fields to set.
	Content []byte
}

// FileName returns the patch file name for opts,
// "kubeletconfiguration[suffix][+patchtype].yaml", following the rules of
// kubeadm's patches package (cmd/kubeadm/app/util/patches).
func FileName(opts Options) (string, error) {
	for _, r := range opts.Suffix {
		if r == '.' || r == '+' || r == '/' || r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("kubeadm: patch suffix %q: may not contain %q", opts.Suffix, r)
		}
	}
	name := Target + opts.Suffix
	switch opts.PatchType {
	case "":
	case Strategic, Merge:
		name += "+" + string(opts.PatchType)
	default:
		return "", fmt.Errorf("kubeadm: patch type %q: want %q or %q", opts.PatchType, Strategic, Merge)
	}
	return name + ".yaml", nil
}

// Render returns the patch that sets, over kubeadm's generated
// KubeletConfiguration, the fields set in cfg. A field counts as set when it
// differs from its zero value, so a field set to its zero value (false, 0,
// "") is not in the patch and kubeadm's value stays: rotateCertificates:
// false and staticPodPath: "" cannot be expressed this way. Use
// RenderDocument with the user's document (provision.Result.Document) to
// keep them. A map or list counts as set when it is not nil: an empty one
// is written as {} or [] (evictionHard: {} is "no hard eviction"; left out,
// the kubelet would use its default thresholds). cfg's apiVersion and kind
// are ignored and written as kubelet.config.k8s.io/v1beta1
// KubeletConfiguration. cfg is not modified.
func Render(cfg *kubeletv1beta1.KubeletConfiguration, opts Options) (*Patch, error) {
	if cfg == nil {
		return nil, errors.New("kubeadm: no configuration")
	}
	name, err := FileName(opts)
	if err != nil {
		return nil, err
	}
	set, err := toTree(cfg)
	if err != nil {
		return nil, err
	}
	zero, err := toTree(&kubeletv1beta1.KubeletConfiguration{})
	if err != nil {
		return nil, err
	}
	pruneZero(set, zero)
	addExplicitEmpties(set, reflect.ValueOf(cfg).Elem())
	return finish(name, set)
}

// RenderDocument returns the patch that sets, over kubeadm's generated
// KubeletConfiguration, exactly the fields doc sets, zero values included.
// doc is a KubeletConfiguration document in YAML or JSON holding only the
// fields to set, such as provision.Result.Document. It is decoded strictly
// (unknown and duplicate fields are errors) but not validated. A null field
// is dropped: in a patch it would delete kubeadm's value, while in a
// configuration document it means "not set". A null map value or list
// element is an error naming its path, one per null, since dropping it
// would change what the map or list says (see package provision). Empty
// maps and lists are kept. apiVersion and kind, when present, must be
// kubelet.config.k8s.io/v1beta1 KubeletConfiguration.
func RenderDocument(doc []byte, opts Options) (*Patch, error) {
	name, err := FileName(opts)
	if err != nil {
		return nil, err
	}
	_, j, err := kubeletdoc.DecodeStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("kubeadm: document: %w", err)
	}
	var tree map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &tree); err != nil {
		return nil, fmt.Errorf("kubeadm: document: %w", err)
	}
	var nulls []error
	for _, n := range kubeletdoc.DropNulls(tree, kubeletdoc.Type, nil) {
		nulls = append(nulls, fmt.Errorf("kubeadm: document: %s: %s", n.Path, n.Detail))
	}
	if len(nulls) > 0 {
		return nil, errors.Join(nulls...)
	}
	return finish(name, tree)
}

// finish writes the YAML: apiVersion and kind first, as people write them,
// then the fields with sorted keys.
func finish(name string, tree map[string]any) (*Patch, error) {
	delete(tree, "apiVersion")
	delete(tree, "kind")
	out := []byte("apiVersion: " + kubeletv1beta1.SchemeGroupVersion.String() + "\nkind: KubeletConfiguration\n")
	if len(tree) > 0 {
		fields, err := yaml.Marshal(tree)
		if err != nil {
			return nil, fmt.Errorf("kubeadm: writing the patch: %w", err)
		}
		out = append(out, fields...)
	}
	return &Patch{Name: name, Content: out}, nil
}

// toTree marshals v and reads it back as an untyped tree, integers intact.
func toTree(v any) (map[string]any, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kubeadm: encoding the configuration: %w", err)
	}
	var tree map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &tree); err != nil {
		return nil, fmt.Errorf("kubeadm: encoding the configuration: %w", err)
	}
	return tree, nil
}

// pruneZero removes from set every value equal to the one a zero
// configuration marshals to at the same place (the "0s" of durations, the
// empty structs that have no omitempty), and objects left empty by that.
func pruneZero(set, zero map[string]any) {
	for k, v := range set {
		z, ok := zero[k]
		if !ok {
			continue
		}
		vm, vIsObj := v.(map[string]any)
		zm, zIsObj := z.(map[string]any)
		switch {
		case vIsObj && zIsObj:
			pruneZero(vm, zm)
			if len(vm) == 0 {
				delete(set, k)
			}
		case reflect.DeepEqual(v, z):
			delete(set, k)
		}
	}
}

// addExplicitEmpties adds to tree, the JSON form of v (a struct), the maps
// and lists of v that are empty but not nil, which encoding/json leaves out
// under omitempty, at any depth of nested structs. Elements of maps and
// lists are written whole by encoding/json and not looked into.
func addExplicitEmpties(tree map[string]any, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() || fv.Elem().Kind() != reflect.Struct {
				continue
			}
			fv = fv.Elem()
		}
		if f.Anonymous && name == "" && fv.Kind() == reflect.Struct {
			addExplicitEmpties(tree, fv) // inlined, as TypeMeta
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		switch fv.Kind() {
		case reflect.Map:
			if !fv.IsNil() && fv.Len() == 0 {
				tree[name] = map[string]any{}
			}
		case reflect.Slice:
			if !fv.IsNil() && fv.Len() == 0 {
				tree[name] = []any{}
			}
		case reflect.Struct:
			if kubeletdoc.CustomJSON(fv.Type()) {
				continue
			}
			sub, ok := tree[name].(map[string]any)
			if !ok {
				sub = map[string]any{}
			}
			addExplicitEmpties(sub, fv)
			if len(sub) > 0 {
				tree[name] = sub
			}
		}
	}
}
