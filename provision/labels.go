package provision

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/dynconfig/dynconfig/merge"
)

// NodeLabelsFlag is the name of the kubelet flag that carries node labels.
const NodeLabelsFlag = "node-labels"

// NodeLabels is the value of the kubelet's --node-labels flag: the labels
// the kubelet puts on its Node when it registers. KubeletConfiguration has
// no field for them, so they travel as a flag (kubeadm's
// nodeRegistration.kubeletExtraArgs, Bottlerocket's
// settings.kubernetes.node-labels), next to the configuration file.
type NodeLabels map[string]string

// ParseNodeLabels reads a --node-labels value the way the kubelet does:
// comma-separated key=value pairs, spaces around keys and values trimmed,
// empty items skipped, a pair without "=" giving an empty value, and a
// repeated key keeping its last value. It never fails; Validate checks the
// result.
func ParseNodeLabels(s string) NodeLabels {
	out := NodeLabels{}
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue
		}
		k, v, _ := strings.Cut(item, "=")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// String returns the flag value: key=value pairs sorted by key and joined
// by commas. Valid labels contain neither "," nor "=" in keys, nor "," in
// values, so ParseNodeLabels reads the result back unchanged.
func (l NodeLabels) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
	}
	return b.String()
}

// Validate returns every problem the kubelet would refuse to start with,
// each under path (for example field.NewPath("labels")) keyed by the label:
// a key that is not a qualified name, a value that is not a label value,
// and a key in the kubernetes.io or k8s.io namespaces that a kubelet may
// not set on its own Node (node-role.kubernetes.io/worker is the usual
// one). Keys are checked in sorted order.
func (l NodeLabels) Validate(path *field.Path) field.ErrorList {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		p := path.Key(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p, k, "label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(l[k]) {
			errs = append(errs, field.Invalid(p, l[k], "label value: "+msg))
		}
		if isKubernetesNamespace(k) && !kubeletapis.IsKubeletLabel(k) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"the kubelet refuses labels in the kubernetes.io and k8s.io namespaces except under %s and these keys: %s",
				strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))))
		}
	}
	return errs
}

// isKubernetesNamespace says whether the key's prefix is kubernetes.io or
// k8s.io or a subdomain of either, the namespaces the kubelet restricts.
func isKubernetesNamespace(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return true
		}
	}
	return false
}

// NodeLabelPolicy gives the platform's node labels the same precedence
// rules that merge.Policy gives the platform's configuration fields, key by
// key: a label key set by both the platform and the user is resolved by
// Rule, and keys set by only one side are kept.
type NodeLabelPolicy struct {
	// Owner names the platform in errors and warnings. Empty means "platform".
	Owner string
	// Labels are the platform's labels, for example the labels field of an
	// EKS Anywhere node group.
	Labels NodeLabels
	// Rule resolves a key both sides set: merge.PlatformWins,
	// merge.UserWins or merge.ErrorIfBoth. It may be left zero when Labels
	// is empty.
	Rule merge.Rule
}

// Merge combines the platform's labels with user's, set by source (named in
// errors and warnings, e.g. "kubeletExtraArgs node-labels"). With
// PlatformWins a user value that differs from the platform's is replaced
// and named in a warning; with UserWins the user's value stays; with
// ErrorIfBoth every key both sides set is an error (a *merge.PolicyError
// whose Path is "node-labels[<key>]"), all of them at once, in key order,
// joined with errors.Join. Neither input is modified; the result is a new
// map. Merge does not validate the labels: call Validate on each input,
// under the path the user knows it by, before merging.
func (p NodeLabelPolicy) Merge(user NodeLabels, source string) (NodeLabels, []string, error) {
	owner := p.Owner
	if owner == "" {
		owner = "platform"
	}
	if len(p.Labels) > 0 {
		switch p.Rule {
		case merge.PlatformWins, merge.UserWins, merge.ErrorIfBoth:
		default:
			return nil, nil, fmt.Errorf("node label policy: unknown rule %v", p.Rule)
		}
	}
	out := make(NodeLabels, len(p.Labels)+len(user))
	for k, v := range user {
		out[k] = v
	}
	keys := make([]string, 0, len(p.Labels))
	for k := range p.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var warnings []string
	var conflicts []error
	for _, k := range keys {
		pv := p.Labels[k]
		uv, both := user[k]
		if !both {
			out[k] = pv
			continue
		}
		path := NodeLabelsFlag + "[" + k + "]"
		switch p.Rule {
		case merge.PlatformWins:
			if uv != pv {
				warnings = append(warnings, fmt.Sprintf("%s: %s: value replaced by the platform's (owner: %q)", source, path, owner))
			}
			out[k] = pv
		case merge.UserWins:
		case merge.ErrorIfBoth:
			conflicts = append(conflicts, &merge.PolicyError{Document: source, Path: path, Owner: owner})
		}
	}
	if len(conflicts) > 0 {
		return nil, nil, errors.Join(conflicts...)
	}
	return out, warnings, nil
}
