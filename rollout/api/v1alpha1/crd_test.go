package v1alpha1

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const crdPath = "../../../deploy/rollout/dynconfig.io_configrollouts.yaml"

// crdSchema is the part of the checked-in CRD the test reads.
type crdSchema struct {
	Kind string `json:"kind"`
	Spec struct {
		Group string `json:"group"`
		Scope string `json:"scope"`
		Names struct {
			Kind   string `json:"kind"`
			Plural string `json:"plural"`
		} `json:"names"`
		Versions []struct {
			Name         string                                `json:"name"`
			Served       bool                                  `json:"served"`
			Storage      bool                                  `json:"storage"`
			Subresources map[string]any                        `json:"subresources"`
			Schema       struct{ OpenAPIV3Schema *jsonSchema } `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// jsonSchema is an OpenAPI v3 schema, as much of it as the test compares.
type jsonSchema struct {
	Type                 string                 `json:"type"`
	Properties           map[string]*jsonSchema `json:"properties"`
	Items                *jsonSchema            `json:"items"`
	AdditionalProperties *jsonSchema            `json:"additionalProperties"`
	Required             []string               `json:"required"`
	IntOrString          bool                   `json:"x-kubernetes-int-or-string"`
	Enum                 []string               `json:"enum"`
}

func readCRD(t *testing.T) *crdSchema {
	t.Helper()
	b, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatalf("read the CRD: %v", err)
	}
	var crd crdSchema
	if err := yaml.UnmarshalStrict(b, &crd, yaml.DisallowUnknownFields); err != nil {
		// The CRD has fields the test does not model; strictness is for
		// what it does model, so fall back to a lenient decode.
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", crdPath, err)
		}
	}
	return &crd
}

func TestCRDIdentity(t *testing.T) {
	crd := readCRD(t)
	if crd.Kind != "CustomResourceDefinition" || crd.Spec.Group != Group || crd.Spec.Names.Kind != Kind ||
		crd.Spec.Names.Plural != Resource || crd.Spec.Scope != "Namespaced" {
		t.Fatalf("%s: kind %q group %q names %+v scope %q, want a Namespaced CustomResourceDefinition of %s %s/%s",
			crdPath, crd.Kind, crd.Spec.Group, crd.Spec.Names, crd.Spec.Scope, Kind, Group, Resource)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: %d versions, want 1", crdPath, len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != Version || !v.Served || !v.Storage {
		t.Errorf("%s: version %q served %v storage %v, want %s served and stored", crdPath, v.Name, v.Served, v.Storage, Version)
	}
	if _, ok := v.Subresources["status"]; !ok {
		t.Errorf("%s: no status subresource", crdPath)
	}
}

// TestCRDMatchesTypes walks the Go types and the CRD's schema together: every
// JSON field of the types is in the schema with a matching type, and the
// schema has no field the types lack. A type changed without
// `go generate ./rollout/api/v1alpha1` fails here.
func TestCRDMatchesTypes(t *testing.T) {
	crd := readCRD(t)
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	if root == nil {
		t.Fatalf("%s: no openAPIV3Schema", crdPath)
	}
	for _, field := range []string{"spec", "status"} {
		if root.Properties[field] == nil {
			t.Fatalf("%s: no %s in the schema", crdPath, field)
		}
	}
	typ := reflect.TypeFor[ConfigRollout]()
	compareSchema(t, "spec", reflect.TypeFor[ConfigRolloutSpec](), root.Properties["spec"])
	compareSchema(t, "status", reflect.TypeFor[ConfigRolloutStatus](), root.Properties["status"])
	if got, want := root.Required, []string{"spec"}; !slices.Equal(got, want) {
		t.Errorf("%s: required %v, want %v (from %v)", crdPath, got, want, typ)
	}
}

var (
	timeType        = reflect.TypeFor[metav1.Time]()
	durationType    = reflect.TypeFor[metav1.Duration]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)

// compareSchema reports every difference between Go type typ and schema s at
// path.
func compareSchema(t *testing.T, path string, typ reflect.Type, s *jsonSchema) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == timeType:
		wantType(t, path, s, "string")
		return
	case typ == durationType:
		wantType(t, path, s, "string")
		return
	case typ == intOrStringType:
		if !s.IntOrString {
			t.Errorf("%s: want x-kubernetes-int-or-string", path)
		}
		return
	}
	switch typ.Kind() {
	case reflect.String:
		wantType(t, path, s, "string")
	case reflect.Bool:
		wantType(t, path, s, "boolean")
	case reflect.Int32, reflect.Int64, reflect.Int:
		wantType(t, path, s, "integer")
	case reflect.Slice:
		wantType(t, path, s, "array")
		if s.Items == nil {
			t.Errorf("%s: array without items", path)
			return
		}
		compareSchema(t, path+"[]", typ.Elem(), s.Items)
	case reflect.Map:
		wantType(t, path, s, "object")
		if s.AdditionalProperties != nil {
			compareSchema(t, path+"{}", typ.Elem(), s.AdditionalProperties)
		}
	case reflect.Struct:
		wantType(t, path, s, "object")
		fields := jsonFields(typ)
		var required []string
		for name, f := range fields {
			sub := s.Properties[name]
			if sub == nil {
				t.Errorf("%s.%s: in the Go type, not in the CRD", path, name)
				continue
			}
			if f.required {
				required = append(required, name)
			}
			compareSchema(t, path+"."+name, f.typ, sub)
		}
		for name := range s.Properties {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s.%s: in the CRD, not in the Go type", path, name)
			}
		}
		// The status is the controller's: every field is optional there,
		// zeros included, so only the spec's required fields are compared.
		if strings.HasPrefix(path, "spec") {
			slices.Sort(required)
			got := slices.Sorted(slices.Values(s.Required))
			if diff := cmp.Diff(required, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: required fields (-Go +CRD):\n%s", path, diff)
			}
		}
	default:
		t.Errorf("%s: the test does not know Go kind %v", path, typ.Kind())
	}
}

func wantType(t *testing.T, path string, s *jsonSchema, want string) {
	t.Helper()
	if s.Type != want {
		t.Errorf("%s: CRD type %q, want %q", path, s.Type, want)
	}
}

type jsonField struct {
	typ      reflect.Type
	required bool
}

// jsonFields lists typ's JSON fields, inlined ones flattened. A field is
// required when it has neither omitempty nor an +optional marker, which
// the test approximates by omitempty or a pointer.
func jsonFields(typ reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") {
			for n, sub := range jsonFields(f.Type) {
				out[n] = sub
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, required: !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer}
	}
	return out
}
