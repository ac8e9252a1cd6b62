package kubelet

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// validateServer checks the kubelet's serving endpoints, TLS and
// authorization settings.
func (v *validator) validateServer() {
	kc := v.kc
	if !validPort(kc.Port) {
		v.add(field.Invalid(field.NewPath("port"), kc.Port, "must be between 1 and 65535, inclusive"))
	}
	if kc.ReadOnlyPort != 0 && !validPort(kc.ReadOnlyPort) {
		v.add(field.Invalid(field.NewPath("readOnlyPort"), kc.ReadOnlyPort, "must be 0 (disabled) or between 1 and 65535, inclusive"))
	}
	if p := i32(kc.HealthzPort); p != 0 && !validPort(p) {
		v.add(field.Invalid(field.NewPath("healthzPort"), p, "must be 0 (disabled) or between 1 and 65535, inclusive"))
	}
	// Not checked upstream, where an address that is not an IP silently
	// makes the kubelet listen on every interface.
	if kc.Address != "" && net.ParseIP(kc.Address) == nil {
		v.add(field.Invalid(field.NewPath("address"), kc.Address, "must be an IP address"))
	}
	// Not checked upstream, where entries that are not IPs are logged and
	// dropped, leaving pods with fewer name servers than configured.
	for i, ip := range kc.ClusterDNS {
		if net.ParseIP(ip) == nil {
			v.add(field.Invalid(field.NewPath("clusterDNS").Index(i), ip, "must be an IP address"))
		}
	}
	if kc.PodCIDR != "" {
		if _, _, err := net.ParseCIDR(kc.PodCIDR); err != nil {
			v.add(field.Invalid(field.NewPath("podCIDR"), kc.PodCIDR, "must be a CIDR such as \"10.244.0.0/24\""))
		}
	}

	oneOf(v, "authorization.mode", kc.Authorization.Mode,
		kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletv1beta1.KubeletAuthorizationModeWebhook)

	if kc.ServerTLSBootstrap && !v.gates.Enabled(gateRotateKubeletServerCertificate) {
		v.add(field.Forbidden(field.NewPath("serverTLSBootstrap"), "requires feature gate "+gateRotateKubeletServerCertificate))
	}
	// A certificate without its key (or the reverse) fails when the kubelet
	// loads them; say so before the restart.
	if kc.TLSCertFile != "" && kc.TLSPrivateKeyFile == "" {
		v.add(field.Required(field.NewPath("tlsPrivateKeyFile"), "required when tlsCertFile is set"))
	}
	if kc.TLSPrivateKeyFile != "" && kc.TLSCertFile == "" {
		v.add(field.Required(field.NewPath("tlsCertFile"), "required when tlsPrivateKeyFile is set"))
	}
	// The kubelet turns these into crypto/tls settings at startup with the
	// same component-base helpers, and refuses to start if one fails.
	if kc.TLSMinVersion != "" {
		if _, err := cliflag.TLSVersion(kc.TLSMinVersion); err != nil {
			v.add(field.NotSupported(field.NewPath("tlsMinVersion"), kc.TLSMinVersion, cliflag.TLSPossibleVersions()))
		}
	}
	if len(kc.TLSCipherSuites) > 0 {
		known := knownCipherSuites()
		for i, name := range kc.TLSCipherSuites {
			if !slices.Contains(known, name) {
				v.add(field.Invalid(field.NewPath("tlsCipherSuites").Index(i), name, "not a cipher suite name known to crypto/tls"))
			}
		}
	}
	for i, id := range kc.TLSCurvePreferences {
		path := func() *field.Path { return field.NewPath("tlsCurvePreferences").Index(i) }
		switch {
		case id <= 0 || id > math.MaxUint16:
			v.add(field.Invalid(path(), id, fmt.Sprintf("must be between 1 and %d", math.MaxUint16)))
		case contains32(kc.TLSCurvePreferences[:i], id):
			v.add(field.Duplicate(path(), id))
		case strings.HasPrefix(tls.CurveID(id).String(), "CurveID("):
			v.add(field.Invalid(path(), id, "not a curve supported by this Go version's crypto/tls"))
		}
	}
}

