package provision

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dynconfig/dynconfig/merge"
)

// TestParseNodeLabels follows the kubelet's reading of --node-labels
// (component-base cli/flag ConfigurationMap.Set).
func TestParseNodeLabels(t *testing.T) {
	tests := []struct {
		in   string
		want NodeLabels
	}{
		{"", NodeLabels{}},
		{"a=b", NodeLabels{"a": "b"}},
		{"a=b,c=d", NodeLabels{"a": "b", "c": "d"}},
		{" a = b , c=d ", NodeLabels{"a": "b", "c": "d"}},
		{"a=b,,c=d,", NodeLabels{"a": "b", "c": "d"}},
		{"flag", NodeLabels{"flag": ""}},
		{"a=b=c", NodeLabels{"a": "b=c"}},
		{"a=1,a=2", NodeLabels{"a": "2"}},
		{"example.com/tier=web", NodeLabels{"example.com/tier": "web"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ParseNodeLabels(tt.in)); diff != "" {
				t.Errorf("ParseNodeLabels(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestNodeLabelsString(t *testing.T) {
	tests := []struct {
		in   NodeLabels
		want string
	}{
		{nil, ""},
		{NodeLabels{"b": "2", "a": "1"}, "a=1,b=2"},
		{NodeLabels{"example.com/flag": ""}, "example.com/flag="},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := tt.in.String()
			if got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(NodeLabels(tt.in), ParseNodeLabels(got), cmpEmptyIsNil()); diff != "" {
				t.Errorf("ParseNodeLabels(String()) (-want +got):\n%s", diff)
			}
		})
	}
}

func cmpEmptyIsNil() cmp.Option {
	return cmp.FilterValues(func(a, b NodeLabels) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())
}

// TestNodeLabelsValidate checks the kubelet's startup checks of
// --node-labels (cmd/kubelet/app/options ValidateKubeletFlags).
func TestNodeLabelsValidate(t *testing.T) {
	const restricted = "the kubelet refuses labels in the kubernetes.io and k8s.io namespaces except under kubelet.kubernetes.io, node.kubernetes.io and these keys: " +
		"beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, " +
		"kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone"
	tests := []struct {
		name string
		in   NodeLabels
		want []string
	}{{
		name: "valid, including allowed kubernetes.io labels",
		in: NodeLabels{
			"tier":                          "web",
			"example.com/team":              "a-b_c.d",
			"node.kubernetes.io/pool":       "x",
			"foo.kubelet.kubernetes.io/bar": "y",
			"topology.kubernetes.io/zone":   "z1",
		},
	}, {
		name: "restricted namespace",
		in:   NodeLabels{"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/a": "b", "x.k8s.io/y": "z"},
		want: []string{
			"labels[node-restriction.kubernetes.io/a]: Forbidden: " + restricted,
			"labels[node-role.kubernetes.io/worker]: Forbidden: " + restricted,
			"labels[x.k8s.io/y]: Forbidden: " + restricted,
		},
	}, {
		name: "bad key and value",
		in:   NodeLabels{"bad key": "ok", "ok": "bad value"},
		want: []string{
			`labels[bad key]: Invalid value: "bad key": label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`labels[ok]: Invalid value: "bad value": label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range tt.in.Validate(field.NewPath("labels")) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeLabelPolicyMerge checks each rule key by key.
func TestNodeLabelPolicyMerge(t *testing.T) {
	platform := NodeLabels{"tier": "web", "team": "a"}
	user := NodeLabels{"tier": "db", "team": "a", "zone": "z1"}
	tests := []struct {
		name     string
		policy   NodeLabelPolicy
		user     NodeLabels
		want     NodeLabels
		wantWarn []string
		wantErr  string
	}{{
		name:     "platform wins, warning only where values differ",
		policy:   NodeLabelPolicy{Owner: "eks-a", Labels: platform, Rule: merge.PlatformWins},
		user:     user,
		want:     NodeLabels{"tier": "web", "team": "a", "zone": "z1"},
		wantWarn: []string{`kubeletExtraArgs: node-labels[tier]: value replaced by the platform's (owner: "eks-a")`},
	}, {
		name:   "user wins",
		policy: NodeLabelPolicy{Owner: "eks-a", Labels: platform, Rule: merge.UserWins},
		user:   user,
		want:   NodeLabels{"tier": "db", "team": "a", "zone": "z1"},
	}, {
		name:   "error if both, every shared key, even with equal values",
		policy: NodeLabelPolicy{Labels: platform, Rule: merge.ErrorIfBoth},
		user:   user,
		wantErr: `kubeletExtraArgs: node-labels[team]: field is also set by the platform (owner: "platform"); set it in one place only` + "\n" +
			`kubeletExtraArgs: node-labels[tier]: field is also set by the platform (owner: "platform"); set it in one place only`,
	}, {
		name:   "error if both, disjoint keys",
		policy: NodeLabelPolicy{Labels: NodeLabels{"a": "1"}, Rule: merge.ErrorIfBoth},
		user:   NodeLabels{"b": "2"},
		want:   NodeLabels{"a": "1", "b": "2"},
	}, {
		name:   "no platform labels need no rule",
		policy: NodeLabelPolicy{},
		user:   NodeLabels{"b": "2"},
		want:   NodeLabels{"b": "2"},
	}, {
		name:    "labels without a rule",
		policy:  NodeLabelPolicy{Labels: NodeLabels{"a": "1"}},
		wantErr: "node label policy: unknown rule Rule(0)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := map[string]string{}
			for k, v := range tt.user {
				before[k] = v
			}
			got, warn, err := tt.policy.Merge(tt.user, "kubeletExtraArgs")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "set it in one place") {
					var pe *merge.PolicyError
					if !errors.As(err, &pe) {
						t.Errorf("errors.As(*merge.PolicyError) failed on %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarn, warn); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, map[string]string(tt.user), cmpEmptyMaps()); diff != "" {
				t.Errorf("Merge modified the user's labels (-before +after):\n%s", diff)
			}
			got["new"] = "x"
			if _, ok := tt.policy.Labels["new"]; ok {
				t.Error("result aliases the platform's labels")
			}
		})
	}
}

func cmpEmptyMaps() cmp.Option {
	return cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())
}
