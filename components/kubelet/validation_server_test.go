package kubelet

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

func TestValidateServer(t *testing.T) {
	runValidationCases(t, []validationCase{
		{"ports at the edges", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Port, kc.ReadOnlyPort, kc.HealthzPort = 1, 65535, ptr.To[int32](0)
		}, nil},
		{"ports out of range", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Port, kc.ReadOnlyPort, kc.HealthzPort = 0, 65536, ptr.To[int32](-1)
		}, []fieldErr{invalid("port"), invalid("readOnlyPort"), invalid("healthzPort")}},
		{"addresses", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Address, kc.ClusterDNS, kc.PodCIDR = "::", []string{"10.96.0.10", "fd00::a"}, "fd00:10:244::/64"
		}, nil},
		{"addresses bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Address, kc.ClusterDNS, kc.PodCIDR = "localhost", []string{"10.96.0.10", "kube-dns"}, "10.244.0.0"
		}, []fieldErr{invalid("address"), invalid("clusterDNS[1]"), invalid("podCIDR")}},
		{"authorization AlwaysAllow", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow
		}, nil},
		{"authorization unknown", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.Authorization.Mode = "RBAC" },
			[]fieldErr{notSupported("authorization.mode")}},
		{"server TLS bootstrap", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ServerTLSBootstrap = true }, nil},
		{"server TLS bootstrap without gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ServerTLSBootstrap = true
			kc.FeatureGates = map[string]bool{gateRotateKubeletServerCertificate: false}
		}, []fieldErr{forbidden("serverTLSBootstrap")}},
		{"certificate with key", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSCertFile, kc.TLSPrivateKeyFile = "/pki/kubelet.crt", "/pki/kubelet.key"
		}, nil},
		{"certificate without key", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.TLSCertFile = "/pki/kubelet.crt" },
			[]fieldErr{required("tlsPrivateKeyFile")}},
		{"key without certificate", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.TLSPrivateKeyFile = "/pki/kubelet.key" },
			[]fieldErr{required("tlsCertFile")}},
		{"TLS settings", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSMinVersion = "VersionTLS13"
			kc.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"}
			kc.TLSCurvePreferences = []int32{29, 23, 4588} // X25519, P-256, X25519MLKEM768
		}, nil},
		{"TLS settings bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSMinVersion = "TLS1.2"
			kc.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_MAGIC"}
			kc.TLSCurvePreferences = []int32{23, 0, 23, 65535, 70000}
		}, []fieldErr{
			notSupported("tlsMinVersion"),
			invalid("tlsCipherSuites[1]"),
			invalid("tlsCurvePreferences[1]"),
			duplicate("tlsCurvePreferences[2]"),
			invalid("tlsCurvePreferences[3]"),
			invalid("tlsCurvePreferences[4]"),
		}},
	})
}

func TestValidateLogging(t *testing.T) {
	runValidationCases(t, []validationCase{
		{"json format", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.Logging.Format = "json" }, nil},
		{"json format without beta gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Logging.Format = "json"
			kc.FeatureGates = map[string]bool{featuregates.LoggingBetaOptions: false}
		}, []fieldErr{forbidden("logging.format")}},
		{"unknown format", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.Logging.Format = "logfmt" },
			[]fieldErr{notSupported("logging.format")}},
		{"flush frequency zero", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.Logging.FlushFrequency.Duration.Duration = 0 },
			[]fieldErr{invalid("logging.flushFrequency")}},
		{"verbosity and vmodule", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Logging.Verbosity = 10
			kc.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "eviction*", Verbosity: 4}}
		}, nil},
		{"verbosity and vmodule bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Logging.Verbosity = 1 << 31
			kc.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: ""}, {FilePattern: "a=b", Verbosity: 1 << 31}}
		}, []fieldErr{
			invalid("logging.verbosity"),
			required("logging.vmodule[0].filePattern"),
			invalid("logging.vmodule[1].filePattern"),
			invalid("logging.vmodule[1].verbosity"),
		}},
		{"vmodule with json", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Logging.Format = "json"
			kc.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "x", Verbosity: 1}}
		}, []fieldErr{forbidden("logging.vmodule")}},
		{"output routing with alpha gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{featuregates.LoggingAlphaOptions: true}
			kc.Logging.Options.JSON.SplitStream = true
			kc.Logging.Options.JSON.InfoBufferSize = resource.QuantityValue{Quantity: resource.MustParse("64Ki")}
		}, nil},
		{"output routing without alpha gate", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Logging.Options.Text.SplitStream = true
			kc.Logging.Options.JSON.InfoBufferSize = resource.QuantityValue{Quantity: resource.MustParse("64Ki")}
		}, []fieldErr{forbidden("logging.options.text.splitStream"), forbidden("logging.options.json.infoBufferSize")}},
	})
}

func TestValidateTracing(t *testing.T) {
	runValidationCases(t, []validationCase{
		{"tracing", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Tracing = &tracingapi.TracingConfiguration{Endpoint: ptr.To("unix:///run/otel.sock"), SamplingRatePerMillion: ptr.To[int32](1000000)}
		}, nil},
		{"tracing bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.Tracing = &tracingapi.TracingConfiguration{Endpoint: ptr.To("https://collector:4317"), SamplingRatePerMillion: ptr.To[int32](-1)}
		}, []fieldErr{invalid("tracing.samplingRatePerMillion"), invalid("tracing.endpoint")}},
	})
}

// TestKnownCipherSuitesMatchComponentBase checks the cipher list against
// component-base's TLSCipherSuites, which the kubelet uses at startup.
func TestKnownCipherSuitesMatchComponentBase(t *testing.T) {
	for _, name := range append(cliflag.TLSCipherPossibleValues(), "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_NOT_A_SUITE") {
		_, err := cliflag.TLSCipherSuites([]string{name})
		if got, want := slices.Contains(knownCipherSuites(), name), err == nil; got != want {
			t.Errorf("%s: known = %t, component-base accepts = %t", name, got, want)
		}
	}
}