// knownCipherSuites lists the names the kubelet accepts in tlsCipherSuites:
// every suite crypto/tls implements, secure or not, plus the two legacy
// ChaCha20 names component-base keeps for compatibility. It is computed once:
// crypto/tls builds its lists afresh on every call, which would otherwise be
// the largest cost of validating a config that names its ciphers. The result
// is never modified.
var knownCipherSuites = sync.OnceValue(func() []string {
	secure, insecure := tls.CipherSuites(), tls.InsecureCipherSuites()
	names := make([]string, 0, len(secure)+len(insecure)+2)
	for _, s := range secure {
		names = append(names, s.Name)
	}
	for _, s := range insecure {
		names = append(names, s.Name)
	}
	return append(names, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305")
})

func contains32(list []int32, x int32) bool {
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}

// validateLogging checks the logging section the way component-base's
// logsapi.Validate does, with two differences: the log formats are the two
// the kubelet binary registers ("text" and, gated by LoggingBetaOptions,
// "json") rather than whatever this process registered, and the check of
// the process's own klog flags is left out.
func (v *validator) validateLogging() {
	c := &v.kc.Logging
	path := field.NewPath("logging")
	if c.FlushFrequency.Duration.Duration <= 0 {
		v.add(field.Invalid(path.Child("flushFrequency"), c.FlushFrequency.Duration.Duration.String(), "must be greater than zero"))
	}
	switch c.Format {
	case logsapi.DefaultLogFormat:
	case logsapi.JSONLogFormat:
		if !v.gates.Enabled(featuregates.LoggingBetaOptions) {
			v.add(field.Forbidden(path.Child("format"), "the json format requires feature gate "+featuregates.LoggingBetaOptions))
		}
	default:
		v.add(field.NotSupported(path.Child("format"), c.Format, []string{logsapi.DefaultLogFormat, logsapi.JSONLogFormat}))
	}
	if c.Verbosity > math.MaxInt32 {
		v.add(field.Invalid(path.Child("verbosity"), c.Verbosity, fmt.Sprintf("must be at most %d", math.MaxInt32)))
	}
	if len(c.VModule) > 0 && c.Format != "" && c.Format != logsapi.DefaultLogFormat {
		v.add(field.Forbidden(path.Child("vmodule"), "only supported with the text format"))
	}
	for i, item := range c.VModule {
		itemPath := path.Child("vmodule").Index(i)
		if item.FilePattern == "" {
			v.add(field.Required(itemPath.Child("filePattern"), "must not be empty"))
		}
		if strings.ContainsAny(item.FilePattern, "=,") {
			v.add(field.Invalid(itemPath.Child("filePattern"), item.FilePattern, "must not contain '=' or ','"))
		}
		if item.Verbosity > math.MaxInt32 {
			v.add(field.Invalid(itemPath.Child("verbosity"), item.Verbosity, fmt.Sprintf("must be at most %d", math.MaxInt32)))
		}
	}
	if v.gates.Enabled(featuregates.LoggingAlphaOptions) {
		return
	}
	for _, f := range []struct {
		name string
		o    *logsapi.OutputRoutingOptions
	}{{"text", &c.Options.Text.OutputRoutingOptions}, {"json", &c.Options.JSON.OutputRoutingOptions}} {
		if f.o.SplitStream {
			v.add(field.Forbidden(path.Child("options", f.name, "splitStream"), "requires feature gate "+featuregates.LoggingAlphaOptions))
		}
		if f.o.InfoBufferSize.Value() != 0 {
			v.add(field.Forbidden(path.Child("options", f.name, "infoBufferSize"), "requires feature gate "+featuregates.LoggingAlphaOptions))
		}
	}
}

// validateTracing uses component-base's own check, which is pure.
func (v *validator) validateTracing() {
	if v.kc.Tracing == nil {
		return
	}
	v.errs = append(v.errs, tracingapi.ValidateTracingConfiguration(v.kc.Tracing, nil, field.NewPath("tracing"))...)
}
