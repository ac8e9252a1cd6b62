package bottlerocket

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// FuzzRender decodes arbitrary JSON into a KubeletConfiguration and renders
// it. Render must never panic, never modify its input, and either fail with
// only typed errors or produce valid TOML made of known settings, the same
// bytes every time. A top-level map or list that is explicitly empty must
// never be dropped silently: it is reported (unsupported, or an invalid
// value naming it) unless SupportedFields says EmptyIsUnset. The same JSON
// goes to RenderDocument, where no field the document sets may be dropped,
// explicit zero values included (checkRenderDocument).
func FuzzRender(f *testing.F) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			f.Fatalf("%s: %v", in, err)
		}
		f.Add(j)
	}
	for _, seed := range []string{
		`{}`,
		`{"maxPods":-1,"evictionHard":{}}`,
		`{"allowedUnsafeSysctls":["a\"b\\c\n","\u2028"]}`,
		`{"clusterDNS":["::1"],"clusterDomain":"ex ample"}`,
		`{"evictionSoftGracePeriod":{"memory.available":"1.5us"},"shutdownGracePeriod":"-1s"}`,
		`{"cpuManagerPolicyOptions":{"full-pcpus-only":"false","align-by-socket":"1"}}`,
		`{"kubeReserved":{"cpu":"1E3","memory":"1e-3"},"containerLogMaxSize":"10 MB"}`,
		`{"authentication":{"anonymous":{"enabled":false}},"logging":{"format":"json"}}`,
		`{"imageGCHighThresholdPercent":101,"podPidsLimit":-1,"cpuCFSQuota":false}`,
		`{"tlsCipherSuites":[],"kubeReserved":{},"evictionSoft":{},"maxPods":10}`,
		`{"clusterDNS":[],"systemReserved":{},"logging":{"vmodule":[]}}`,
		`{"featureGates":{},"allowedUnsafeSysctls":[],"cpuManagerPolicyOptions":{}}`,
		`{"maxPods":0,"serverTLSBootstrap":false,"eventBurst":0,"kubeAPIBurst":0,"registryBurst":0}`,
		`{"evictionMaxPodGracePeriod":0,"shutdownGracePeriod":"0s","cpuManagerReconcilePeriod":"0s","cpuCFSQuota":false}`,
		`{"clusterDomain":"","containerLogMaxSize":"","cpuManagerPolicy":"","providerID":"","topologyManagerScope":""}`,
		`{"readOnlyPort":0,"serializeImagePulls":false,"staticPodPath":"","maxPods":null,"serverTLSBootstrap":true}`,
		`{"evictionHard":{"memory.available":null},"clusterDNS":[null]}`,
	} {
		f.Add([]byte(seed))
	}
	known := map[string]bool{}
	mapped := map[string]FieldMapping{}
	for _, m := range SupportedFields() {
		known[strings.TrimPrefix(m.Setting, settingsPrefix)] = true
		mapped[m.Field] = m
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		checkRenderDocument(t, data, mapped)
		var c kc
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		before := c.DeepCopy()
		out, err := Render(&c)
		if diff := cmp.Diff(before, &c); diff != "" {
			t.Fatalf("Render modified its input (-before +after):\n%s", diff)
		}
		reported := map[string]bool{}
		if err != nil {
			if out != nil {
				t.Errorf("Render returned output %q with an error", out)
			}
			checkTyped(t, err)
			collectFields(err, reported)
		}
		for _, name := range explicitlyEmpty(&c) {
			if m, ok := mapped[name]; ok && m.EmptyIsUnset {
				continue
			}
			if !reported[name] {
				t.Errorf("explicitly empty %s was neither rendered nor reported: err = %v", name, err)
			}
		}
		if err != nil {
			return
		}
		doc, perr := parseTOML(string(out))
		if perr != nil {
			t.Fatalf("output is not valid TOML: %v\n%s", perr, out)
		}
		k8s, _ := doc["settings"].(map[string]any)["kubernetes"].(map[string]any)
		if k8s == nil {
			t.Fatalf("no [settings.kubernetes] in output:\n%s", out)
		}
		for key := range k8s {
			if !known[key] {
				t.Errorf("unknown setting %q in output", key)
			}
		}
		if got, want := k8s["allowed-unsafe-sysctls"], c.AllowedUnsafeSysctls; got != nil {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("allowed-unsafe-sysctls did not round-trip (-in +out):\n%s", diff)
			}
		}
		again, err := Render(&c)
		if err != nil || !bytes.Equal(again, out) {
			t.Errorf("second Render differs: %v", err)
		}
	})
}

