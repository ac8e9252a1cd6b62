package provision

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/merge"
)

// fieldByJSONName returns the top-level field of cfg whose JSON name is name.
func fieldByJSONName(t *testing.T, cfg *kubeletv1beta1.KubeletConfiguration, name string) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if tag == name {
			return v.Field(i)
		}
	}
	t.Fatalf("KubeletConfiguration has no field %q", name)
	return reflect.Value{}
}

// checkExplicitEmpty fails unless the field is a non-nil empty map or list
// in cfg: set, to nothing.
func checkExplicitEmpty(t *testing.T, what string, cfg *kubeletv1beta1.KubeletConfiguration, name string) {
	t.Helper()
	f := fieldByJSONName(t, cfg, name)
	if f.IsNil() || f.Len() != 0 {
		t.Errorf("%s.%s = %#v, want explicitly empty (non-nil, no entries)", what, name, f.Interface())
	}
}

// topLevel decodes a JSON document and returns its field name, and whether
// it is there.
func topLevel(t *testing.T, doc []byte, name string) (any, bool) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("document does not decode: %v\n%s", err, doc)
	}
	v, ok := m[name]
	return v, ok
}

// TestExplicitEmptiesSurviveValidate checks that an explicitly empty map or
// list in the user's document is in every part of the Result: the kubelet
// reads evictionHard: {} as "no hard eviction" and clusterDNS: [] as "no
// cluster DNS", which are not the same as leaving them out.
func TestExplicitEmptiesSurviveValidate(t *testing.T) {
	none := func(t *testing.T) *Validator {
		v, err := NewValidator(Policy{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// EKS Anywhere on Nutanix sets evictionHard and tlsCipherSuites; allowed,
	// the user's value wins over the platform's (UserWins).
	allowed := func(t *testing.T) *Validator {
		return eksaValidator(t, EKSAProposedPolicy, ProviderNutanix, EKSAOptions{Allow: []string{"evictionHard", "tlsCipherSuites"}})
	}
	tests := []struct {
		name  string
		v     func(*testing.T) *Validator
		doc   string
		field string
		empty any // the field's value in the Document, decoded
	}{
		{"evictionHard {}", none, header + "evictionHard: {}\n", "evictionHard", map[string]any{}},
		{"evictionHard {} over the platform's thresholds", allowed, header + "evictionHard: {}\n", "evictionHard", map[string]any{}},
		{"evictionSoft {} in JSON", none, `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","evictionSoft":{}}`, "evictionSoft", map[string]any{}},
		{"featureGates {}", none, header + "featureGates: {}\n", "featureGates", map[string]any{}},
		{"clusterDNS []", none, header + "clusterDNS: []\n", "clusterDNS", []any{}},
		{"tlsCipherSuites [] over the platform's list", allowed, header + "tlsCipherSuites: []\n", "tlsCipherSuites", []any{}},
		{"allowedUnsafeSysctls []", none, header + "allowedUnsafeSysctls: []\n", "allowedUnsafeSysctls", []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.v(t).Validate([]byte(tt.doc), "kubelet.yaml")
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got, ok := topLevel(t, res.Document, tt.field)
			if !ok {
				t.Errorf("Document has no %s:\n%s", tt.field, res.Document)
			} else if diff := cmp.Diff(tt.empty, got); diff != "" {
				t.Errorf("Document %s (-want +got):\n%s", tt.field, diff)
			}
			checkExplicitEmpty(t, "Config", res.Config, tt.field)
			checkExplicitEmpty(t, "User", res.User, tt.field)
			got, ok = topLevel(t, res.UserDocument, tt.field)
			if !ok {
				t.Errorf("UserDocument has no %s:\n%s", tt.field, res.UserDocument)
			} else if diff := cmp.Diff(tt.empty, got); diff != "" {
				t.Errorf("UserDocument %s (-want +got):\n%s", tt.field, diff)
			}
		})
	}
}

// TestUserViewAddsNoEmptyMaps checks that a platform value under a map
// (featureGates[X], evictionHard[signal]) taken out of the user's view does
// not leave an empty map behind: the user did not write one, and an empty
// evictionHard would mean "no hard eviction" to every renderer.
func TestUserViewAddsNoEmptyMaps(t *testing.T) {
	p := Policy{Owner: "acme", Fields: []Field{
		{Path: "featureGates[MemoryQoS]", Value: false, Rule: merge.UserWins},
		{Path: "evictionHard[memory.available]", Value: "200Mi", Blocked: true},
	}}
	v, err := NewValidator(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("user wrote neither map", func(t *testing.T) {
		res, err := v.Validate([]byte(header+"maxPods: 20\n"), "kubelet.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if res.User.FeatureGates != nil || res.User.EvictionHard != nil {
			t.Errorf("User.FeatureGates = %#v, User.EvictionHard = %#v; want both nil: the user set neither", res.User.FeatureGates, res.User.EvictionHard)
		}
		if diff := cmp.Diff(`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":20}`, string(res.UserDocument)); diff != "" {
			t.Errorf("UserDocument (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"memory.available": "200Mi"}, res.Config.EvictionHard); diff != "" {
			t.Errorf("Config.EvictionHard (-want +got):\n%s", diff)
		}
	})
	t.Run("user wrote featureGates: {}", func(t *testing.T) {
		res, err := v.Validate([]byte(header+"featureGates: {}\n"), "kubelet.yaml")
		if err != nil {
			t.Fatal(err)
		}
		checkExplicitEmpty(t, "User", res.User, "featureGates")
		if res.User.EvictionHard != nil {
			t.Errorf("User.EvictionHard = %#v, want nil", res.User.EvictionHard)
		}
		if diff := cmp.Diff(`{"apiVersion":"kubelet.config.k8s.io/v1beta1","featureGates":{},"kind":"KubeletConfiguration"}`, string(res.UserDocument)); diff != "" {
			t.Errorf("UserDocument (-want +got):\n%s", diff)
		}
	})
}

// TestNullEntriesAreErrors checks that null as a map value or a list element
// is refused with the document name and the field path, all at once with
// the document's other problems (sorted by key within each map); null as a
// field's whole value still means "not set".
func TestNullEntriesAreErrors(t *testing.T) {
	const name = "spec.controlPlaneConfiguration.kubeletConfiguration"
	const mapNull = ": null is not a value: remove the key to leave it out (an empty map is {})"
	const listNull = ": null is not a value: remove the element (an empty list is [])"
	tests := []struct {
		name string
		doc  string
		want string
	}{{
		name: "the only eviction signal",
		doc:  header + "evictionHard:\n  memory.available: null\n",
		want: name + ": evictionHard[memory.available]" + mapNull,
	}, {
		name: "next to other signals",
		doc:  header + "evictionHard:\n  memory.available: null\n  nodefs.available: 5%\n  imagefs.available: ~\n",
		want: name + ": evictionHard[imagefs.available]" + mapNull + "\n" +
			name + ": evictionHard[memory.available]" + mapNull,
	}, {
		name: "a feature gate, in JSON",
		doc:  `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","featureGates":{"MemoryQoS":null}}`,
		want: name + ": featureGates[MemoryQoS]" + mapNull,
	}, {
		name: "list elements",
		doc:  header + "allowedUnsafeSysctls: [null, net.core.somaxconn]\nclusterDNS: [10.96.0.10, null]\n",
		want: name + ": allowedUnsafeSysctls[0]" + listNull + "\n" +
			name + ": clusterDNS[1]" + listNull,
	}, {
		name: "a list in a map",
		doc:  header + "staticPodURLHeader:\n  X-Token: [null]\n",
		want: name + ": staticPodURLHeader[X-Token][0]" + listNull,
	}, {
		name: "with the document's other problems",
		doc:  header + "maxPod: 10\nevictionSoft: {memory.available: null}\n",
		want: name + `: unknown field "maxPod"` + "\n" +
			name + ": evictionSoft[memory.available]" + mapNull,
	}}
	v, err := NewValidator(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := v.Validate([]byte(tt.doc), name)
			if err == nil {
				t.Fatalf("Validate succeeded with %s, want an error", res.Document)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
			var de *merge.DecodeError
			if !errors.As(err, &de) || de.Document != name {
				t.Errorf("error is not a *merge.DecodeError for %q: %#v", name, err)
			}
		})
	}

	t.Run("ValidateMap", func(t *testing.T) {
		obj := map[string]any{
			"apiVersion":   "kubelet.config.k8s.io/v1beta1",
			"kind":         "KubeletConfiguration",
			"evictionHard": map[string]any{"memory.available": nil},
		}
		_, err := v.ValidateMap(obj, name)
		if err == nil || err.Error() != name+": evictionHard[memory.available]"+mapNull {
			t.Errorf("ValidateMap error = %v", err)
		}
	})

	t.Run("null fields are unset", func(t *testing.T) {
		res, err := v.Validate([]byte(header+"evictionHard: null\nclusterDNS: ~\nauthentication:\n  anonymous: null\n"), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"evictionHard", "clusterDNS"} {
			if got, ok := topLevel(t, res.Document, f); ok {
				t.Errorf("Document has %s: %v", f, got)
			}
		}
		if res.Config.EvictionHard != nil || res.Config.ClusterDNS != nil {
			t.Errorf("Config.EvictionHard = %#v, Config.ClusterDNS = %#v, want both nil", res.Config.EvictionHard, res.Config.ClusterDNS)
		}
	})
}

// TestUserViewKeepsBigIntegers checks that the user view's round trip does
// not pass integers through float64: podPidsLimit 2^53+1 stays exact.
func TestUserViewKeepsBigIntegers(t *testing.T) {
	v := eksaValidator(t, EKSAProposedPolicy, ProviderVSphere, EKSAOptions{})
	res, err := v.Validate([]byte(header+"podPidsLimit: 9007199254740993\n"), "kubelet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.User.PodPidsLimit == nil || *res.User.PodPidsLimit != 9007199254740993 {
		t.Errorf("User.PodPidsLimit = %v, want 9007199254740993", res.User.PodPidsLimit)
	}
}

// TestPlatformExplicitEmpty checks that a platform's explicitly empty value
// (no hard eviction, set by the platform) is in Document and Config, and,
// being the platform's, not in the user's view.
func TestPlatformExplicitEmpty(t *testing.T) {
	v, err := NewValidator(Policy{Owner: "acme", Fields: []Field{
		{Path: "evictionHard", Value: map[string]string{}, Blocked: true},
		{Path: "clusterDNS", Value: []string{}, Rule: merge.PlatformWins},
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := v.Validate([]byte(header+"clusterDNS: [10.96.0.10]\n"), "kubelet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"evictionHard", "clusterDNS"} {
		if _, ok := topLevel(t, res.Document, f); !ok {
			t.Errorf("Document has no %s:\n%s", f, res.Document)
		}
		checkExplicitEmpty(t, "Config", res.Config, f)
		if got, ok := topLevel(t, res.UserDocument, f); ok {
			t.Errorf("UserDocument has the platform's %s: %v", f, got)
		}
	}
	if res.User.EvictionHard != nil || res.User.ClusterDNS != nil {
		t.Errorf("User.EvictionHard = %#v, User.ClusterDNS = %#v, want both nil", res.User.EvictionHard, res.User.ClusterDNS)
	}
}
