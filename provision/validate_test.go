package provision

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/merge"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// eksaValidator builds a validator for a preset over provider's managed fields.
func eksaValidator(t testing.TB, preset func(EKSAOptions) (Policy, error), provider Provider, opts EKSAOptions) *Validator {
	t.Helper()
	managed, err := EKSAManagedFields(provider)
	if err != nil {
		t.Fatal(err)
	}
	opts.Managed = managed
	p, err := preset(opts)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValidator(p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidateErrors is the table of bad inputs with the exact text a user sees.
func TestValidateErrors(t *testing.T) {
	const name = "spec.controlPlaneConfiguration.kubeletConfiguration"
	proposed := func(t *testing.T, p Provider, o EKSAOptions) *Validator {
		return eksaValidator(t, EKSAProposedPolicy, p, o)
	}
	alternate := func(t *testing.T, p Provider, o EKSAOptions) *Validator {
		return eksaValidator(t, EKSAAlternatePolicy, p, o)
	}
	none := func(t *testing.T, _ Provider, _ EKSAOptions) *Validator {
		v, err := NewValidator(Policy{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name     string
		validate func(*testing.T, Provider, EKSAOptions) *Validator
		provider Provider
		opts     EKSAOptions
		doc      string
		want     string
	}{{
		name:     "wrong kind",
		validate: none,
		doc:      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\nmaxPods: 20\n",
		want:     name + `: kind: expected "KubeletConfiguration", got "KubeProxyConfiguration"`,
	}, {
		name:     "apiVersion and kind missing",
		validate: none,
		doc:      "maxPods: 20\n",
		want: name + `: apiVersion: missing, expected "kubelet.config.k8s.io/v1beta1"` + "\n" +
			name + `: kind: missing, expected "KubeletConfiguration"`,
	}, {
		name:     "old apiVersion",
		validate: none,
		doc:      "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
		want:     name + `: apiVersion: expected "kubelet.config.k8s.io/v1beta1", got "kubelet.config.k8s.io/v1alpha1"`,
	}, {
		name:     "unknown keys at every depth",
		validate: none,
		doc:      header + "maxPod: 20\nauthentication:\n  x509:\n    clientCAFle: /ca.crt\n",
		want: name + `: unknown field "maxPod"` + "\n" +
			name + `: authentication.x509: unknown field "clientCAFle"`,
	}, {
		name:     "wrong types, all at once",
		validate: none,
		doc:      header + "maxPods: ten\nserializeImagePulls: \"no\"\nsyncFrequency: 10x\nclusterDNS: 10.96.0.10\n",
		want: name + `: maxPods: expected int32, got string "ten"` + "\n" +
			name + `: serializeImagePulls: expected bool, got string "no"` + "\n" +
			name + `: syncFrequency: cannot decode string "10x" as v1.Duration: time: unknown unit "x" in duration "10x"` + "\n" +
			name + `: clusterDNS: expected list, got string "10.96.0.10"`,
	}, {
		name:     "duplicate key",
		validate: none,
		doc:      header + "maxPods: 20\nmaxPods: 30\n",
		want:     name + `: duplicate field "maxPods"`,
	}, {
		name:     "a kubelet flag is not a field",
		validate: none,
		doc:      header + "nodeLabels:\n  tier: web\ncloudProvider: external\n",
		want: name + `: unknown field "nodeLabels": a kubelet flag (--node-labels), not a KubeletConfiguration field` + "\n" +
			name + `: unknown field "cloudProvider": a kubelet flag (--cloud-provider), not a KubeletConfiguration field`,
	}, {
		name:     "kubelet validation, with field paths",
		validate: none,
		doc:      header + "maxPods: -3\nevictionHard:\n  memory.avaliable: 100Mi\n",
		want: name + `: maxPods: Invalid value: -3: must not be negative` + "\n" +
			name + `: evictionHard[memory.avaliable]: Unsupported value: "memory.avaliable": supported values: "memory.available", "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available"`,
	}, {
		name:     "blocked fields (proposed)",
		validate: proposed,
		provider: ProviderVSphere,
		doc:      header + "readOnlyPort: 10255\nauthentication:\n  anonymous:\n    enabled: true\ntlsCipherSuites: [TLS_AES_128_GCM_SHA256]\n",
		want: name + `: authentication.anonymous.enabled: field is managed by the platform (owner: "eks-a")` + "\n" +
			name + `: readOnlyPort: field is managed by the platform (owner: "eks-a")` + "\n" +
			name + `: tlsCipherSuites: field is managed by the platform (owner: "eks-a")`,
	}, {
		name:     "providerID is blocked in both solutions",
		validate: alternate,
		provider: ProviderTinkerbell,
		doc:      header + "providerID: tinkerbell://ns/m1\n",
		want:     name + `: providerID: field is managed by the platform (owner: "eks-a")`,
	}, {
		name:     "conflicting explicit field",
		validate: proposed,
		provider: ProviderDocker,
		opts:     EKSAOptions{ResolvConf: "/etc/eksa-resolv.conf", ErrorIfBoth: true},
		doc:      header + "resolvConf: /etc/my-resolv.conf\n",
		want:     name + `: resolvConf: field is also set by the platform (owner: "eks-a"); set it in one place only`,
	}, {
		name: "a platform default the user's settings make invalid",
		validate: func(t *testing.T, _ Provider, _ EKSAOptions) *Validator {
			v, err := NewValidator(Policy{Owner: "acme", Fields: []Field{{Path: "imageGCLowThresholdPercent", Value: 70, Rule: merge.UserWins}}})
			if err != nil {
				t.Fatal(err)
			}
			return v
		},
		doc:  header + "imageGCHighThresholdPercent: 60\n",
		want: name + `: imageGCLowThresholdPercent: Invalid value: 70: must be less than imageGCHighThresholdPercent (60) (set by acme)`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.validate(t, tt.provider, tt.opts)
			res, err := v.Validate([]byte(tt.doc), name)
			if err == nil {
				t.Fatalf("Validate succeeded with %s, want an error", res.Document)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
			var me *merge.Error
			if !errors.As(err, &me) {
				t.Errorf("error %T is not a *merge.Error", err)
			}
		})
	}
}

// TestValidateResults checks what a valid document gives under each preset:
// the set fields, the user's own fields, and the warnings.
func TestValidateResults(t *testing.T) {
	const name = "kubelet.yaml"
	tests := []struct {
		name     string
		preset   func(EKSAOptions) (Policy, error)
		provider Provider
		opts     EKSAOptions
		doc      string
		// wantDoc is the expected Result.Document, compared as JSON.
		wantDoc  string
		wantUser string
		// wantUserDoc is the expected Result.UserDocument when it differs
		// from wantUser (zero values, which User cannot hold).
		wantUserDoc string
		wantWarn    []string
	}{{
		name:     "proposed: platform values added, explicit resolvConf wins",
		preset:   EKSAProposedPolicy,
		provider: ProviderVSphere,
		opts:     EKSAOptions{ResolvConf: "/etc/eksa-resolv.conf"},
		doc:      header + "maxPods: 50\nresolvConf: /etc/my-resolv.conf\n",
		wantDoc: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50,
			"resolvConf":"/etc/eksa-resolv.conf","readOnlyPort":0,"authentication":{"anonymous":{"enabled":false}},
			"tlsCipherSuites":["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}`,
		wantUser: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50}`,
		wantWarn: []string{name + `: resolvConf: value replaced by the platform's (owner: "eks-a")`},
	}, {
		name:     "alternate: user's resolvConf wins, managed values replace the user's",
		preset:   EKSAAlternatePolicy,
		provider: ProviderDocker,
		opts:     EKSAOptions{ResolvConf: "/etc/eksa-resolv.conf"},
		doc:      header + "resolvConf: /etc/my-resolv.conf\nevictionHard:\n  memory.available: 1Gi\n",
		wantDoc: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"resolvConf":"/etc/my-resolv.conf",
			"evictionHard":{"nodefs.available":"0%","nodefs.inodesFree":"0%","imagefs.available":"0%"},
			"tlsCipherSuites":["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}`,
		wantUser: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","resolvConf":"/etc/my-resolv.conf"}`,
		wantWarn: []string{name + `: evictionHard: value replaced by the platform's (owner: "eks-a")`},
	}, {
		name:     "alternate: explicit resolvConf applies when the user has none",
		preset:   EKSAAlternatePolicy,
		provider: ProviderDocker,
		opts:     EKSAOptions{ResolvConf: "/etc/eksa-resolv.conf"},
		doc:      header,
		wantDoc: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"evictionHard":{"nodefs.available":"0%","nodefs.inodesFree":"0%","imagefs.available":"0%"},
			"tlsCipherSuites":["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],"resolvConf":"/etc/eksa-resolv.conf"}`,
		wantUser: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration"}`,
	}, {
		name:     "allowed managed field: the user's value overrides the platform default",
		preset:   EKSAProposedPolicy,
		provider: ProviderSnow,
		opts:     EKSAOptions{Allow: []string{"tlsCipherSuites"}},
		doc:      header + "tlsCipherSuites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n",
		wantDoc: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"tlsCipherSuites":["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"],
			"readOnlyPort":0,"authentication":{"anonymous":{"enabled":false}}}`,
		wantUser: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"tlsCipherSuites":["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]}`,
	}, {
		name:     "explicit zero values are kept in the document",
		preset:   EKSAProposedPolicy,
		provider: ProviderDocker,
		doc:      header + "rotateCertificates: false\nstaticPodPath: \"\"\n",
		wantDoc: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"rotateCertificates":false,"staticPodPath":"",
			"evictionHard":{"nodefs.available":"0%","nodefs.inodesFree":"0%","imagefs.available":"0%"},
			"tlsCipherSuites":["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}`,
		wantUser: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration"}`,
		wantUserDoc: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
			"rotateCertificates":false,"staticPodPath":""}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := eksaValidator(t, tt.preset, tt.provider, tt.opts)
			res, err := v.Validate([]byte(tt.doc), name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(jsonValue(t, tt.wantDoc), jsonValue(t, string(res.Document))); diff != "" {
				t.Errorf("Document (-want +got):\n%s", diff)
			}
			wantCfg := new(kubeletv1beta1.KubeletConfiguration)
			if err := json.Unmarshal([]byte(tt.wantDoc), wantCfg); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantCfg, res.Config); diff != "" {
				t.Errorf("Config (-want +got):\n%s", diff)
			}
			wantUser := new(kubeletv1beta1.KubeletConfiguration)
			if err := json.Unmarshal([]byte(tt.wantUser), wantUser); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantUser, res.User); diff != "" {
				t.Errorf("User (-want +got):\n%s", diff)
			}
			wantUserDoc := tt.wantUserDoc
			if wantUserDoc == "" {
				wantUserDoc = tt.wantUser
			}
			if diff := cmp.Diff(jsonValue(t, wantUserDoc), jsonValue(t, string(res.UserDocument))); diff != "" {
				t.Errorf("UserDocument (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarn, res.Warnings); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return v
}

// TestValidateNotDefaulted checks that the package functions return what the
// user set, while validating the defaulted copy.
func TestValidateNotDefaulted(t *testing.T) {
	doc := header + "maxPods: 50\nauthentication:\n  webhook:\n    cacheTTL: 5m\n"
	want := &kubeletv1beta1.KubeletConfiguration{MaxPods: 50}
	want.APIVersion, want.Kind = "kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"
	want.Authentication.Webhook.CacheTTL.Duration = 5 * 60 * 1e9

	got, err := ValidateKubeletConfiguration([]byte(doc), "kubelet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ValidateKubeletConfiguration (-want +got):\n%s", diff)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	got, err = ValidateKubeletConfigurationMap(m, "kubelet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ValidateKubeletConfigurationMap (-want +got):\n%s", diff)
	}
	// The defaulted copy was validated: a value that is only invalid
	// against a default (imageGCLowThresholdPercent above the default high
	// threshold of 85) is refused.
	_, err = ValidateKubeletConfiguration([]byte(header+"imageGCLowThresholdPercent: 90\n"), "kubelet.yaml")
	const wantErr = "kubelet.yaml: imageGCLowThresholdPercent: Invalid value: 90: must be less than imageGCHighThresholdPercent (85)"
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) {
		t.Errorf("error = %v, want it to start with %q", err, wantErr)
	}
}

// TestValidateMapDoesNotMutate checks the map entry point against the byte
// one and that neither the caller's map nor the returned objects alias.
func TestValidateMapDoesNotMutate(t *testing.T) {
	v := eksaValidator(t, EKSAProposedPolicy, ProviderNutanix, EKSAOptions{ResolvConf: "/etc/r.conf"})
	build := func() map[string]any {
		return map[string]any{
			"apiVersion":     "kubelet.config.k8s.io/v1beta1",
			"kind":           "KubeletConfiguration",
			"maxPods":        int64(64),
			"resolvConf":     "/etc/mine.conf",
			"clusterDNS":     []any{"10.96.0.10"},
			"systemReserved": map[string]any{"cpu": "500m"},
			"featureGates":   map[string]any{"MemoryQoS": true},
		}
	}
	obj, pristine := build(), build()
	res, err := v.ValidateMap(obj, "spec.kubeletConfiguration")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pristine, obj); diff != "" {
		t.Errorf("ValidateMap modified its argument (-before +after):\n%s", diff)
	}
	// Changing the result must not reach the caller's map.
	res.Config.ClusterDNS[0] = "1.1.1.1"
	res.Config.SystemReserved["cpu"] = "1"
	res.User.ClusterDNS[0] = "1.1.1.1"
	if diff := cmp.Diff(pristine, obj); diff != "" {
		t.Errorf("result aliases the caller's map (-before +after):\n%s", diff)
	}
	data, err := yaml.Marshal(pristine)
	if err != nil {
		t.Fatal(err)
	}
	fromBytes, err := v.Validate(data, "spec.kubeletConfiguration")
	if err != nil {
		t.Fatal(err)
	}
	res2, err := v.ValidateMap(build(), "spec.kubeletConfiguration")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jsonValue(t, string(fromBytes.Document)), jsonValue(t, string(res2.Document))); diff != "" {
		t.Errorf("map and bytes disagree (-bytes +map):\n%s", diff)
	}
	if diff := cmp.Diff(fromBytes.Warnings, res2.Warnings); diff != "" {
		t.Errorf("warnings differ (-bytes +map):\n%s", diff)
	}
}

// TestValidateDoesNotMutateBytes checks the byte entry point leaves its input alone.
func TestValidateDoesNotMutateBytes(t *testing.T) {
	v := eksaValidator(t, EKSAAlternatePolicy, ProviderDocker, EKSAOptions{})
	data := []byte(header + "evictionHard:\n  memory.available: 1Gi\nmaxPods: 30\n")
	pristine := append([]byte(nil), data...)
	if _, err := v.Validate(data, "kubelet.yaml"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(pristine), string(data)); diff != "" {
		t.Errorf("Validate modified its input (-before +after):\n%s", diff)
	}
}

// TestValidateMapUnmarshallable checks that values with no JSON form are
// reported with their paths, all at once.
func TestValidateMapUnmarshallable(t *testing.T) {
	obj := map[string]any{
		"apiVersion":             "kubelet.config.k8s.io/v1beta1",
		"kind":                   "KubeletConfiguration",
		"evictionHard":           map[any]any{"memory.available": "1Gi"},
		"clusterDNS":             []any{"10.96.0.10", func() {}},
		"memoryThrottlingFactor": ptr.To(nan()),
	}
	_, err := ValidateKubeletConfigurationMap(obj, "kc")
	want := "kc: clusterDNS[1]: a value of type func() has no JSON form\n" +
		"kc: evictionHard: a map with interface {} keys has no JSON form; keys must be strings\n" +
		"kc: memoryThrottlingFactor: value NaN has no JSON form"
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

// TestValidateName checks the document-name rules.
func TestValidateName(t *testing.T) {
	v := eksaValidator(t, EKSAProposedPolicy, ProviderDocker, EKSAOptions{})
	for _, tt := range []struct{ name, want string }{
		{"", "provision: document has no name"},
		{"eks-a", `provision: document name "eks-a" is reserved for the platform's or the default values`},
		{"defaults", `provision: document name "defaults" is reserved for the platform's or the default values`},
	} {
		t.Run(tt.want, func(t *testing.T) {
			_, err := v.Validate([]byte(header), tt.name)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestNewValidatorBadPolicy checks that a policy that cannot work is refused
// up front, with every problem named.
func TestNewValidatorBadPolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		want   string
	}{{
		name: "rule, value and blocked that do not go together",
		policy: Policy{Fields: []Field{
			{Path: "readOnlyPort", Value: 0, Blocked: true, Rule: merge.PlatformWins},
			{Path: "resolvConf", Rule: merge.UserWins},
			{Path: "maxPods", Value: 10},
			{Path: ""},
		}},
		want: "provision: policy: fields[0] readOnlyPort: a blocked field takes no rule; " +
			"fields[1] resolvConf: no value; only a blocked field may have none; " +
			"fields[2] maxPods: rule Rule(0): want PlatformWins, UserWins or ErrorIfBoth, or Blocked; " +
			"fields[3]: no path",
	}, {
		name:   "listed twice",
		policy: Policy{Fields: []Field{{Path: "providerID", Blocked: true}, {Path: "providerID", Blocked: true}}},
		want:   "provision: policy: fields[1] providerID: listed twice",
	}, {
		name:   "not a field",
		policy: Policy{Fields: []Field{{Path: "cloudProvider", Blocked: true}}},
		want:   `provision: merge: policy: locked: field path "cloudProvider": no field "cloudProvider" in v1beta1.KubeletConfiguration`,
	}, {
		name:   "platform value of the wrong type",
		policy: Policy{Fields: []Field{{Path: "maxPods", Value: "many", Rule: merge.UserWins}}},
		want:   `provision: merge: policy: platform[0]: maxPods: expected int32, got string "many"`,
	}, {
		name: "null map values and list elements in platform values",
		policy: Policy{Fields: []Field{
			{Path: "evictionHard", Value: map[string]any{"memory.available": nil, "nodefs.available": "5%"}, Blocked: true},
			{Path: "clusterDNS", Value: []any{"10.96.0.10", nil}, Rule: merge.PlatformWins},
			{Path: "featureGates[MemoryQoS]", Value: false, Rule: merge.UserWins},
		}},
		want: "provision: policy: fields[0] evictionHard[memory.available]: null is not a value: remove the key to leave it out (an empty map is {}); " +
			"fields[1] clusterDNS[1]: null is not a value: remove the element (an empty list is [])",
	}, {
		name:   "blocked value the kubelet refuses",
		policy: Policy{Owner: "acme", Fields: []Field{{Path: "readOnlyPort", Value: 70000, Blocked: true}}},
		want:   "provision: policy: the platform's values alone do not pass validation: merged config: readOnlyPort: Invalid value: 70000: must be 0 (disabled) or between 1 and 65535, inclusive (set by acme)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewValidator(tt.policy)
			if err == nil {
				t.Fatal("NewValidator succeeded")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSplitPath checks the path notation userView relies on.
func TestSplitPath(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"readOnlyPort", []string{"readOnlyPort"}},
		{"authentication.anonymous.enabled", []string{"authentication", "anonymous", "enabled"}},
		{"featureGates[Some.Gate]", []string{"featureGates", "Some.Gate"}},
		{"a[b].c", []string{"a", "b", "c"}},
	} {
		t.Run(tt.in, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, splitPath(tt.in)); diff != "" {
				t.Errorf("splitPath (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidatorConcurrent shares one Validator between goroutines; run with
// -race it checks the "read-only" claim, and each result must equal the
// sequential one.
func TestValidatorConcurrent(t *testing.T) {
	v := eksaValidator(t, EKSAProposedPolicy, ProviderNutanix, EKSAOptions{ResolvConf: "/etc/r.conf"})
	docs := []string{
		header + "maxPods: 10\n",
		header + "resolvConf: /x\n",
		header + "evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\n",
		header + "readOnlyPort: 1\n",
	}
	want := make([]string, len(docs))
	for i, d := range docs {
		res, err := v.Validate([]byte(d), "kubelet.yaml")
		if err != nil {
			want[i] = err.Error()
		} else {
			want[i] = string(res.Document)
		}
	}
	got := make([]string, len(docs)*8)
	done := make(chan struct{})
	for i := range got {
		go func() {
			defer func() { done <- struct{}{} }()
			res, err := v.Validate([]byte(docs[i%len(docs)]), "kubelet.yaml")
			if err != nil {
				got[i] = err.Error()
			} else {
				got[i] = string(res.Document)
			}
		}()
	}
	for range got {
		<-done
	}
	for i := range got {
		if got[i] != want[i%len(docs)] {
			t.Errorf("goroutine %d: got %s, want %s", i, got[i], want[i%len(docs)])
		}
	}
}
