package merge

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPolicy(t *testing.T) {
	policy := Policy{
		Owner:  "eks-a",
		Locked: []string{"providerID", "authentication.anonymous.enabled", "featureGates[Locked]"},
		Platform: []PlatformValue{
			{Path: "clusterDNS", Value: []string{"10.96.0.10"}, Rule: PlatformWins},
			{Path: "clusterDomain", Value: "platform.local", Rule: UserWins},
			{Path: "readOnlyPort", Value: 0, Rule: ErrorIfBoth},
			{Path: "evictionHard", Value: map[string]string{"memory.available": "500Mi"}, Rule: UserWins},
		},
	}
	tests := []struct {
		name     string
		base     string
		dropIn   string
		instance string
		flags    []Override
		wantErr  string
		check    func(t *testing.T, r *Result[kubeletConfig])
	}{
		{
			name:    "locked field in the base",
			base:    "providerID: aws:///i-1",
			wantErr: `kubelet.yaml: providerID: field is managed by the platform (owner: "eks-a")`,
		},
		{
			name:     "locked fields in every layer, all reported",
			base:     "authentication:\n  anonymous:\n    enabled: true",
			dropIn:   "providerID: x",
			instance: "featureGates:\n  Locked: true\n  Free: true",
			wantErr: strings.Join([]string{
				`kubelet.yaml: authentication.anonymous.enabled: field is managed by the platform (owner: "eks-a")`,
				`10-x.conf: providerID: field is managed by the platform (owner: "eks-a")`,
				`instance.yaml: featureGates[Locked]: field is managed by the platform (owner: "eks-a")`,
			}, "\n"),
		},
		{
			name:    "deleting a locked field is setting it",
			dropIn:  "providerID: null",
			wantErr: `10-x.conf: providerID: field is managed by the platform (owner: "eks-a")`,
		},
		{
			name:     "deleting the parent of a locked field is setting it",
			instance: "authentication: null",
			wantErr:  `instance.yaml: authentication.anonymous.enabled: field is managed by the platform (owner: "eks-a")`,
		},
		{
			name: "siblings of locked fields are free",
			base: "authentication:\n  webhook:\n    enabled: true\nfeatureGates:\n  Free: true",
			check: func(t *testing.T, r *Result[kubeletConfig]) {
				if !*r.Object.Authentication.Webhook.Enabled || !r.Object.FeatureGates["Free"] {
					t.Errorf("siblings not set: %+v", r.Object.Authentication)
				}
			},
		},
		{
			name:  "flags may set locked fields",
			flags: []Override{{Path: "providerID", Value: "aws:///i-2", Source: "flag --provider-id"}},
			check: func(t *testing.T, r *Result[kubeletConfig]) {
				if r.Object.ProviderID != "aws:///i-2" {
					t.Errorf("providerID = %q", r.Object.ProviderID)
				}
			},
		},
		{
			name: "platform wins, with a warning naming the loser",
			base: "clusterDNS: [1.1.1.1]",
			check: func(t *testing.T, r *Result[kubeletConfig]) {
				if diff := cmp.Diff([]string{"10.96.0.10"}, r.Object.ClusterDNS); diff != "" {
					t.Errorf("clusterDNS (-want +got):\n%s", diff)
				}
				want := []string{`kubelet.yaml: clusterDNS: value replaced by the platform's (owner: "eks-a")`}
				if diff := cmp.Diff(want, r.Warnings); diff != "" {
					t.Errorf("warnings (-want +got):\n%s", diff)
				}
				if r.Provenance["clusterDNS"] != "eks-a" {
					t.Errorf("provenance of clusterDNS = %q", r.Provenance["clusterDNS"])
				}
			},
		},
		{
			name: "user wins when set",
			base: "clusterDomain: user.local\nevictionHard:\n  memory.available: 1Gi",
			check: func(t *testing.T, r *Result[kubeletConfig]) {
				if r.Object.ClusterDomain != "user.local" || r.Provenance["clusterDomain"] != "kubelet.yaml" {
					t.Errorf("clusterDomain = %q from %q", r.Object.ClusterDomain, r.Provenance["clusterDomain"])
				}
				if diff := cmp.Diff(map[string]string{"memory.available": "1Gi"}, r.Object.EvictionHard); diff != "" {
					t.Errorf("evictionHard (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "platform value when the user is silent",
			check: func(t *testing.T, r *Result[kubeletConfig]) {
				if r.Object.ClusterDomain != "platform.local" || r.Provenance["clusterDomain"] != "eks-a" {
					t.Errorf("clusterDomain = %q from %q", r.Object.ClusterDomain, r.Provenance["clusterDomain"])
				}
				if r.Object.EvictionHard["memory.available"] != "500Mi" || r.Provenance["evictionHard[memory.available]"] != "eks-a" {
					t.Errorf("evictionHard = %v, provenance %v", r.Object.EvictionHard, r.Provenance)
				}
				if r.Object.ReadOnlyPort != 0 {
					t.Errorf("readOnlyPort = %d", r.Object.ReadOnlyPort)
				}
			},
		},
		{
			name:     "error if both",
			instance: "readOnlyPort: 10255",
			wantErr:  `instance.yaml: readOnlyPort: field is also set by the platform (owner: "eks-a"); set it in one place only`,
		},
		{
			name:  "flags override platform values",
			flags: []Override{{Path: "clusterDNS", Value: []string{"9.9.9.9"}, Source: "flag --cluster-dns"}},
			check: func(t *testing.T, r *Result[kubeletConfig]) {
				if diff := cmp.Diff([]string{"9.9.9.9"}, r.Object.ClusterDNS); diff != "" {
					t.Errorf("clusterDNS (-want +got):\n%s", diff)
				}
				if r.Provenance["clusterDNS"] != "flag --cluster-dns" {
					t.Errorf("provenance = %q", r.Provenance["clusterDNS"])
				}
			},
		},
	}
	p := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{Policy: policy})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Layers{Base: doc("kubelet.yaml", kubeletHeader+tt.base), Flags: tt.flags}
			if tt.dropIn != "" {
				l.DropIns = []Document{{Name: "10-x.conf", Data: []byte(kubeletHeader + tt.dropIn)}}
			}
			if tt.instance != "" {
				l.Instance = doc("instance.yaml", kubeletHeader+tt.instance)
			}
			res, err := p.Merge(l)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error:\n%v\nwant:\n%s", err, tt.wantErr)
				}
				var pe *PolicyError
				if !errors.As(err, &pe) || pe.Owner != "eks-a" {
					t.Errorf("errors.As(*PolicyError) = %+v", pe)
				}
				return
			}
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			tt.check(t, res)
		})
	}
}

func TestPolicyConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   string
	}{
		{"unknown locked path", Policy{Locked: []string{"providerId"}}, `merge: policy: locked: field path "providerId": no field "providerId" in v1beta1.KubeletConfiguration`},
		{"path through a leaf", Policy{Locked: []string{"port.x"}}, `merge: policy: locked: field path "port.x": port is not an object (it is int32)`},
		{"bad rule", Policy{Platform: []PlatformValue{{Path: "port", Value: 1}}}, `merge: policy: platform[0] port: unknown rule Rule(0)`},
		{"wrong value type", Policy{Platform: []PlatformValue{{Path: "port", Value: "x", Rule: UserWins}}}, `merge: policy: platform[0]: port: expected int32, got string "x"`},
		{"locked and provided", Policy{Locked: []string{"port"}, Platform: []PlatformValue{{Path: "port", Value: 1, Rule: PlatformWins}}}, `merge: policy: platform[0] port: also locked; use the ErrorIfBoth rule instead of locking a platform value`},
		{"no value", Policy{Platform: []PlatformValue{{Path: "port", Rule: PlatformWins}}}, `merge: policy: platform[0] port: no value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Profile[kubeletConfig](kubeletTestProfile{}), Options{Policy: tt.policy})
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestDefaultsAfterMerge: defaults are applied once to the merged object,
// which equals "defaults applied to the merged user config".
func TestDefaultsAfterMerge(t *testing.T) {
	layers := func() Layers {
		return Layers{
			Base:     doc("kubelet.yaml", kubeletHeader+"port: 10251\nevictionHard:\n  memory.available: 1Gi\nmaxPods: 50\n"),
			DropIns:  []Document{{Name: "10.conf", Data: []byte(kubeletHeader + "maxPods: null\nauthentication:\n  webhook:\n    enabled: false\n")}},
			Instance: doc("instance.yaml", kubeletHeader+"address: 10.0.0.7\n"),
		}
	}
	withDefaults := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{})
	got, err := withDefaults.Merge(layers())
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	raw, err := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{}).Merge(layers())
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	want := raw.Object
	kubeletTestProfile{}.Default(want)
	if diff := cmp.Diff(want, got.Object); diff != "" {
		t.Errorf("Merge != Default(merged user config) (-want +got):\n%s", diff)
	}
	// A deleted field gets its default back; a user map is not merged with
	// the default map; a user false is not overwritten by a default true.
	if got.Object.MaxPods != 110 || got.Provenance["maxPods"] != DefaultsLayer {
		t.Errorf("maxPods = %d from %q, want the default 110", got.Object.MaxPods, got.Provenance["maxPods"])
	}
	if diff := cmp.Diff(map[string]string{"memory.available": "1Gi"}, got.Object.EvictionHard); diff != "" {
		t.Errorf("evictionHard (-want +got):\n%s", diff)
	}
	if *got.Object.Authentication.Webhook.Enabled {
		t.Error("authentication.webhook.enabled: the user's false was defaulted to true")
	}
}

func TestValidationError(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{})
	_, err := p.Merge(Layers{
		Base:     doc("kubelet.yaml", kubeletHeader+"imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n"),
		Instance: doc("instance.yaml", kubeletHeader+"port: 70000\n"),
	})
	want := strings.Join([]string{
		`merged config: port: Invalid value: 70000: must be a port number between 1 and 65535 (set by instance.yaml)`,
		`merged config: imageGCLowThresholdPercent: Invalid value: 60: must be less than imageGCHighThresholdPercent (set by kubelet.yaml)`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 2 || ve.Document != MergedDocument {
		t.Errorf("errors.As(*ValidationError) = %+v", ve)
	}
	var me *Error
	if !errors.As(err, &me) || me.Validation != ve {
		t.Errorf("errors.As(*Error) = %+v", me)
	}
}
