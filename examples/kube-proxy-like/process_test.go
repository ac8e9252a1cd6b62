package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/status"
)

// testBinary is this command, built once for the real-process tests (which
// -short skips).
var testBinary = proctest.Binary{Name: "kube-proxy-like"}

func TestMain(m *testing.M) {
	os.Exit(testBinary.RunTests(m))
}

// node is the files of one simulated node (proctest.Node) with the shared
// ConfigMap.
type node struct {
	proctest.Node
}

// proxyDoc is a KubeProxyConfiguration document with the given body lines.
func proxyDoc(body ...string) string {
	return "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" + strings.Join(body, "\n") + "\n"
}

// shared is the shared ConfigMap kube-system/kube-proxy of the directory
// source, as kubeadm names it. Each put is an edit: the directory source
// derives a new resourceVersion from the new content.
const sharedUID types.UID = "e0000000-0000-4000-8000-000000000001"

// put writes the shared ConfigMap with payload and a 1s trial.
func (n node) put(t *testing.T, payload string) {
	t.Helper()
	cm := corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy", UID: sharedUID,
			Annotations: map[string]string{components.TrialDurationAnnotation: "1s"}},
		Data: map[string]string{kubeproxy.Profile{}.PayloadKey(): payload},
	}
	n.WriteConfigMap(t, &cm)
}

// assignShared points the directory source's assignment at the shared
// ConfigMap (what --configmap does against an API server).
func (n node) assignShared(t *testing.T) {
	t.Helper()
	src := corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "kube-proxy", UID: sharedUID, KubeletConfigKey: kubeproxy.Profile{}.PayloadKey(),
	}}
	n.WriteAssignment(t, &src)
}

// configzResponse is the body of /configz; the config's key is kube-proxy's
// own /configz key.
type configzResponse struct {
	KubeProxyConfig *kubeproxyv1alpha1.KubeProxyConfiguration `json:"kubeproxy.config.k8s.io"`
	ConfigOK        *app.Condition                            `json:"configOK"`
}

// getConfigz fetches /configz from addr.
func getConfigz(addr string) (configzResponse, error) {
	return proctest.GetConfigz[configzResponse](addr)
}

// seriesLabels returns the label set of the one series of an info metric
// in exposition, or "".
func seriesLabels(exposition, metric string) string {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, metric+"{"); ok {
			labels, _, _ := strings.Cut(rest, "}")
			return labels
		}
	}
	return ""
}

// proxyView is what the tests compare in /configz.
type proxyView struct {
	ClusterCIDR      string
	HostnameOverride string
	BindAddress      string
	FeatureGates     map[string]bool
	ConfigOK         app.Condition
}

func viewOf(z configzResponse) proxyView {
	v := proxyView{
		ClusterCIDR:      z.KubeProxyConfig.ClusterCIDR,
		HostnameOverride: z.KubeProxyConfig.HostnameOverride,
		BindAddress:      z.KubeProxyConfig.BindAddress,
		FeatureGates:     z.KubeProxyConfig.FeatureGates,
	}
	if z.ConfigOK != nil {
		v.ConfigOK = *z.ConfigOK
	}
	return v
}

