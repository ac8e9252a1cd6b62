package merge

import (
	"crypto/tls"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

type (
	kubeletConfig = kubeletv1beta1.KubeletConfiguration
	proxyConfig   = proxyv1alpha1.KubeProxyConfiguration
	// kubeletConfigAuth is the authentication section.
	kubeletConfigAuth = kubeletv1beta1.KubeletAuthentication
)

func mustQuantity(t testing.TB, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// kubeletTestProfile is a STAND-IN for components/kubelet, which is written
// elsewhere: a subset of the kubelet's v1beta1 defaults (fill-unset only) and
// a subset of its validation, big enough to cost what real validation costs
// (ports, QPS, GC thresholds and their order, enums, IPs, durations,
// eviction thresholds parsed as quantities or percentages, reserved
// resources, TLS settings, shutdown periods).
type kubeletTestProfile struct{}

func (kubeletTestProfile) GroupVersionKind() schema.GroupVersionKind {
	return kubeletv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")
}

func defDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

func defPtr[V any](p **V, v V) {
	if *p == nil {
		*p = &v
	}
}

func defString(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func defInt32(i *int32, v int32) {
	if *i == 0 {
		*i = v
	}
}

func (kubeletTestProfile) Default(c *kubeletConfig) {
	defPtr(&c.EnableServer, true)
	defDuration(&c.SyncFrequency, time.Minute)
	defDuration(&c.FileCheckFrequency, 20*time.Second)
	defDuration(&c.HTTPCheckFrequency, 20*time.Second)
	defString(&c.Address, "0.0.0.0")
	defInt32(&c.Port, 10250)
	defPtr(&c.Authentication.Anonymous.Enabled, false)
	defPtr(&c.Authentication.Webhook.Enabled, true)
	defDuration(&c.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	defDuration(&c.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	defDuration(&c.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
	defPtr(&c.RegistryPullQPS, 5)
	defInt32(&c.RegistryBurst, 10)
	defPtr(&c.EventRecordQPS, 50)
	defInt32(&c.EventBurst, 100)
	defPtr(&c.EnableDebuggingHandlers, true)
	defPtr(&c.HealthzPort, 10248)
	defString(&c.HealthzBindAddress, "127.0.0.1")
	defPtr(&c.OOMScoreAdj, -999)
	defDuration(&c.StreamingConnectionIdleTimeout, 4*time.Hour)
	defDuration(&c.NodeStatusReportFrequency, 5*time.Minute)
	defDuration(&c.NodeStatusUpdateFrequency, 10*time.Second)
	defInt32(&c.NodeLeaseDurationSeconds, 40)
	defDuration(&c.ImageMinimumGCAge, 2*time.Minute)
	defPtr(&c.ImageGCHighThresholdPercent, 85)
	defPtr(&c.ImageGCLowThresholdPercent, 80)
	defDuration(&c.VolumeStatsAggPeriod, time.Minute)
	defPtr(&c.CgroupsPerQOS, true)
	defString(&c.CgroupDriver, "cgroupfs")
	defString(&c.CPUManagerPolicy, "none")
	defDuration(&c.CPUManagerReconcilePeriod, 10*time.Second)
	defString(&c.MemoryManagerPolicy, "None")
	defString(&c.TopologyManagerPolicy, "none")
	defString(&c.TopologyManagerScope, "container")
	defDuration(&c.RuntimeRequestTimeout, 2*time.Minute)
	defString(&c.HairpinMode, "promiscuous-bridge")
	defInt32(&c.MaxPods, 110)
	defPtr(&c.PodPidsLimit, -1)
	defPtr(&c.ResolverConfig, "/etc/resolv.conf")
	defPtr(&c.CPUCFSQuota, true)
	defPtr(&c.CPUCFSQuotaPeriod, metav1.Duration{Duration: 100 * time.Millisecond})
	defPtr(&c.NodeStatusMaxImages, 50)
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 1000000
	}
	defString(&c.ContentType, "application/vnd.kubernetes.protobuf")
	defPtr(&c.KubeAPIQPS, 50)
	defInt32(&c.KubeAPIBurst, 100)
	defPtr(&c.SerializeImagePulls, true)
	if c.EvictionHard == nil {
		c.EvictionHard = map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "10%",
			"nodefs.inodesFree": "5%",
			"imagefs.available": "15%",
		}
	}
	defDuration(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	defPtr(&c.EnableControllerAttachDetach, true)
	defPtr(&c.MakeIPTablesUtilChains, true)
	defPtr(&c.IPTablesMasqueradeBit, 14)
	defPtr(&c.IPTablesDropBit, 15)
	defPtr(&c.FailSwapOn, true)
	defString(&c.ContainerLogMaxSize, "10Mi")
	defPtr(&c.ContainerLogMaxFiles, 5)
	defPtr(&c.ContainerLogMaxWorkers, 1)
	defPtr(&c.ContainerLogMonitorInterval, metav1.Duration{Duration: 10 * time.Second})
	if c.ConfigMapAndSecretChangeDetectionStrategy == "" {
		c.ConfigMapAndSecretChangeDetectionStrategy = kubeletv1beta1.WatchChangeDetectionStrategy
	}
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	defString(&c.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")
	defString(&c.Logging.Format, "text")
	if c.Logging.FlushFrequency.Duration.Duration == 0 {
		c.Logging.FlushFrequency.Duration.Duration = 5 * time.Second
		c.Logging.FlushFrequency.SerializeAsString = true
	}
	defPtr(&c.EnableSystemLogHandler, true)
	defPtr(&c.EnableProfilingHandler, true)
	defPtr(&c.EnableDebugFlagsHandler, true)
	defPtr(&c.SeccompDefault, false)
	defPtr(&c.MemoryThrottlingFactor, 0.9)
	defPtr(&c.RegisterNode, true)
	defPtr(&c.LocalStorageCapacityIsolation, true)
	defString(&c.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock")
}

var (
	evictionSignals = map[string]bool{
		"memory.available": true, "nodefs.available": true, "nodefs.inodesFree": true,
		"imagefs.available": true, "imagefs.inodesFree": true, "containerfs.available": true,
		"containerfs.inodesFree": true, "pid.available": true, "allocatableMemory.available": true,
	}
	cipherSuites = func() map[string]bool {
		m := map[string]bool{}
		for _, s := range tls.CipherSuites() {
			m[s.Name] = true
		}
		return m
	}()
)

func (kubeletTestProfile) Validate(c *kubeletConfig) field.ErrorList {
	var errs field.ErrorList
	port := func(name string, v int32, allowZero bool) {
		if v < 0 || v > 65535 || (!allowZero && v == 0) {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "must be a port number between 1 and 65535"))
		}
	}
	port("port", c.Port, false)
	port("readOnlyPort", c.ReadOnlyPort, true)
	if c.HealthzPort != nil {
		port("healthzPort", *c.HealthzPort, true)
	}
	nonNeg := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "must not be negative"))
		}
	}
	nonNeg("registryBurst", int64(c.RegistryBurst))
	nonNeg("eventBurst", int64(c.EventBurst))
	nonNeg("kubeAPIBurst", int64(c.KubeAPIBurst))
	nonNeg("maxPods", int64(c.MaxPods))
	nonNeg("evictionMaxPodGracePeriod", int64(c.EvictionMaxPodGracePeriod))
	for name, p := range map[string]*int32{"registryPullQPS": c.RegistryPullQPS, "eventRecordQPS": c.EventRecordQPS, "kubeAPIQPS": c.KubeAPIQPS} {
		if p != nil {
			nonNeg(name, int64(*p))
		}
	}
	if c.KubeAPIQPS != nil && c.KubeAPIBurst < *c.KubeAPIQPS {
		errs = append(errs, field.Invalid(field.NewPath("kubeAPIBurst"), c.KubeAPIBurst, "must not be less than kubeAPIQPS"))
	}
	high, low := ptr.Deref(c.ImageGCHighThresholdPercent, 85), ptr.Deref(c.ImageGCLowThresholdPercent, 80)
	if high < 0 || high > 100 {
		errs = append(errs, field.Invalid(field.NewPath("imageGCHighThresholdPercent"), high, "must be between 0 and 100"))
	}
	if low < 0 || low > 100 {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low, "must be between 0 and 100"))
	}
	if low >= high {
		errs = append(errs, field.Invalid(field.NewPath("imageGCLowThresholdPercent"), low, "must be less than imageGCHighThresholdPercent"))
	}
	positive := map[string]metav1.Duration{
		"syncFrequency": c.SyncFrequency, "fileCheckFrequency": c.FileCheckFrequency,
		"httpCheckFrequency": c.HTTPCheckFrequency, "nodeStatusUpdateFrequency": c.NodeStatusUpdateFrequency,
		"nodeStatusReportFrequency": c.NodeStatusReportFrequency, "runtimeRequestTimeout": c.RuntimeRequestTimeout,
		"cpuManagerReconcilePeriod": c.CPUManagerReconcilePeriod, "evictionPressureTransitionPeriod": c.EvictionPressureTransitionPeriod,
	}
	for name, d := range positive {
		if d.Duration <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), d.Duration.String(), "must be greater than zero"))
		}
	}
	if c.NodeStatusReportFrequency.Duration < c.NodeStatusUpdateFrequency.Duration {
		errs = append(errs, field.Invalid(field.NewPath("nodeStatusReportFrequency"), c.NodeStatusReportFrequency.Duration.String(), "must not be less than nodeStatusUpdateFrequency"))
	}
	if c.NodeLeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("nodeLeaseDurationSeconds"), c.NodeLeaseDurationSeconds, "must be greater than zero"))
	}
	for _, a := range []struct{ name, v string }{{"address", c.Address}, {"healthzBindAddress", c.HealthzBindAddress}} {
		if a.v != "" && net.ParseIP(a.v) == nil {
			errs = append(errs, field.Invalid(field.NewPath(a.name), a.v, "must be an IP address"))
		}
	}
	for i, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterDNS").Index(i), ip, "must be an IP address"))
		}
	}
	enum := func(name, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		errs = append(errs, field.NotSupported(field.NewPath(name), v, allowed))
	}
	enum("cgroupDriver", c.CgroupDriver, "cgroupfs", "systemd")
	enum("hairpinMode", c.HairpinMode, "promiscuous-bridge", "hairpin-veth", "none")
	enum("cpuManagerPolicy", c.CPUManagerPolicy, "none", "static")
	enum("memoryManagerPolicy", c.MemoryManagerPolicy, "None", "Static")
	enum("topologyManagerPolicy", c.TopologyManagerPolicy, "none", "best-effort", "restricted", "single-numa-node")
	enum("topologyManagerScope", c.TopologyManagerScope, "container", "pod")
	enum("logging.format", c.Logging.Format, "text", "json")
	if c.TLSMinVersion != "" {
		enum("tlsMinVersion", c.TLSMinVersion, "VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")
	}
	for i, s := range c.TLSCipherSuites {
		if !cipherSuites[s] {
			errs = append(errs, field.NotSupported[string](field.NewPath("tlsCipherSuites").Index(i), s, nil))
		}
	}
	thresholds := func(name string, m map[string]string) {
		for sig, v := range m {
			p := field.NewPath(name).Key(sig)
			if !evictionSignals[sig] {
				errs = append(errs, field.Invalid(p, sig, "unknown eviction signal"))
				continue
			}
			if strings.HasSuffix(v, "%") {
				pct, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
				if err != nil || pct < 0 || pct > 100 {
					errs = append(errs, field.Invalid(p, v, "must be a percentage between 0% and 100%"))
				}
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() < 0 {
				errs = append(errs, field.Invalid(p, v, "must be a non-negative quantity or a percentage"))
			}
		}
	}
	thresholds("evictionHard", c.EvictionHard)
	thresholds("evictionSoft", c.EvictionSoft)
	thresholds("evictionMinimumReclaim", c.EvictionMinimumReclaim)
	for sig := range c.EvictionSoft {
		gp, ok := c.EvictionSoftGracePeriod[sig]
		if !ok {
			errs = append(errs, field.Required(field.NewPath("evictionSoftGracePeriod").Key(sig), "every soft eviction threshold needs a grace period"))
			continue
		}
		if d, err := time.ParseDuration(gp); err != nil || d < 0 {
			errs = append(errs, field.Invalid(field.NewPath("evictionSoftGracePeriod").Key(sig), gp, "must be a non-negative duration"))
		}
	}
	for _, r := range []struct {
		name string
		m    map[string]string
	}{{"kubeReserved", c.KubeReserved}, {"systemReserved", c.SystemReserved}} {
		for k, v := range r.m {
			if _, err := resource.ParseQuantity(v); err != nil {
				errs = append(errs, field.Invalid(field.NewPath(r.name).Key(k), v, "must be a quantity"))
			}
		}
	}
	if c.ContainerLogMaxSize != "" {
		if _, err := resource.ParseQuantity(c.ContainerLogMaxSize); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("containerLogMaxSize"), c.ContainerLogMaxSize, "must be a quantity"))
		}
	}
	if c.ContainerLogMaxFiles != nil && *c.ContainerLogMaxFiles < 2 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxFiles"), *c.ContainerLogMaxFiles, "must be at least 2"))
	}
	if c.ShutdownGracePeriodCriticalPods.Duration > c.ShutdownGracePeriod.Duration {
		errs = append(errs, field.Invalid(field.NewPath("shutdownGracePeriodCriticalPods"), c.ShutdownGracePeriodCriticalPods.Duration.String(), "must not be greater than shutdownGracePeriod"))
	}
	for _, b := range []struct {
		name string
		v    *int32
	}{{"iptablesMasqueradeBit", c.IPTablesMasqueradeBit}, {"iptablesDropBit", c.IPTablesDropBit}} {
		if b.v != nil && (*b.v < 0 || *b.v > 31) {
			errs = append(errs, field.Invalid(field.NewPath(b.name), *b.v, "must be between 0 and 31"))
		}
	}
	for gate := range c.FeatureGates {
		if gate == "" {
			errs = append(errs, field.Invalid(field.NewPath("featureGates"), gate, "feature gate names must not be empty"))
		}
	}
	return errs
}

