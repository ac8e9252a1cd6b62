package kubeproxy

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestDefaultGolden compares the defaulted form of a few inputs, rendered as
// YAML, with the files in testdata/. Run with -update to rewrite them after a
// deliberate change, and review the diff.
func TestDefaultGolden(t *testing.T) {
	tests := []struct {
		golden string
		in     v1alpha1.KubeProxyConfiguration
	}{
		{"defaulted-empty.yaml", v1alpha1.KubeProxyConfiguration{}},
		{"defaulted-ipv6.yaml", v1alpha1.KubeProxyConfiguration{BindAddress: "fd00::10", Mode: "nftables"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			cfg := tt.in.DeepCopy()
			cfg.TypeMeta = metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"}
			Profile{}.Default(cfg)
			got, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatalf("update %s: %v", path, err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs (-golden +got):\n%s", path, diff)
			}
			// The golden file must also read back to the same object.
			var back v1alpha1.KubeProxyConfiguration
			if err := yaml.UnmarshalStrict(want, &back); err != nil {
				t.Fatalf("golden file does not decode strictly: %v", err)
			}
			if errs := (Profile{}).Validate(&back); len(errs) != 0 {
				t.Errorf("golden file does not validate: %v", errs)
			}
		})
	}
}

// allSet returns a configuration in which every field that Default fills
// holds a value different from its default.
func allSet() *v1alpha1.KubeProxyConfiguration {
	return &v1alpha1.KubeProxyConfiguration{
		FeatureGates: map[string]bool{"LoggingAlphaOptions": true},
		ClientConnection: componentbaseconfig.ClientConnectionConfiguration{
			ContentType: "application/json", QPS: 50, Burst: 100,
		},
		Logging: logsapi.LoggingConfiguration{
			Format:         "json",
			FlushFrequency: logsapi.TimeOrMetaDuration{Duration: metav1.Duration{Duration: time.Second}},
			Options: logsapi.FormatOptions{
				Text: logsapi.TextOptions{OutputRoutingOptions: logsapi.OutputRoutingOptions{
					InfoBufferSize: resource.QuantityValue{Quantity: resource.MustParse("1Mi")}}},
				JSON: logsapi.JSONOptions{OutputRoutingOptions: logsapi.OutputRoutingOptions{
					InfoBufferSize: resource.QuantityValue{Quantity: resource.MustParse("2Mi")}}},
			},
		},
		BindAddress:        "10.1.2.3",
		HealthzBindAddress: "10.1.2.3:1234",
		MetricsBindAddress: "0.0.0.0:4321",
		IPTables: v1alpha1.KubeProxyIPTablesConfiguration{
			MasqueradeBit:      ptr.To[int32](0),
			LocalhostNodePorts: ptr.To(false),
			SyncPeriod:         dur(time.Minute),
			MinSyncPeriod:      dur(2 * time.Second),
		},
		IPVS: v1alpha1.KubeProxyIPVSConfiguration{SyncPeriod: dur(time.Minute)},
		NFTables: v1alpha1.KubeProxyNFTablesConfiguration{
			MasqueradeBit: ptr.To[int32](3),
			SyncPeriod:    dur(time.Minute),
			MinSyncPeriod: dur(3 * time.Second),
		},
		OOMScoreAdj: ptr.To[int32](0),
		Conntrack: v1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptr.To[int32](0),
			Min:                   ptr.To[int32](0),
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
		},
		ConfigSyncPeriod: dur(time.Minute),
	}
}

// TestDefaultNeverOverwrites checks that a configuration with every
// defaulted field set comes out of Default unchanged, including explicit
// zeros in pointer fields (maxPerCore: 0 means "leave the kernel alone").
func TestDefaultNeverOverwrites(t *testing.T) {
	cfg := allSet()
	want := cfg.DeepCopy()
	Profile{}.Default(cfg)
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("Default changed set fields (-before +after):\n%s", diff)
	}
}

// TestAllSetCoversEveryDefault keeps allSet honest: every leaf field that
// Default fills on an empty configuration must be set, to another value, in
// allSet. A new default added without extending allSet fails here.
func TestAllSetCoversEveryDefault(t *testing.T) {
	defaults := &v1alpha1.KubeProxyConfiguration{}
	Profile{}.Default(defaults)
	set := allSet()
	var covered int
	walkLeaves(reflect.ValueOf(defaults).Elem(), reflect.ValueOf(set).Elem(), "", func(path string, def, got reflect.Value) {
		if def.IsZero() {
			return // not defaulted
		}
		covered++
		if got.IsZero() {
			t.Errorf("%s: allSet leaves it unset", path)
			return
		}
		if cmp.Equal(def.Interface(), got.Interface()) {
			t.Errorf("%s: allSet uses the default value %v", path, def.Interface())
		}
	})
	if covered < 20 {
		t.Errorf("walked only %d defaulted fields; the walk is broken", covered)
	}
}

