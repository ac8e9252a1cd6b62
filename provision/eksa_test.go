package provision

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/merge"
)

// TestEKSAManagedFields checks the per-provider list of the design.
func TestEKSAManagedFields(t *testing.T) {
	tests := []struct {
		provider Provider
		want     []string
	}{
		{ProviderDocker, []string{"evictionHard", "tlsCipherSuites"}},
		{ProviderVSphere, []string{"authentication.anonymous.enabled", "readOnlyPort", "tlsCipherSuites"}},
		{ProviderNutanix, []string{"authentication.anonymous.enabled", "evictionHard", "readOnlyPort", "tlsCipherSuites"}},
		{ProviderTinkerbell, []string{"authentication.anonymous.enabled", "providerID", "readOnlyPort", "tlsCipherSuites"}},
		{ProviderCloudStack, []string{"authentication.anonymous.enabled", "providerID", "readOnlyPort", "tlsCipherSuites"}},
		{ProviderSnow, []string{"authentication.anonymous.enabled", "readOnlyPort", "tlsCipherSuites"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.provider), func(t *testing.T) {
			fields, err := EKSAManagedFields(tt.provider)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fields {
				got = append(got, f.Path)
				if (f.Value == nil) != (f.Path == "providerID") {
					t.Errorf("%s: value %v; only providerID has none", f.Path, f.Value)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			// Every list must make a working validator under both presets.
			for _, preset := range []func(EKSAOptions) (Policy, error){EKSAProposedPolicy, EKSAAlternatePolicy} {
				p, err := preset(EKSAOptions{Managed: fields})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := NewValidator(p); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if _, err := EKSAManagedFields("aws"); err == nil || err.Error() != `provision: unknown EKS Anywhere provider "aws"` {
		t.Errorf("unknown provider: error = %v", err)
	}
}

// TestEKSAPresets is the matrix of the design's two solutions: for each kind
// of field, what the presets make of it.
func TestEKSAPresets(t *testing.T) {
	managed := []ManagedField{
		{Path: "readOnlyPort", Value: 0},
		{Path: "providerID"},
		{Path: "tlsCipherSuites", Value: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}},
	}
	labels := NodeLabels{"tier": "web"}
	tests := []struct {
		name   string
		preset func(EKSAOptions) (Policy, error)
		opts   EKSAOptions
		want   Policy
	}{{
		name:   "proposed",
		preset: EKSAProposedPolicy,
		opts:   EKSAOptions{Managed: managed, ResolvConf: "/r", Labels: labels},
		want: Policy{Owner: "eks-a", Fields: []Field{
			{Path: "readOnlyPort", Value: 0, Blocked: true},
			{Path: "providerID", Blocked: true},
			{Path: "tlsCipherSuites", Value: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, Blocked: true},
			{Path: "resolvConf", Value: "/r", Rule: merge.PlatformWins},
		}, NodeLabels: NodeLabelPolicy{Owner: "eks-a", Labels: labels, Rule: merge.PlatformWins}},
	}, {
		name:   "proposed, error if both, one field allowed",
		preset: EKSAProposedPolicy,
		opts:   EKSAOptions{Owner: "acme", Managed: managed, Allow: []string{"tlsCipherSuites"}, ResolvConf: "/r", Labels: labels, ErrorIfBoth: true},
		want: Policy{Owner: "acme", Fields: []Field{
			{Path: "readOnlyPort", Value: 0, Blocked: true},
			{Path: "providerID", Blocked: true},
			{Path: "tlsCipherSuites", Value: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, Rule: merge.UserWins},
			{Path: "resolvConf", Value: "/r", Rule: merge.ErrorIfBoth},
		}, NodeLabels: NodeLabelPolicy{Owner: "acme", Labels: labels, Rule: merge.ErrorIfBoth}},
	}, {
		name:   "alternate",
		preset: EKSAAlternatePolicy,
		opts:   EKSAOptions{Managed: managed, ResolvConf: "/r", Labels: labels},
		want: Policy{Owner: "eks-a", Fields: []Field{
			{Path: "readOnlyPort", Value: 0, Rule: merge.PlatformWins},
			{Path: "providerID", Blocked: true},
			{Path: "tlsCipherSuites", Value: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, Rule: merge.PlatformWins},
			{Path: "resolvConf", Value: "/r", Rule: merge.UserWins},
		}, NodeLabels: NodeLabelPolicy{Owner: "eks-a", Labels: labels, Rule: merge.UserWins}},
	}, {
		name:   "alternate, error if both, no resolvConf",
		preset: EKSAAlternatePolicy,
		opts:   EKSAOptions{ErrorIfBoth: true},
		want:   Policy{Owner: "eks-a", NodeLabels: NodeLabelPolicy{Owner: "eks-a", Rule: merge.ErrorIfBoth}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.preset(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEKSAPresetErrors(t *testing.T) {
	managed := []ManagedField{{Path: "providerID"}, {Path: "readOnlyPort", Value: 0}}
	tests := []struct {
		name string
		opts EKSAOptions
		want string
	}{
		{"allow a field without value", EKSAOptions{Managed: managed, Allow: []string{"providerID"}},
			"provision: managed field providerID has no value, so users cannot be allowed to set it"},
		{"allow an unmanaged field", EKSAOptions{Managed: managed, Allow: []string{"maxPods", "address"}},
			"provision: allowed fields [address maxPods] are not managed fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, preset := range []func(EKSAOptions) (Policy, error){EKSAProposedPolicy, EKSAAlternatePolicy} {
				_, err := preset(tt.opts)
				if err == nil || err.Error() != tt.want {
					t.Errorf("error = %v, want %q", err, tt.want)
				}
			}
		})
	}
}