// checkTyped fails unless every leaf of err is one of the package's typed
// errors (the nil-config error cannot happen here).
func checkTyped(t *testing.T, err error) {
	t.Helper()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			checkTyped(t, e)
		}
		return
	}
	var ufe *UnsupportedFieldsError
	var ive *InvalidValueError
	if !errors.As(err, &ufe) && !errors.As(err, &ive) {
		t.Errorf("untyped error %T: %v", err, err)
	}
}

// collectFields records the top-level fields err names: the unsupported
// ones and those of invalid values.
func collectFields(err error, out map[string]bool) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collectFields(e, out)
		}
		return
	}
	var ufe *UnsupportedFieldsError
	if errors.As(err, &ufe) {
		for _, f := range ufe.Fields {
			out[f] = true
		}
	}
	var ive *InvalidValueError
	if errors.As(err, &ive) {
		out[ive.Field] = true
	}
}

// explicitlyEmpty returns the JSON names of the top-level map and list
// fields of c that are not nil but empty, and of the struct fields that
// hold such a map or list at any depth.
func explicitlyEmpty(c *kc) []string {
	var out []string
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Anonymous {
			continue
		}
		if hasExplicitEmpty(v.Field(i)) {
			out = append(out, jsonName(f))
		}
	}
	return out
}

func hasExplicitEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return !v.IsNil() && v.Len() == 0
	case reflect.Pointer:
		return !v.IsNil() && hasExplicitEmpty(v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && hasExplicitEmpty(v.Field(i)) {
				return true
			}
		}
	}
	return false
}

// checkRenderDocument renders data with RenderDocument. When it decodes,
// every field it sets (not null) must be accounted for: named in the error,
// or, once every named field is removed from the document, rendered (its
// setting in the output, holding 0 or false where the document has 0 or
// false). The only fields that may render to nothing are an empty value of
// an EmptyIsUnset field and cpuManagerPolicyOptions holding no option set
// to true (an option set to false is the kubelet's default).
func checkRenderDocument(t *testing.T, data []byte, mapped map[string]FieldMapping) {
	t.Helper()
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return
	}
	out, err := RenderDocument(data)
	if err != nil && strings.HasPrefix(err.Error(), "bottlerocket: document: ") {
		return // not a KubeletConfiguration document (or a null entry)
	}
	if err != nil {
		checkTyped(t, err)
		named := map[string]bool{}
		collectFields(err, named)
		for name := range named {
			top, _, _ := strings.Cut(name, "[")
			named[top] = true
		}
		rest := map[string]json.RawMessage{}
		for k, v := range top {
			if !named[k] {
				rest[k] = v
			}
		}
		data, _ = json.Marshal(rest)
		if out, err = RenderDocument(data); err != nil {
			t.Fatalf("with every field the first error named removed, RenderDocument fails again: %v\n%s", err, data)
		}
		top = rest
	}
	doc, perr := parseTOML(string(out))
	if perr != nil {
		t.Fatalf("RenderDocument output is not valid TOML: %v\n%s", perr, out)
	}
	k8s, _ := doc["settings"].(map[string]any)["kubernetes"].(map[string]any)
	for k, raw := range top {
		v := strings.TrimSpace(string(raw))
		if k == "apiVersion" || k == "kind" || v == "null" {
			continue
		}
		m, ok := mapped[k]
		if !ok {
			t.Errorf("%s: set but neither reported unsupported nor rendered:\n%s", k, data)
			continue
		}
		got, ok := k8s[strings.TrimPrefix(m.Setting, settingsPrefix)]
		if !ok {
			if (m.EmptyIsUnset && (v == "{}" || v == "[]")) || k == "cpuManagerPolicyOptions" {
				continue
			}
			t.Errorf("%s: %s was dropped: not in the output and not reported\n%s\n%s", k, v, data, out)
			continue
		}
		if (v == "0" && got != int64(0)) || (v == "false" && got != false) {
			t.Errorf("%s: %s rendered as %v", k, v, got)
		}
	}
}