// TestReloadsInProcess edits the shared ConfigMap three times under a
// restart loop: a new valid version, an invalid one, and a fixed one. Each
// is applied in the same process (one start, one PID): /configz changes to
// the new version, the invalid version is marked bad and the process
// serves the last-known-good version instead, and the instance file's
// fields stay on top of every version.
func TestReloadsInProcess(t *testing.T) {
	bin := testBinary.Build(t)
	n := node{proctest.NewNode(t)}
	proctest.WriteFile(t, n.File("instance.yaml"), proxyDoc("hostnameOverride: node-a", "bindAddress: 10.1.2.3"))
	n.put(t, proxyDoc("clusterCIDR: 10.244.0.0/16"))
	n.assignShared(t)
	l := proctest.StartLoop(t, bin, n.Args("--instance-config="+n.File("instance.yaml"), "--feature-gates=KubeProxyIPVS=true"), nil)

	using := app.Condition{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed,
		Message: status.CurrentMessage(status.Ref{UID: sharedUID}, status.LocalDefault)}
	var addr string
	var pid int
	// expect waits until /configz serves want, and checks that the one
	// process started so far is still the one serving.
	expect := func(step string, want proxyView) {
		t.Helper()
		proctest.WaitFor(t, step, func() (bool, string) {
			procs := l.All()
			if len(procs) == 0 {
				return false, "not started yet"
			}
			if len(procs) != 1 || procs[0].Exited() {
				t.Fatalf("%s: the process restarted or exited; want one process that reloads\n%s", step, proctest.DescribeProcs(procs))
			}
			if addr == "" {
				addr, pid = procs[0].ServingAddr(), procs[0].PID()
				if addr == "" {
					return false, "not serving yet"
				}
			}
			z, err := getConfigz(addr)
			if err != nil {
				return false, err.Error()
			}
			got := viewOf(z)
			diff := cmp.Diff(want, got)
			return diff == "", "(-want +got):\n" + diff
		}, func() string { return proctest.DescribeProcs(l.All()) })
		c, _, err := n.ReadStatus()
		if err != nil || c.PID != pid {
			t.Errorf("%s: status file written by pid %d (err %v), want %d", step, c.PID, err, pid)
		}
	}
	// waitPromoted waits until the process reports, in its metrics, that
	// the version it runs is last-known-good.
	waitPromoted := func(step string) {
		t.Helper()
		proctest.WaitFor(t, step, func() (bool, string) {
			body, _, err := proctest.Get(addr, "/metrics")
			if err != nil {
				return false, err.Error()
			}
			active := seriesLabels(body, status.MetricActiveConfigInfo)
			lkg := seriesLabels(body, status.MetricLastKnownGoodConfigInfo)
			return active != "" && active == lkg && strings.Contains(lkg, string(sharedUID)),
				fmt.Sprintf("active {%s}, last-known-good {%s}", active, lkg)
		}, nil)
	}

	expect("version 1", proxyView{ClusterCIDR: "10.244.0.0/16", HostnameOverride: "node-a", BindAddress: "10.1.2.3",
		FeatureGates: map[string]bool{"KubeProxyIPVS": true}, ConfigOK: using})

	n.put(t, proxyDoc("clusterCIDR: 10.96.0.0/12", "featureGates:", "  NFTablesNetlink: true"))
	expect("version 2, reloaded", proxyView{ClusterCIDR: "10.96.0.0/12", HostnameOverride: "node-a", BindAddress: "10.1.2.3",
		FeatureGates: map[string]bool{"KubeProxyIPVS": true, "NFTablesNetlink": true}, ConfigOK: using})
	waitPromoted("version 2 promoted to last-known-good after its 1s trial")

	n.put(t, proxyDoc("clusterCIDR: 10.200.0.0/16", "mode: bogus"))
	expect("version 3 (invalid), rolled back to version 2", proxyView{ClusterCIDR: "10.96.0.0/12", HostnameOverride: "node-a",
		BindAddress: "10.1.2.3", FeatureGates: map[string]bool{"KubeProxyIPVS": true, "NFTablesNetlink": true},
		ConfigOK: app.Condition{Status: corev1.ConditionFalse, Reason: status.ValidateFailedReason(sharedUID),
			Message: status.LastKnownGoodMessage(status.Ref{UID: sharedUID}, status.LocalDefault)}})

	n.put(t, proxyDoc("clusterCIDR: 10.100.0.0/16"))
	expect("version 4, reloaded", proxyView{ClusterCIDR: "10.100.0.0/16", HostnameOverride: "node-a", BindAddress: "10.1.2.3",
		FeatureGates: map[string]bool{"KubeProxyIPVS": true}, ConfigOK: using})

	if diff := cmp.Diff([]string{"running"}, proctest.ExitCodes(l.All())); diff != "" {
		t.Errorf("processes (-want +got):\n%s", diff)
	}
	t.Logf("4 versions applied by 1 process (pid %d), %d start(s)", pid, len(l.All()))
}

