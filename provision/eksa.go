package provision

import (
	"fmt"
	"sort"

	"github.com/dynconfig/dynconfig/merge"
)

// Provider is an EKS Anywhere infrastructure provider. The fields EKS
// Anywhere sets on the kubelet itself depend on it.
type Provider string

// The EKS Anywhere providers the "Kubelet Configuration" design names.
const (
	ProviderDocker     Provider = "docker"
	ProviderVSphere    Provider = "vsphere"
	ProviderNutanix    Provider = "nutanix"
	ProviderTinkerbell Provider = "tinkerbell"
	ProviderCloudStack Provider = "cloudstack"
	ProviderSnow       Provider = "snow"
)

// EKSAOwner is the owner name the EKS Anywhere presets use by default.
const EKSAOwner = "eks-a"

// ManagedField is a KubeletConfiguration field the platform sets itself.
type ManagedField struct {
	// Path is the field path, as in Field.Path.
	Path string
	// Value is the platform's value in the field's JSON form; nil when the
	// platform sets it per machine (providerID).
	Value any
}

// EKSAManagedFields returns the kubelet settings EKS Anywhere sets itself
// for provider, from the list in the design's "What happens when a user
// tries to configure a kubelet parameter that EKS-A sets as well?":
//
//   - readOnlyPort 0 and authentication.anonymous.enabled false, for every
//     provider but docker;
//   - providerID, for tinkerbell and cloudstack, without a value: it is set
//     per machine;
//   - evictionHard, for nutanix and docker: nodefs.available,
//     nodefs.inodesFree and imagefs.available at "0%" (the value of EKS
//     Anywhere's templates, which turns disk-pressure eviction off);
//   - tlsCipherSuites, for every provider: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
//     (EKS Anywhere's crypto.SecureCipherSuiteNames).
//
// The design's list also has cloud-provider (vsphere, nutanix), which is a
// kubelet flag with no KubeletConfiguration field: there is nothing in a
// configuration document to block, so it is not returned. The slice is
// sorted by path and is the caller's to keep.
func EKSAManagedFields(provider Provider) ([]ManagedField, error) {
	var out []ManagedField
	switch provider {
	case ProviderDocker, ProviderVSphere, ProviderNutanix, ProviderTinkerbell, ProviderCloudStack, ProviderSnow:
	default:
		return nil, fmt.Errorf("provision: unknown EKS Anywhere provider %q", provider)
	}
	if provider != ProviderDocker {
		out = append(out,
			ManagedField{Path: "readOnlyPort", Value: 0},
			ManagedField{Path: "authentication.anonymous.enabled", Value: false})
	}
	if provider == ProviderTinkerbell || provider == ProviderCloudStack {
		out = append(out, ManagedField{Path: "providerID"})
	}
	if provider == ProviderNutanix || provider == ProviderDocker {
		out = append(out, ManagedField{Path: "evictionHard", Value: map[string]string{
			"nodefs.available":  "0%",
			"nodefs.inodesFree": "0%",
			"imagefs.available": "0%",
		}})
	}
	out = append(out, ManagedField{Path: "tlsCipherSuites", Value: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// EKSAOptions describe one EKS Anywhere node group for the presets.
type EKSAOptions struct {
	// Owner names the platform in errors. Empty means EKSAOwner.
	Owner string
	// Managed lists the fields the platform sets itself; see
	// EKSAManagedFields for a provider's list.
	Managed []ManagedField
	// Allow lists paths of Managed that users may set after all (the
	// design's "case-by-case basis"): the platform's value becomes a default
	// that the user's value overrides (UserWins). A managed field without a
	// value cannot be allowed.
	Allow []string
	// ResolvConf is the cluster spec's clusterNetwork.dns.resolvConf.path,
	// the explicit field behind the kubelet's resolvConf. Empty: not set.
	ResolvConf string
	// Labels are the node group's labels field, the explicit field behind
	// the kubelet's --node-labels.
	Labels NodeLabels
	// ErrorIfBoth makes a setting given both in an explicit field and in the
	// user's kubelet configuration an error, which both solutions of the
	// design offer as the stricter choice, instead of letting one side win.
	ErrorIfBoth bool
}

// EKSAProposedPolicy is the design's "proposed solution" for the settings
// EKS Anywhere itself sets or exposes through its own cluster spec fields:
//
//   - a managed field is blocked: the user's kubelet configuration may not
//     set it, and the platform's value (if it has one here) is applied;
//   - an explicit field (resolvConf, labels) overrides the same setting in
//     the user's kubelet configuration (PlatformWins), or with ErrorIfBoth
//     setting it in both places is an error.
func EKSAProposedPolicy(opts EKSAOptions) (Policy, error) {
	return eksaPolicy(opts, true, merge.PlatformWins)
}

// EKSAAlternatePolicy is the design's "alternate solution":
//
//   - a managed field may be set, but the platform's value always replaces
//     the user's (PlatformWins, with a warning); the user's value must still
//     be valid (an invalid one is an error, see Validator.Validate); a
//     managed field without a value here (providerID) is blocked instead,
//     since the platform would replace the user's value on the machine
//     where this validator cannot see it;
//   - the user's kubelet configuration is the source of truth and wins over
//     an explicit field (UserWins), or with ErrorIfBoth setting it in both
//     places is an error.
func EKSAAlternatePolicy(opts EKSAOptions) (Policy, error) {
	return eksaPolicy(opts, false, merge.UserWins)
}

func eksaPolicy(opts EKSAOptions, block bool, explicit merge.Rule) (Policy, error) {
	owner := opts.Owner
	if owner == "" {
		owner = EKSAOwner
	}
	if opts.ErrorIfBoth {
		explicit = merge.ErrorIfBoth
	}
	allowed := map[string]bool{}
	for _, p := range opts.Allow {
		allowed[p] = true
	}
	p := Policy{Owner: owner}
	for _, m := range opts.Managed {
		switch {
		case allowed[m.Path] && m.Value == nil:
			return Policy{}, fmt.Errorf("provision: managed field %s has no value, so users cannot be allowed to set it", m.Path)
		case allowed[m.Path]:
			p.Fields = append(p.Fields, Field{Path: m.Path, Value: m.Value, Rule: merge.UserWins})
		case block || m.Value == nil:
			p.Fields = append(p.Fields, Field{Path: m.Path, Value: m.Value, Blocked: true})
		default:
			p.Fields = append(p.Fields, Field{Path: m.Path, Value: m.Value, Rule: merge.PlatformWins})
		}
		delete(allowed, m.Path)
	}
	if len(allowed) > 0 {
		rest := make([]string, 0, len(allowed))
		for path := range allowed {
			rest = append(rest, path)
		}
		sort.Strings(rest)
		return Policy{}, fmt.Errorf("provision: allowed fields %v are not managed fields", rest)
	}
	if opts.ResolvConf != "" {
		p.Fields = append(p.Fields, Field{Path: "resolvConf", Value: opts.ResolvConf, Rule: explicit})
	}
	p.NodeLabels = NodeLabelPolicy{Owner: owner, Labels: opts.Labels, Rule: explicit}
	return p, nil
}
