package provision_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/provision"
	"github.com/dynconfig/dynconfig/render/bottlerocket"
	"github.com/dynconfig/dynconfig/render/kubeadm"
)

// emptiable is a map or list field FuzzExplicitEmpties writes, with a
// valid value that has entries.
type emptiable struct {
	path   []string // JSON field names from the document root
	sample any      // map[string]any or []any
}

var emptiables = []emptiable{
	{[]string{"evictionHard"}, map[string]any{"memory.available": "100Mi"}},
	{[]string{"evictionSoft"}, map[string]any{"memory.available": "200Mi"}},
	{[]string{"evictionSoftGracePeriod"}, map[string]any{"memory.available": "1m"}},
	{[]string{"evictionMinimumReclaim"}, map[string]any{"memory.available": "10Mi"}},
	{[]string{"featureGates"}, map[string]any{"MemoryQoS": false}},
	{[]string{"systemReserved"}, map[string]any{"cpu": "100m"}},
	{[]string{"kubeReserved"}, map[string]any{"memory": "100Mi"}},
	{[]string{"cpuManagerPolicyOptions"}, map[string]any{"full-pcpus-only": "true"}},
	{[]string{"staticPodURLHeader"}, map[string]any{"X-A": []any{"b"}}},
	{[]string{"clusterDNS"}, []any{"10.96.0.10"}},
	{[]string{"tlsCipherSuites"}, []any{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}},
	{[]string{"allowedUnsafeSysctls"}, []any{"net.core.somaxconn"}},
	{[]string{"enforceNodeAllocatable"}, []any{"pods"}},
	{[]string{"registerWithTaints"}, []any{map[string]any{"key": "a", "effect": "NoSchedule"}}},
	{[]string{"logging", "vmodule"}, []any{map[string]any{"filePattern": "x", "verbosity": 2}}},
}

// The forms FuzzExplicitEmpties gives a field, chosen by one input byte.
const (
	formAbsent     = iota
	formEmpty      // {} or []
	formSample     // the sample
	formNull       // null: not set
	formNullEntry  // {k: null} or [null]
	formSampleNull // the sample plus a null entry
	numForms
)