// TestLayersAndFlags starts the binary on local layers, with and without
// the shared config and config flags, and reads /configz: init file (or the
// shared config) < drop-ins < instance file < flags.
func TestLayersAndFlags(t *testing.T) {
	bin := testBinary.Build(t)
	sharedOK := app.Condition{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed,
		Message: status.CurrentMessage(status.Ref{UID: sharedUID}, status.LocalInit)}
	localOK := app.Condition{Status: corev1.ConditionTrue, Reason: status.ReasonLocalInit,
		Message: status.CurrentMessage(status.Ref{}, status.LocalInit)}
	for _, tc := range []struct {
		name   string
		shared bool
		flags  []string
		want   proxyView
	}{{
		name: "local layers",
		want: proxyView{ClusterCIDR: "10.1.0.0/16", HostnameOverride: "instance-host", BindAddress: "10.9.9.9",
			FeatureGates: map[string]bool{"ContextualLogging": true}, ConfigOK: localOK},
	}, {
		name:   "the shared config replaces the init file only",
		shared: true,
		want: proxyView{ClusterCIDR: "10.244.0.0/16", HostnameOverride: "instance-host", BindAddress: "10.9.9.9",
			FeatureGates: map[string]bool{"NFTablesNetlink": true}, ConfigOK: sharedOK},
	}, {
		name:   "flags win over every layer",
		shared: true,
		flags:  []string{"--hostname-override=flag-host", "--cluster-cidr=192.168.0.0/16", "--feature-gates=LoggingBetaOptions=true"},
		want: proxyView{ClusterCIDR: "192.168.0.0/16", HostnameOverride: "flag-host", BindAddress: "10.9.9.9",
			FeatureGates: map[string]bool{"NFTablesNetlink": true, "LoggingBetaOptions": true}, ConfigOK: sharedOK},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := node{proctest.NewNode(t)}
			proctest.WriteFile(t, n.File("init.yaml"), proxyDoc("clusterCIDR: 10.1.0.0/16", "bindAddress: 10.0.0.1",
				"featureGates:", "  ContextualLogging: true"))
			if err := os.Mkdir(n.File("conf.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			proctest.WriteFile(t, n.File("conf.d/10-bind.conf"), proxyDoc("bindAddress: 10.0.0.2", "hostnameOverride: dropin-host"))
			proctest.WriteFile(t, n.File("instance.yaml"), proxyDoc("hostnameOverride: instance-host", "bindAddress: 10.9.9.9"))
			if tc.shared {
				n.put(t, proxyDoc("clusterCIDR: 10.244.0.0/16", "featureGates:", "  NFTablesNetlink: true"))
				n.assignShared(t)
			}
			p := proctest.Start(t, bin, n.Args(append([]string{"--config=" + n.File("init.yaml"),
				"--config-dir=" + n.File("conf.d"), "--instance-config=" + n.File("instance.yaml")}, tc.flags...)...), nil)
			p.WaitServing(t)
			if body, code, err := proctest.Get(p.ServingAddr(), "/healthz"); err != nil || code != http.StatusOK || body != "ok" {
				t.Errorf("/healthz = %d %q, %v; want 200 \"ok\"", code, body, err)
			}
			z, err := getConfigz(p.ServingAddr())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, viewOf(z)); diff != "" {
				t.Errorf("/configz (-want +got):\n%s", diff)
			}
			if code := p.Terminate(t); code != 0 {
				t.Errorf("exit code after SIGTERM = %d, want 0; stderr:\n%s", code, proctest.Tail(p.Stderr(), 5))
			}
		})
	}
}

// TestInvalidLocalConfigStops runs the binary on a broken local layer: it
// must exit 1 before serving, with an error naming the file (or flag) and
// the field.
func TestInvalidLocalConfigStops(t *testing.T) {
	bin := testBinary.Build(t)
	for _, tc := range []struct {
		name  string
		files map[string]string // name -> content
		args  []string          // "DIR" is replaced by the test's dir
		want  []string          // substrings of the error; "DIR" replaced too
	}{{
		name:  "unknown field in the init file",
		files: map[string]string{"init.yaml": proxyDoc("clusterCIDR: 10.1.0.0/16", "clusterCidr: 10.2.0.0/16")},
		args:  []string{"--config=DIR/init.yaml"},
		want:  []string{"invalid local config", "DIR/init.yaml", `unknown field "clusterCidr"`},
	}, {
		name:  "invalid address in the instance file",
		files: map[string]string{"instance.yaml": proxyDoc("bindAddress: node-a")},
		args:  []string{"--instance-config=DIR/instance.yaml"},
		want:  []string{"invalid local config", "bindAddress: Invalid value: \"node-a\"", "(set by DIR/instance.yaml)"},
	}, {
		name: "invalid flag",
		args: []string{"--cluster-cidr=10.0.0.0/33"},
		want: []string{"invalid local config", "clusterCIDR: Invalid value: \"10.0.0.0/33\"", "(set by flag --cluster-cidr)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := node{proctest.NewNode(t)}
			n.WriteFiles(t, tc.files)
			proctest.ExpectStartError(t, bin, "kube-proxy-like: ", n.Args(n.ExpandDir(tc.args)...), n.ExpandDir(tc.want))
		})
	}
}

// TestExitCodes runs the binary on --help, --version and a wrong command
// line: exit codes 0, 0 and 2, through app.Main.
func TestExitCodes(t *testing.T) {
	proctest.ExpectComponentExitCodes(t, testBinary.Build(t), "kube-proxy-like", "kube-proxy-like serves /healthz")
}