// walkLeaves visits the fields of two values of the same struct type in
// step. A leaf is anything that is not a struct, or a struct with unexported
// fields (such as resource.Quantity), which is compared whole. Fields that
// are not serialized (json:"-") are not part of the document and skipped.
func walkLeaves(a, b reflect.Value, path string, visit func(path string, a, b reflect.Value)) {
	if a.Kind() != reflect.Struct || hasUnexported(a.Type()) {
		visit(path, a, b)
		return
	}
	for i := 0; i < a.NumField(); i++ {
		f := a.Type().Field(i)
		if f.Tag.Get("json") == "-" {
			continue
		}
		walkLeaves(a.Field(i), b.Field(i), path+"."+f.Name, visit)
	}
}

func hasUnexported(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if !t.Field(i).IsExported() {
			return true
		}
	}
	return false
}

// TestDefaultIdempotent checks that defaulting twice equals defaulting once.
func TestDefaultIdempotent(t *testing.T) {
	tests := []struct {
		name string
		in   *v1alpha1.KubeProxyConfiguration
	}{
		{"empty", &v1alpha1.KubeProxyConfiguration{}},
		{"all set", allSet()},
		{"bare IPs", &v1alpha1.KubeProxyConfiguration{HealthzBindAddress: "::", MetricsBindAddress: "127.0.0.1"}},
		{"garbage addresses", &v1alpha1.KubeProxyConfiguration{BindAddress: "x", HealthzBindAddress: "[::1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			once := tt.in.DeepCopy()
			Profile{}.Default(once)
			twice := once.DeepCopy()
			Profile{}.Default(twice)
			if diff := cmp.Diff(once, twice); diff != "" {
				t.Errorf("second Default changed the result (-once +twice):\n%s", diff)
			}
		})
	}
}

// TestDefaultListenAddresses covers how healthz and metrics addresses are
// derived from bindAddress and completed with their ports.
func TestDefaultListenAddresses(t *testing.T) {
	tests := []struct {
		name                               string
		bind, healthz, metrics             string
		wantBind, wantHealthz, wantMetrics string
	}{
		{"unset", "", "", "", "0.0.0.0", "0.0.0.0:10256", "127.0.0.1:10249"},
		{"IPv4 bind", "192.168.1.5", "", "", "192.168.1.5", "0.0.0.0:10256", "127.0.0.1:10249"},
		{"IPv6 bind", "fd00::5", "", "", "fd00::5", "[::]:10256", "[::1]:10249"},
		{"IPv4-mapped bind counts as IPv4", "::ffff:10.0.0.1", "", "", "::ffff:10.0.0.1", "0.0.0.0:10256", "127.0.0.1:10249"},
		{"invalid bind picks IPv6, as upstream", "not-an-ip", "", "", "not-an-ip", "[::]:10256", "[::1]:10249"},
		{"bare IPv4 gains port", "", "10.0.0.1", "10.0.0.2", "0.0.0.0", "10.0.0.1:10256", "10.0.0.2:10249"},
		{"bare IPv6 gains brackets and port", "", "::", "::1", "0.0.0.0", "[::]:10256", "[::1]:10249"},
		{"host:port kept", "", "10.0.0.1:1", "[::1]:2", "0.0.0.0", "10.0.0.1:1", "[::1]:2"},
		{"garbage kept for validation", "", "localhost", "[::1]", "0.0.0.0", "localhost", "[::1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &v1alpha1.KubeProxyConfiguration{BindAddress: tt.bind, HealthzBindAddress: tt.healthz, MetricsBindAddress: tt.metrics}
			Profile{}.Default(cfg)
			got := [3]string{cfg.BindAddress, cfg.HealthzBindAddress, cfg.MetricsBindAddress}
			want := [3]string{tt.wantBind, tt.wantHealthz, tt.wantMetrics}
			if got != want {
				t.Errorf("bind, healthz, metrics = %q, want %q", got, want)
			}
		})
	}
}

// TestDefaultZeroMeansUnset documents the upstream rule for non-pointer
// fields: an explicit zero duration cannot be told from an absent one.
func TestDefaultZeroMeansUnset(t *testing.T) {
	var cfg v1alpha1.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict([]byte("iptables:\n  minSyncPeriod: 0s\nipvs:\n  minSyncPeriod: 0s\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	Profile{}.Default(&cfg)
	got := [2]time.Duration{cfg.IPTables.MinSyncPeriod.Duration, cfg.IPVS.MinSyncPeriod.Duration}
	if want := [2]time.Duration{time.Second, 0}; got != want {
		t.Errorf("iptables, ipvs minSyncPeriod = %v, want %v", got, want)
	}
}

func TestDefaultNil(t *testing.T) {
	Profile{}.Default(nil) // must not panic
}