// fuzzValidators are the policies the fuzz target picks from: none, and
// EKS Anywhere's presets, which block, replace (with a warning) or allow
// evictionHard and tlsCipherSuites.
func fuzzValidators(f *testing.F) []*provision.Validator {
	none, err := provision.NewValidator(provision.Policy{})
	if err != nil {
		f.Fatal(err)
	}
	vs := []*provision.Validator{none}
	for _, c := range []struct {
		preset   func(provision.EKSAOptions) (provision.Policy, error)
		provider provision.Provider
		allow    []string
	}{
		{provision.EKSAProposedPolicy, provision.ProviderVSphere, nil},
		{provision.EKSAAlternatePolicy, provision.ProviderDocker, nil},
		{provision.EKSAProposedPolicy, provision.ProviderNutanix, []string{"evictionHard", "tlsCipherSuites"}},
	} {
		managed, err := provision.EKSAManagedFields(c.provider)
		if err != nil {
			f.Fatal(err)
		}
		p, err := c.preset(provision.EKSAOptions{Managed: managed, Allow: c.allow})
		if err != nil {
			f.Fatal(err)
		}
		v, err := provision.NewValidator(p)
		if err != nil {
			f.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

// FuzzExplicitEmpties generates KubeletConfiguration documents whose map
// and list fields are absent, explicitly empty, set, null, or hold null
// entries (input byte 0 picks the policy, byte 1 YAML or JSON, byte 2+i
// the form of emptiables[i]) and follows each through every path:
// provision's validation, the kubeadm patches (from Document, and from the
// typed Config) applied over kubeadm's generated configuration and then
// defaulted like the kubelet does, and Bottlerocket's settings from User.
//
// A null entry must be an error naming its path, from Validate and from
// kubeadm.RenderDocument. An explicit empty the user wrote must, unless the
// platform replaced the field (with a warning), be in Document, Config,
// UserDocument and User, reach the kubelet's configuration through both
// kubeadm patches and both patch types with defaults applied, and be
// rendered as nothing by Bottlerocket only where SupportedFields says
// EmptyIsUnset, or else be named in Bottlerocket's error. Nothing may
// panic.
func FuzzExplicitEmpties(f *testing.F) {
	for i := range emptiables {
		for _, form := range []byte{formEmpty, formNull, formNullEntry, formSampleNull} {
			sel := make([]byte, 2+len(emptiables))
			sel[0], sel[1] = byte(i), byte(form)
			sel[2+i] = form
			f.Add(sel)
		}
	}
	all := make([]byte, 2+len(emptiables))
	for i := range emptiables {
		all[2+i] = formEmpty
	}
	for v := range byte(4) {
		all[0] = v
		f.Add(slices.Clone(all))
	}

	validators := fuzzValidators(f)
	base, err := os.ReadFile("../render/kubeadm/testdata/kubeadm-1.37-kubeletconfiguration.yaml")
	if err != nil {
		f.Fatal(err)
	}
	baseJSON, err := yaml.YAMLToJSON(base)
	if err != nil {
		f.Fatal(err)
	}
	emptyIsUnset := map[string]bool{}
	for _, m := range bottlerocket.SupportedFields() {
		emptyIsUnset[m.Field] = m.EmptyIsUnset
	}

	f.Fuzz(func(t *testing.T, sel []byte) {
		if len(sel) < 2 {
			return
		}
		v := validators[int(sel[0])%len(validators)]
		doc := map[string]any{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
		var empties []emptiable
		var nullPaths []string
		for i, e := range emptiables {
			form := formAbsent
			if 2+i < len(sel) {
				form = int(sel[2+i]) % numForms
			}
			val, nullPath := generate(e, form)
			if form == formAbsent {
				continue
			}
			setAt(doc, e.path, val)
			switch {
			case form == formEmpty:
				empties = append(empties, e)
			case nullPath != "":
				nullPaths = append(nullPaths, nullPath)
			}
		}
		var data []byte
		var err error
		if sel[1]%2 == 0 {
			data, err = json.Marshal(doc)
		} else {
			data, err = yaml.Marshal(doc)
		}
		if err != nil {
			t.Fatal(err)
		}

		res, err := v.Validate(data, "fuzz.yaml")
		if len(nullPaths) > 0 {
			if err == nil {
				t.Fatalf("null entries %v were accepted:\n%s\nDocument: %s", nullPaths, data, res.Document)
			}
			_, kerr := kubeadm.RenderDocument(data, kubeadm.Options{})
			for _, p := range nullPaths {
				if want := "fuzz.yaml: " + p + ": null is not a value"; !strings.Contains(err.Error(), want) {
					t.Errorf("Validate error does not contain %q:\n%v", want, err)
				}
				if want := "kubeadm: document: " + p + ": null is not a value"; kerr == nil || !strings.Contains(kerr.Error(), want) {
					t.Errorf("RenderDocument error does not contain %q: %v", want, kerr)
				}
			}
			return
		}
		if err != nil {
			var me *merge.Error
			if !errors.As(err, &me) {
				t.Fatalf("Validate error %T is not a *merge.Error: %v", err, err)
			}
			return // a value the kubelet or the policy refuses
		}

		// Every path, from the validated result.
		patches := map[string]*kubeletv1beta1.KubeletConfiguration{}
		for _, opts := range []kubeadm.Options{{}, {PatchType: kubeadm.Merge}} {
			p, err := kubeadm.RenderDocument(res.Document, opts)
			if err != nil {
				t.Fatalf("RenderDocument(Document): %v\n%s", err, res.Document)
			}
			patches["RenderDocument "+p.Name] = applyPatch(t, baseJSON, p)
			p, err = kubeadm.Render(res.Config, opts)
			if err != nil {
				t.Fatalf("Render(Config): %v", err)
			}
			patches["Render "+p.Name] = applyPatch(t, baseJSON, p)
		}
		brOut, brErr := bottlerocket.Render(res.User)
		brNamed := bottlerocketNames(brErr)
		// The document entry point, which tools use (it also sees zero
		// values), agrees on explicit empties.
		docOut, docErr := bottlerocket.RenderDocument(res.UserDocument)
		if string(docOut) != string(brOut) || fmt.Sprint(docErr) != fmt.Sprint(brErr) {
			t.Errorf("Bottlerocket: RenderDocument(UserDocument) = %q, %v; Render(User) = %q, %v", docOut, docErr, brOut, brErr)
		}

		for _, e := range empties {
			top, where := e.path[0], strings.Join(e.path, ".")
			if replaced(res.Warnings, top) {
				continue // the platform's value, by its rule
			}
			if !emptyJSONAt(t, res.Document, e.path) {
				t.Errorf("%s: Document does not have it empty:\n%s", where, res.Document)
			}
			if !emptyJSONAt(t, res.UserDocument, e.path) {
				t.Errorf("%s: UserDocument does not have it empty:\n%s", where, res.UserDocument)
			}
			defaulted := res.Config.DeepCopy()
			kubelet.Default(defaulted)
			for what, cfg := range map[string]*kubeletv1beta1.KubeletConfiguration{"Config": res.Config, "User": res.User, "defaulted Config": defaulted} {
				if !emptyGoAt(cfg, e.path) {
					t.Errorf("%s: %s does not have it empty", where, what)
				}
			}
			for what, cfg := range patches {
				kubelet.Default(cfg)
				if !emptyGoAt(cfg, e.path) {
					t.Errorf("%s: %s over kubeadm's configuration, defaulted, does not have it empty", where, what)
				}
			}
			if brErr == nil && !emptyIsUnset[top] {
				t.Errorf("%s: Bottlerocket rendered it as nothing (EmptyIsUnset is false):\n%s", where, brOut)
			}
			if brErr != nil && !emptyIsUnset[top] && !brNamed[top] {
				t.Errorf("%s: Bottlerocket's error does not name it: %v", where, brErr)
			}
		}
	})
}

// generate returns e's value in form, and the path of its null entry if it
// has one.
func generate(e emptiable, form int) (any, string) {
	path := strings.Join(e.path, ".")
	switch s := e.sample.(type) {
	case map[string]any:
		switch form {
		case formEmpty:
			return map[string]any{}, ""
		case formSample:
			return s, ""
		case formNullEntry:
			return map[string]any{"nulled": nil}, path + "[nulled]"
		case formSampleNull:
			m := map[string]any{"nulled": nil}
			for k, v := range s {
				m[k] = v
			}
			return m, path + "[nulled]"
		}
	case []any:
		switch form {
		case formEmpty:
			return []any{}, ""
		case formSample:
			return s, ""
		case formNullEntry:
			return []any{nil}, path + "[0]"
		case formSampleNull:
			return append(slices.Clone(s), nil), fmt.Sprintf("%s[%d]", path, len(s))
		}
	}
	return nil, "" // formAbsent, formNull
}

func setAt(doc map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := doc[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[p] = next
		}
		doc = next
	}
	doc[path[len(path)-1]] = v
}

// applyPatch applies p over kubeadm's generated configuration as kubeadm
// does, by the patch type in its name, and decodes the result strictly.
func applyPatch(t *testing.T, baseJSON []byte, p *kubeadm.Patch) *kubeletv1beta1.KubeletConfiguration {
	t.Helper()
	pj, err := yaml.YAMLToJSON(p.Content)
	if err != nil {
		t.Fatalf("patch %s is not YAML: %v\n%s", p.Name, err, p.Content)
	}
	var out []byte
	if strings.Contains(p.Name, "+merge") {
		out, err = jsonpatch.MergePatch(baseJSON, pj)
	} else {
		out, err = strategicpatch.StrategicMergePatch(baseJSON, pj, kubeletv1beta1.KubeletConfiguration{})
	}
	if err != nil {
		t.Fatalf("applying %s: %v\n%s", p.Name, err, p.Content)
	}
	cfg := new(kubeletv1beta1.KubeletConfiguration)
	if err := yaml.UnmarshalStrict(out, cfg); err != nil {
		t.Fatalf("%s applied does not decode: %v\n%s", p.Name, err, out)
	}
	return cfg
}

// replaced says whether a warning says the platform replaced field.
func replaced(warnings []string, field string) bool {
	for _, w := range warnings {
		if strings.Contains(w, ": "+field+": value replaced") {
			return true
		}
	}
	return false
}

// bottlerocketNames returns the top-level fields Bottlerocket's error names.
func bottlerocketNames(err error) map[string]bool {
	out := map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ufe *bottlerocket.UnsupportedFieldsError
		if errors.As(err, &ufe) {
			for _, f := range ufe.Fields {
				out[f] = true
			}
		}
		var ive *bottlerocket.InvalidValueError
		if errors.As(err, &ive) {
			top, _, _ := strings.Cut(ive.Field, "[")
			top, _, _ = strings.Cut(top, ".")
			out[top] = true
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// emptyJSONAt says whether the JSON document has {} or [] at path.
func emptyJSONAt(t *testing.T, doc []byte, path []string) bool {
	t.Helper()
	var cur any
	if err := json.Unmarshal(doc, &cur); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[p]; !ok {
			return false
		}
	}
	switch v := cur.(type) {
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// emptyGoAt says whether cfg has a non-nil empty map or slice at the JSON
// path.
func emptyGoAt(cfg *kubeletv1beta1.KubeletConfiguration, path []string) bool {
	v := reflect.ValueOf(cfg).Elem()
	for _, p := range path {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			if name == p {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return false
		}
	}
	return (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && !v.IsNil() && v.Len() == 0
}
