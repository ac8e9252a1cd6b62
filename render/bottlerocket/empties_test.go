package bottlerocket

import (
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// TestExplicitEmptyUnsupportedFields checks that a field Bottlerocket has
// no setting for is reported when the user set it to an empty map or list:
// tlsCipherSuites: [] (Go's default suites) or enforceNodeAllocatable: []
// (enforce nothing) mean something to the kubelet, and Bottlerocket would
// silently use its own values instead.
func TestExplicitEmptyUnsupportedFields(t *testing.T) {
	c := kc{
		MaxPods:                50,
		TLSCipherSuites:        []string{},
		EnforceNodeAllocatable: []string{},
		FeatureGates:           map[string]bool{},
	}
	c.Logging.VModule = logsapi.VModuleConfiguration{}
	_, err := Render(&c)
	var ufe *UnsupportedFieldsError
	if !errors.As(err, &ufe) {
		t.Fatalf("Render error = %v, want an *UnsupportedFieldsError", err)
	}
	if diff := cmp.Diff([]string{"enforceNodeAllocatable", "featureGates", "logging", "tlsCipherSuites"}, ufe.Fields); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

// TestExplicitEmptySupportedFields checks each mapped map or list field set
// to empty: either the empty value means to the kubelet what leaving the
// Bottlerocket setting unset gives it (and nothing is written), or it is an
// *InvalidValueError naming the field.
func TestExplicitEmptySupportedFields(t *testing.T) {
	tests := []struct {
		name string
		set  func(*kc)
		// want is the error text; empty means the field renders to nothing.
		want string
	}{
		{"evictionHard", func(c *kc) { c.EvictionHard = map[string]string{} },
			"evictionHard: cannot be expressed as Bottlerocket settings.kubernetes.eviction-hard: an empty map would disable hard eviction in the kubelet, " +
				"but Bottlerocket treats an empty table as unset and the kubelet's default thresholds would apply"},
		{"kubeReserved", func(c *kc) { c.KubeReserved = map[string]string{} },
			"kubeReserved: cannot be expressed as Bottlerocket settings.kubernetes.kube-reserved: an empty map reserves nothing for Kubernetes components, " +
				"but Bottlerocket always reserves cpu, memory and ephemeral-storage (its defaults for the resources the table leaves out)"},
		{"clusterDNS", func(c *kc) { c.ClusterDNS = []string{} },
			"clusterDNS: cannot be expressed as Bottlerocket settings.kubernetes.cluster-dns-ip: an empty list gives the kubelet no cluster DNS, " +
				"but Bottlerocket treats an empty list as unset, and an unset cluster-dns-ip is filled in with the cluster's DNS address"},
		{"evictionSoft", func(c *kc) { c.EvictionSoft = map[string]string{} }, ""},
		{"evictionSoftGracePeriod", func(c *kc) { c.EvictionSoftGracePeriod = map[string]string{} }, ""},
		{"systemReserved", func(c *kc) { c.SystemReserved = map[string]string{} }, ""},
		{"allowedUnsafeSysctls", func(c *kc) { c.AllowedUnsafeSysctls = []string{} }, ""},
		{"cpuManagerPolicyOptions", func(c *kc) { c.CPUManagerPolicyOptions = map[string]string{} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c kc
			tt.set(&c)
			out, err := Render(&c)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Render: %v", err)
				}
				if diff := cmp.Diff(header, string(out)); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("Render succeeded with\n%s\nwant an error", out)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			var ive *InvalidValueError
			if !errors.As(err, &ive) || ive.Field != tt.name {
				t.Errorf("error is not an *InvalidValueError for %s: %#v", tt.name, err)
			}
		})
	}
}

// TestEveryMappedFieldEmpty sets each mapped map or list field to empty in
// turn: it renders to nothing exactly when SupportedFields says
// EmptyIsUnset, and is an *InvalidValueError for that field otherwise.
func TestEveryMappedFieldEmpty(t *testing.T) {
	for _, m := range SupportedFields() {
		var c kc
		f := fieldByJSON(reflect.ValueOf(&c).Elem(), m.Field)
		switch f.Kind() {
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		default:
			continue
		}
		t.Run(m.Field, func(t *testing.T) {
			out, err := Render(&c)
			if m.EmptyIsUnset {
				if err != nil || string(out) != header {
					t.Errorf("Render = %q, %v; want just the header", out, err)
				}
				return
			}
			var ive *InvalidValueError
			if !errors.As(err, &ive) || ive.Field != m.Field || ive.Setting != m.Setting {
				t.Errorf("Render error = %v, want an *InvalidValueError for %s (%s)", err, m.Field, m.Setting)
			}
		})
	}
}

// fieldByJSON returns the field of struct v whose JSON name is name.
func fieldByJSON(v reflect.Value, name string) reflect.Value {
	for i := 0; i < v.NumField(); i++ {
		if f := v.Type().Field(i); !f.Anonymous && jsonName(f) == name {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}
