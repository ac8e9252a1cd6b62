package bottlerocket

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

type kc = kubeletv1beta1.KubeletConfiguration

const header = "[settings.kubernetes]\n"

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// TestRenderField sets one supported field at a time and checks the exact
// TOML. Every entry of SupportedFields must have at least one case here.
func TestRenderField(t *testing.T) {
	tests := []struct {
		name  string
		field string // JSON name, for the coverage check
		set   func(c *kc)
		want  string
	}{
		{"allowedUnsafeSysctls", "allowedUnsafeSysctls",
			func(c *kc) { c.AllowedUnsafeSysctls = []string{"net.core.somaxconn", "net.ipv4.ip_local_port_range"} },
			header + `allowed-unsafe-sysctls = ["net.core.somaxconn", "net.ipv4.ip_local_port_range"]` + "\n"},
		{"allowedUnsafeSysctls keeps order", "allowedUnsafeSysctls",
			func(c *kc) { c.AllowedUnsafeSysctls = []string{"net.ipv4.*", "kernel.msg*"} },
			header + `allowed-unsafe-sysctls = ["net.ipv4.*", "kernel.msg*"]` + "\n"},
		{"clusterDNS one address is a string", "clusterDNS",
			func(c *kc) { c.ClusterDNS = []string{"10.96.0.10"} },
			header + `cluster-dns-ip = "10.96.0.10"` + "\n"},
		{"clusterDNS several addresses are a list", "clusterDNS",
			func(c *kc) { c.ClusterDNS = []string{"10.96.0.10", "fd00::a"} },
			header + `cluster-dns-ip = ["10.96.0.10", "fd00::a"]` + "\n"},
		{"clusterDomain", "clusterDomain",
			func(c *kc) { c.ClusterDomain = "cluster.local" },
			header + `cluster-domain = "cluster.local"` + "\n"},
		{"containerLogMaxFiles", "containerLogMaxFiles",
			func(c *kc) { c.ContainerLogMaxFiles = ptr.To[int32](7) },
			header + "container-log-max-files = 7\n"},
		{"containerLogMaxSize", "containerLogMaxSize",
			func(c *kc) { c.ContainerLogMaxSize = "50Mi" },
			header + `container-log-max-size = "50Mi"` + "\n"},
		{"containerLogMaxSize respelled when only the canonical form fits", "containerLogMaxSize",
			func(c *kc) { c.ContainerLogMaxSize = "1e-3" },
			header + `container-log-max-size = "1m"` + "\n"},
		{"cpuCFSQuota false is rendered", "cpuCFSQuota",
			func(c *kc) { c.CPUCFSQuota = ptr.To(false) },
			header + "cpu-cfs-quota-enforced = false\n"},
		{"cpuCFSQuota true", "cpuCFSQuota",
			func(c *kc) { c.CPUCFSQuota = ptr.To(true) },
			header + "cpu-cfs-quota-enforced = true\n"},
		{"cpuManagerPolicy", "cpuManagerPolicy",
			func(c *kc) { c.CPUManagerPolicy = "static" },
			header + `cpu-manager-policy = "static"` + "\n"},
		{"cpuManagerPolicyOptions true", "cpuManagerPolicyOptions",
			func(c *kc) { c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "true"} },
			header + `cpu-manager-policy-options = ["full-pcpus-only"]` + "\n"},
		{"cpuManagerPolicyOptions false is the default and is left out", "cpuManagerPolicyOptions",
			func(c *kc) { c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "false"} },
			header},
		{"cpuManagerReconcilePeriod", "cpuManagerReconcilePeriod",
			func(c *kc) { c.CPUManagerReconcilePeriod = dur(10 * time.Second) },
			header + `cpu-manager-reconcile-period = "10s"` + "\n"},
		{"cpuManagerReconcilePeriod fraction of a second", "cpuManagerReconcilePeriod",
			func(c *kc) { c.CPUManagerReconcilePeriod = dur(1500 * time.Millisecond) },
			header + `cpu-manager-reconcile-period = "1.5s"` + "\n"},
		{"eventBurst", "eventBurst",
			func(c *kc) { c.EventBurst = 100 },
			header + "event-burst = 100\n"},
		{"eventRecordQPS zero is rendered", "eventRecordQPS",
			func(c *kc) { c.EventRecordQPS = ptr.To[int32](0) },
			header + "event-qps = 0\n"},
		{"evictionHard", "evictionHard",
			func(c *kc) {
				c.EvictionHard = map[string]string{"nodefs.available": "10%", "memory.available": "100Mi"}
			},
			header + "\n[settings.kubernetes.eviction-hard]\n" +
				`"memory.available" = "100Mi"` + "\n" + `"nodefs.available" = "10%"` + "\n"},
		{"evictionMaxPodGracePeriod", "evictionMaxPodGracePeriod",
			func(c *kc) { c.EvictionMaxPodGracePeriod = 40 },
			header + "eviction-max-pod-grace-period = 40\n"},
		{"evictionSoft", "evictionSoft",
			func(c *kc) { c.EvictionSoft = map[string]string{"memory.available": "12%"} },
			header + "\n[settings.kubernetes.eviction-soft]\n" + `"memory.available" = "12%"` + "\n"},
		{"evictionSoftGracePeriod", "evictionSoftGracePeriod",
			func(c *kc) { c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"} },
			header + "\n[settings.kubernetes.eviction-soft-grace-period]\n" + `"memory.available" = "1m30s"` + "\n"},
		{"evictionSoftGracePeriod respelled outside Bottlerocket's grammar", "evictionSoftGracePeriod",
			func(c *kc) { c.EvictionSoftGracePeriod = map[string]string{"pid.available": "1500us"} },
			header + "\n[settings.kubernetes.eviction-soft-grace-period]\n" + `"pid.available" = "1.5ms"` + "\n"},
		{"imageGCHighThresholdPercent", "imageGCHighThresholdPercent",
			func(c *kc) { c.ImageGCHighThresholdPercent = ptr.To[int32](85) },
			header + "image-gc-high-threshold-percent = 85\n"},
		{"imageGCLowThresholdPercent zero is rendered", "imageGCLowThresholdPercent",
			func(c *kc) { c.ImageGCLowThresholdPercent = ptr.To[int32](0) },
			header + "image-gc-low-threshold-percent = 0\n"},
		{"kubeAPIBurst", "kubeAPIBurst",
			func(c *kc) { c.KubeAPIBurst = 20 },
			header + "kube-api-burst = 20\n"},
		{"kubeAPIQPS", "kubeAPIQPS",
			func(c *kc) { c.KubeAPIQPS = ptr.To[int32](10) },
			header + "kube-api-qps = 10\n"},
		{"kubeReserved", "kubeReserved",
			func(c *kc) {
				c.KubeReserved = map[string]string{"memory": "893Mi", "cpu": "90m", "ephemeral-storage": "1Gi"}
			},
			header + "\n[settings.kubernetes.kube-reserved]\n" +
				`cpu = "90m"` + "\n" + `ephemeral-storage = "1Gi"` + "\n" + `memory = "893Mi"` + "\n"},
		{"maxPods", "maxPods",
			func(c *kc) { c.MaxPods = 100 },
			header + "max-pods = 100\n"},
		{"memoryManagerPolicy", "memoryManagerPolicy",
			func(c *kc) { c.MemoryManagerPolicy = "Static" },
			header + `memory-manager-policy = "Static"` + "\n"},
		{"podPidsLimit", "podPidsLimit",
			func(c *kc) { c.PodPidsLimit = ptr.To[int64](4096) },
			header + "pod-pids-limit = 4096\n"},
		{"podPidsLimit -1 means unlimited and is rendered", "podPidsLimit",
			func(c *kc) { c.PodPidsLimit = ptr.To[int64](-1) },
			header + "pod-pids-limit = -1\n"},
		{"providerID", "providerID",
			func(c *kc) { c.ProviderID = "aws:///us-west-2a/i-0123456789abcdef0" },
			header + `provider-id = "aws:///us-west-2a/i-0123456789abcdef0"` + "\n"},
		{"registryBurst", "registryBurst",
			func(c *kc) { c.RegistryBurst = 20 },
			header + "registry-burst = 20\n"},
		{"registryPullQPS", "registryPullQPS",
			func(c *kc) { c.RegistryPullQPS = ptr.To[int32](10) },
			header + "registry-qps = 10\n"},
		{"serverTLSBootstrap", "serverTLSBootstrap",
			func(c *kc) { c.ServerTLSBootstrap = true },
			header + "server-tls-bootstrap = true\n"},
		{"shutdownGracePeriod", "shutdownGracePeriod",
			func(c *kc) { c.ShutdownGracePeriod = dur(90 * time.Second) },
			header + `shutdown-grace-period = "1m30s"` + "\n"},
		{"shutdownGracePeriodCriticalPods", "shutdownGracePeriodCriticalPods",
			func(c *kc) { c.ShutdownGracePeriodCriticalPods = dur(30 * time.Second) },
			header + `shutdown-grace-period-for-critical-pods = "30s"` + "\n"},
		{"systemReserved", "systemReserved",
			func(c *kc) { c.SystemReserved = map[string]string{"cpu": "10m", "memory": "100Mi"} },
			header + "\n[settings.kubernetes.system-reserved]\n" + `cpu = "10m"` + "\n" + `memory = "100Mi"` + "\n"},
		{"topologyManagerPolicy", "topologyManagerPolicy",
			func(c *kc) { c.TopologyManagerPolicy = "single-numa-node" },
			header + `topology-manager-policy = "single-numa-node"` + "\n"},
		{"topologyManagerScope", "topologyManagerScope",
			func(c *kc) { c.TopologyManagerScope = "pod" },
			header + `topology-manager-scope = "pod"` + "\n"},
	}

	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.field] = true
		t.Run(tt.name, func(t *testing.T) {
			var c kc
			tt.set(&c)
			got, err := Render(&c)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Render output (-want +got):\n%s", diff)
			}
			if _, err := parseTOML(string(got)); err != nil {
				t.Errorf("output is not valid TOML: %v\n%s", err, got)
			}
		})
	}
	for _, m := range SupportedFields() {
		if !covered[m.Field] {
			t.Errorf("supported field %s has no case in TestRenderField", m.Field)
		}
	}
}

