package kubeadm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
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
// keep them. cfg's apiVersion and kind are ignored and written as
// kubelet.config.k8s.io/v1beta1 KubeletConfiguration. cfg is not modified.
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
	return finish(name, set)
}

// RenderDocument returns the patch that sets, over kubeadm's generated
// KubeletConfiguration, exactly the fields doc sets, zero values included.
// doc is a KubeletConfiguration document in YAML or JSON holding only the
// fields to set, such as provision.Result.Document. It is decoded strictly
// (unknown and duplicate fields are errors) but not validated. null values
// are dropped: in a patch they would delete kubeadm's value, while in a
// configuration document they mean "not set". apiVersion and kind, when
// present, must be kubelet.config.k8s.io/v1beta1 KubeletConfiguration.
func RenderDocument(doc []byte, opts Options) (*Patch, error) {
	name, err := FileName(opts)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("kubeadm: document: %w", err)
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("kubeadm: document: not a YAML or JSON object")
	}
	var typed kubeletv1beta1.KubeletConfiguration
	strict, err := sigsjson.UnmarshalStrict(j, &typed)
	if err != nil {
		return nil, fmt.Errorf("kubeadm: document: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("kubeadm: document: %w", errors.Join(strict...))
	}
	gv := kubeletv1beta1.SchemeGroupVersion.String()
	if typed.APIVersion != "" && typed.APIVersion != gv {
		return nil, fmt.Errorf("kubeadm: document: apiVersion %q, want %q", typed.APIVersion, gv)
	}
	if typed.Kind != "" && typed.Kind != "KubeletConfiguration" {
		return nil, fmt.Errorf("kubeadm: document: kind %q, want %q", typed.Kind, "KubeletConfiguration")
	}
	var tree map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &tree); err != nil {
		return nil, fmt.Errorf("kubeadm: document: %w", err)
	}
	dropNulls(tree)
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

// dropNulls removes null values at every depth, and objects that held only
// nulls.
func dropNulls(tree map[string]any) {
	for k, v := range tree {
		switch v := v.(type) {
		case nil:
			delete(tree, k)
		case map[string]any:
			if len(v) == 0 {
				continue // an explicitly empty map stays
			}
			dropNulls(v)
			if len(v) == 0 {
				delete(tree, k)
			}
		}
	}
}