// nopProfile neither defaults nor validates: for comparing merges.
type nopProfile[T any] struct{ gvk schema.GroupVersionKind }

func (p nopProfile[T]) GroupVersionKind() schema.GroupVersionKind { return p.gvk }
func (nopProfile[T]) Default(*T)                                  {}
func (nopProfile[T]) Validate(*T) field.ErrorList                 { return nil }

var kubeletGVK = kubeletv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")

func nopKubelet() nopProfile[kubeletConfig] { return nopProfile[kubeletConfig]{gvk: kubeletGVK} }

// proxyTestProfile is a tiny kube-proxy profile: the pipeline is generic.
type proxyTestProfile struct{}

func (proxyTestProfile) GroupVersionKind() schema.GroupVersionKind {
	return proxyv1alpha1.SchemeGroupVersion.WithKind("KubeProxyConfiguration")
}
func (proxyTestProfile) Default(c *proxyv1alpha1.KubeProxyConfiguration) {
	defString(&c.BindAddress, "0.0.0.0")
	defString(&c.HealthzBindAddress, "0.0.0.0:10256")
}
func (proxyTestProfile) Validate(c *proxyv1alpha1.KubeProxyConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.Mode != "" && c.Mode != "iptables" && c.Mode != "ipvs" && c.Mode != "nftables" {
		errs = append(errs, field.NotSupported(field.NewPath("mode"), c.Mode, []string{"iptables", "ipvs", "nftables"}))
	}
	return errs
}

func newPipeline[T any](t testing.TB, p Profile[T], opts Options) *Pipeline[T] {
	t.Helper()
	pl, err := New(p, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return pl
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// golden compares got with testdata/<name>, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", path, diff)
	}
}

func doc(name, data string) *Document { return &Document{Name: name, Data: []byte(data)} }

const kubeletHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