// TestRenderEmpty checks that nothing set renders just the table header, and
// that explicitly empty lists and maps whose emptiness the kubelet reads as
// it reads their absence render to nothing (empties_test.go has the rest).
func TestRenderEmpty(t *testing.T) {
	tests := []struct {
		name string
		cfg  kc
	}{
		{"zero value", kc{}},
		{"TypeMeta is ignored", kc{TypeMeta: metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"}}},
		{"empty lists and maps that mean unset", kc{
			AllowedUnsafeSysctls: []string{}, CPUManagerPolicyOptions: map[string]string{}, EvictionSoft: map[string]string{},
			EvictionSoftGracePeriod: map[string]string{}, SystemReserved: map[string]string{},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(&tt.cfg)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if diff := cmp.Diff(header, string(got)); diff != "" {
				t.Errorf("Render output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderNil(t *testing.T) {
	if _, err := Render(nil); err == nil || err.Error() != "bottlerocket: nil KubeletConfiguration" {
		t.Fatalf("Render(nil) error = %v, want the nil error", err)
	}
}

// TestRenderInvalidValues checks the exact text a user sees for each value
// Bottlerocket cannot take.
func TestRenderInvalidValues(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *kc)
		want string
	}{
		{"negative maxPods", func(c *kc) { c.MaxPods = -1 },
			"maxPods: cannot be expressed as Bottlerocket settings.kubernetes.max-pods: Bottlerocket accepts only values of zero or more"},
		{"negative evictionMaxPodGracePeriod", func(c *kc) { c.EvictionMaxPodGracePeriod = -5 },
			"evictionMaxPodGracePeriod: cannot be expressed as Bottlerocket settings.kubernetes.eviction-max-pod-grace-period: Bottlerocket accepts only values of zero or more"},
		{"image GC percent above 100", func(c *kc) { c.ImageGCHighThresholdPercent = ptr.To[int32](101) },
			"imageGCHighThresholdPercent: cannot be expressed as Bottlerocket settings.kubernetes.image-gc-high-threshold-percent: Bottlerocket accepts 0 to 100 inclusive"},
		{"image GC percent below 0", func(c *kc) { c.ImageGCLowThresholdPercent = ptr.To[int32](-1) },
			"imageGCLowThresholdPercent: cannot be expressed as Bottlerocket settings.kubernetes.image-gc-low-threshold-percent: Bottlerocket accepts 0 to 100 inclusive"},
		{"unknown eviction signal", func(c *kc) { c.EvictionHard = map[string]string{"containerfs.available": "10%"} },
			`evictionHard[containerfs.available]: cannot be expressed as Bottlerocket settings.kubernetes.eviction-hard: eviction signal "containerfs.available" is not one Bottlerocket accepts: imagefs.available, imagefs.inodesFree, memory.available, nodefs.available, nodefs.inodesFree, pid.available`},
		{"empty evictionHard", func(c *kc) { c.EvictionHard = map[string]string{} },
			"evictionHard: cannot be expressed as Bottlerocket settings.kubernetes.eviction-hard: an empty map would disable hard eviction in the kubelet, but Bottlerocket treats an empty table as unset and the kubelet's default thresholds would apply"},
		{"threshold of 100%", func(c *kc) { c.EvictionSoft = map[string]string{"nodefs.available": "100%"} },
			`evictionSoft[nodefs.available]: cannot be expressed as Bottlerocket settings.kubernetes.eviction-soft: percentage "100%" is outside the range Bottlerocket accepts, 0% up to but not including 100%`},
		{"threshold that is not a percentage", func(c *kc) { c.EvictionSoft = map[string]string{"nodefs.available": "NaN%"} },
			`evictionSoft[nodefs.available]: cannot be expressed as Bottlerocket settings.kubernetes.eviction-soft: "NaN%" is not a percentage`},
		{"threshold that is not a quantity", func(c *kc) { c.EvictionHard = map[string]string{"memory.available": "lots"} },
			`evictionHard[memory.available]: cannot be expressed as Bottlerocket settings.kubernetes.eviction-hard: "lots" is not a Kubernetes quantity`},
		{"grace period that is not a duration", func(c *kc) { c.EvictionSoftGracePeriod = map[string]string{"memory.available": "soon"} },
			`evictionSoftGracePeriod[memory.available]: cannot be expressed as Bottlerocket settings.kubernetes.eviction-soft-grace-period: "soon" is not a duration`},
		{"negative grace period", func(c *kc) { c.EvictionSoftGracePeriod = map[string]string{"memory.available": "-30s"} },
			`evictionSoftGracePeriod[memory.available]: cannot be expressed as Bottlerocket settings.kubernetes.eviction-soft-grace-period: negative duration "-30s": Bottlerocket accepts only durations of zero or more`},
		{"negative shutdownGracePeriod", func(c *kc) { c.ShutdownGracePeriod = dur(-time.Second) },
			"shutdownGracePeriod: cannot be expressed as Bottlerocket settings.kubernetes.shutdown-grace-period: negative duration -1s: Bottlerocket accepts only durations of zero or more"},
		{"pid is not a reserved resource in Bottlerocket", func(c *kc) { c.SystemReserved = map[string]string{"pid": "1000"} },
			`systemReserved[pid]: cannot be expressed as Bottlerocket settings.kubernetes.system-reserved: resource "pid" is not one Bottlerocket accepts: cpu, ephemeral-storage, memory`},
		{"reserved value not a quantity", func(c *kc) { c.KubeReserved = map[string]string{"cpu": "half"} },
			`kubeReserved[cpu]: cannot be expressed as Bottlerocket settings.kubernetes.kube-reserved: "half" is not a Kubernetes quantity`},
		{"containerLogMaxSize not a quantity", func(c *kc) { c.ContainerLogMaxSize = "10 MB" },
			`containerLogMaxSize: cannot be expressed as Bottlerocket settings.kubernetes.container-log-max-size: "10 MB" is not a Kubernetes quantity`},
		{"cpuManagerPolicy outside Bottlerocket's list", func(c *kc) { c.CPUManagerPolicy = "Static" },
			`cpuManagerPolicy: cannot be expressed as Bottlerocket settings.kubernetes.cpu-manager-policy: "Static" is not one of the values Bottlerocket accepts: none, static`},
		{"memoryManagerPolicy outside Bottlerocket's list", func(c *kc) { c.MemoryManagerPolicy = "BestEffort" },
			`memoryManagerPolicy: cannot be expressed as Bottlerocket settings.kubernetes.memory-manager-policy: "BestEffort" is not one of the values Bottlerocket accepts: None, Static`},
		{"topologyManagerPolicy outside Bottlerocket's list", func(c *kc) { c.TopologyManagerPolicy = "prefer-closest-numa-nodes" },
			`topologyManagerPolicy: cannot be expressed as Bottlerocket settings.kubernetes.topology-manager-policy: "prefer-closest-numa-nodes" is not one of the values Bottlerocket accepts: best-effort, none, restricted, single-numa-node`},
		{"topologyManagerScope outside Bottlerocket's list", func(c *kc) { c.TopologyManagerScope = "node" },
			`topologyManagerScope: cannot be expressed as Bottlerocket settings.kubernetes.topology-manager-scope: "node" is not one of the values Bottlerocket accepts: container, pod`},
		{"cpu manager option Bottlerocket lacks", func(c *kc) { c.CPUManagerPolicyOptions = map[string]string{"align-by-socket": "true"} },
			`cpuManagerPolicyOptions[align-by-socket]: cannot be expressed as Bottlerocket settings.kubernetes.cpu-manager-policy-options: option "align-by-socket" is not one Bottlerocket accepts: full-pcpus-only`},
		{"cpu manager option not a boolean", func(c *kc) { c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "yes"} },
			`cpuManagerPolicyOptions[full-pcpus-only]: cannot be expressed as Bottlerocket settings.kubernetes.cpu-manager-policy-options: "yes" is not a boolean`},
		{"clusterDNS not an IP", func(c *kc) { c.ClusterDNS = []string{"10.96.0.10", "kube-dns"} },
			`clusterDNS[1]: cannot be expressed as Bottlerocket settings.kubernetes.cluster-dns-ip: "kube-dns" is not an IP address`},
		{"clusterDNS with a zone", func(c *kc) { c.ClusterDNS = []string{"fe80::1%eth0"} },
			`clusterDNS[0]: cannot be expressed as Bottlerocket settings.kubernetes.cluster-dns-ip: IP address "fe80::1%eth0" has a zone, which Bottlerocket does not accept`},
		{"clusterDomain starting with a dot", func(c *kc) { c.ClusterDomain = ".cluster.local" },
			`clusterDomain: cannot be expressed as Bottlerocket settings.kubernetes.cluster-domain: domain ".cluster.local" starts with a dot`},
		{"clusterDomain that is an IP", func(c *kc) { c.ClusterDomain = "10.0.0.1" },
			`clusterDomain: cannot be expressed as Bottlerocket settings.kubernetes.cluster-domain: "10.0.0.1" is an IP address, not a domain`},
		{"clusterDomain with a slash", func(c *kc) { c.ClusterDomain = "foo/com" },
			`clusterDomain: cannot be expressed as Bottlerocket settings.kubernetes.cluster-domain: domain "foo/com" contains '/', which a host name cannot contain`},
		{"sysctl with a newline", func(c *kc) { c.AllowedUnsafeSysctls = []string{"net.core.somaxconn", "kernel.shm*\nevil = true"} },
			`allowedUnsafeSysctls[1]: cannot be expressed as Bottlerocket settings.kubernetes.allowed-unsafe-sysctls: "kernel.shm*\nevil = true" contains a control character or line break (U+000A)`},
		{"sysctl with a Unicode line separator", func(c *kc) { c.AllowedUnsafeSysctls = []string{"a\u2028b"} },
			`allowedUnsafeSysctls[0]: cannot be expressed as Bottlerocket settings.kubernetes.allowed-unsafe-sysctls: "a\u2028b" contains a control character or line break (U+2028)`},
		{"sysctl not UTF-8", func(c *kc) { c.AllowedUnsafeSysctls = []string{"a\xffb"} },
			`allowedUnsafeSysctls[0]: cannot be expressed as Bottlerocket settings.kubernetes.allowed-unsafe-sysctls: "a\xffb" is not valid UTF-8`},
		{"providerID with a space", func(c *kc) { c.ProviderID = "vsphere://42 30" },
			`providerID: cannot be expressed as Bottlerocket settings.kubernetes.provider-id: "vsphere://42 30" contains white space, which a URL cannot contain`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c kc
			tt.set(&c)
			out, err := Render(&c)
			if err == nil {
				t.Fatalf("Render succeeded with %q, want an error", out)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
			var ive *InvalidValueError
			if !errors.As(err, &ive) {
				t.Fatalf("error %T is not an *InvalidValueError", err)
			}
			if !strings.HasPrefix(ive.Setting, settingsPrefix) || ive.Field == "" || ive.Reason == "" {
				t.Errorf("InvalidValueError fields incomplete: %+v", ive)
			}
		})
	}
}

// TestUnsupportedFieldsAllAtOnce checks that every unsupported field is named
// in one error, sorted, and that supported fields next to them do not
// change that.
func TestUnsupportedFieldsAllAtOnce(t *testing.T) {
	c := kc{
		MaxPods:       100,
		StaticPodPath: "/etc/kubernetes/manifests",
		ReadOnlyPort:  10255,
		FeatureGates:  map[string]bool{"SomeGate": true},
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
		},
		RotateCertificates: true,
	}
	_, err := Render(&c)
	if err == nil {
		t.Fatal("Render succeeded, want an error")
	}
	want := "unsupported KubeletConfiguration fields for Bottlerocket: authentication, featureGates, readOnlyPort, rotateCertificates, staticPodPath"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error text (-want +got):\n%s", diff)
	}
	var ufe *UnsupportedFieldsError
	if !errors.As(err, &ufe) {
		t.Fatalf("error %T is not an *UnsupportedFieldsError", err)
	}
	if diff := cmp.Diff([]string{"authentication", "featureGates", "readOnlyPort", "rotateCertificates", "staticPodPath"}, ufe.Fields); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

// TestErrorsJoined checks that unsupported fields and invalid values come
// back together, unsupported first, each findable with errors.As.
func TestErrorsJoined(t *testing.T) {
	c := kc{
		ReadOnlyPort: 10255,
		MaxPods:      -3,
		KubeReserved: map[string]string{"pid": "100", "cpu": "bad"},
	}
	_, err := Render(&c)
	if err == nil {
		t.Fatal("Render succeeded, want an error")
	}
	want := strings.Join([]string{
		"unsupported KubeletConfiguration fields for Bottlerocket: readOnlyPort",
		`kubeReserved[cpu]: cannot be expressed as Bottlerocket settings.kubernetes.kube-reserved: "bad" is not a Kubernetes quantity`,
		`kubeReserved[pid]: cannot be expressed as Bottlerocket settings.kubernetes.kube-reserved: resource "pid" is not one Bottlerocket accepts: cpu, ephemeral-storage, memory`,
		"maxPods: cannot be expressed as Bottlerocket settings.kubernetes.max-pods: Bottlerocket accepts only values of zero or more",
	}, "\n")
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error text (-want +got):\n%s", diff)
	}
	var ufe *UnsupportedFieldsError
	var ive *InvalidValueError
	if !errors.As(err, &ufe) || !errors.As(err, &ive) {
		t.Errorf("errors.As: unsupported found %v, invalid value found %v; want both", ufe != nil, ive != nil)
	}
}

// TestEveryFieldMappedOrUnsupported walks every field of
// KubeletConfiguration by reflection, sets it alone, and checks that Render
// either maps it (it is in SupportedFields and is not reported unsupported)
// or reports exactly it as unsupported. A field added to the upstream type is
// thereby covered the day the dependency is bumped.
func TestEveryFieldMappedOrUnsupported(t *testing.T) {
	supported := map[string]bool{}
	for _, m := range SupportedFields() {
		supported[m.Field] = true
	}
	typ := reflect.TypeFor[kc]()
	seen := map[string]bool{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Anonymous {
			continue
		}
		name := jsonName(f)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			var c kc
			if !fillNonZero(reflect.ValueOf(&c).Elem().Field(i)) {
				t.Fatalf("could not give %s a non-zero value", name)
			}
			_, err := Render(&c)
			var ufe *UnsupportedFieldsError
			gotUnsupported := errors.As(err, &ufe)
			if supported[name] {
				if gotUnsupported {
					t.Errorf("mapped field reported unsupported: %v", err)
				}
				return
			}
			if !gotUnsupported {
				t.Fatalf("unmapped field not reported unsupported; err = %v", err)
			}
			if diff := cmp.Diff([]string{name}, ufe.Fields); diff != "" {
				t.Errorf("Fields (-want +got):\n%s", diff)
			}
		})
	}
	for name := range supported {
		if !seen[name] {
			t.Errorf("SupportedFields lists %s, which KubeletConfiguration does not have", name)
		}
	}
	// The design's 32: every setting Bottlerocket documents as a
	// KubeletConfiguration field (doc.go).
	if got := len(SupportedFields()); got != 32 {
		t.Errorf("len(SupportedFields()) = %d, want 32", got)
	}
}

// fillNonZero gives v some non-zero value, recursing into the first field of
// a struct that accepts one. It reports whether it managed.
func fillNonZero(v reflect.Value) bool {
	if !v.CanSet() {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return true
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		fillNonZero(k)
		fillNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
		return true
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNonZero(s.Index(0))
		v.Set(s)
		return true
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if fillNonZero(v.Field(i)) {
				return true
			}
		}
		return false
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	default:
		return false
	}
	return true
}

// TestSupportedFieldsSorted checks the documented order and that settings
// are unique, so no two fields write the same key.
func TestSupportedFieldsSorted(t *testing.T) {
	fs := SupportedFields()
	if !slices.IsSortedFunc(fs, func(a, b FieldMapping) int { return strings.Compare(a.Field, b.Field) }) {
		t.Errorf("SupportedFields is not sorted by field: %v", fs)
	}
	settings := map[string]string{}
	for _, f := range fs {
		if prev, dup := settings[f.Setting]; dup {
			t.Errorf("%s and %s both render to %s", prev, f.Field, f.Setting)
		}
		settings[f.Setting] = f.Field
	}
	fs[0].Field = "mutated"
	if SupportedFields()[0].Field == "mutated" {
		t.Error("SupportedFields returned shared state")
	}
}
