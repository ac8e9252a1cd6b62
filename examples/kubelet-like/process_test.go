package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/status"
)

// testBinary is this command, built once for the real-process tests (which
// -short skips).
var testBinary = proctest.Binary{Name: "kubelet-like"}

func TestMain(m *testing.M) {
	os.Exit(testBinary.RunTests(m))
}

// node is the files of one simulated node (proctest.Node) with the
// kubelet's remote configs.
type node struct {
	proctest.Node
}

func (n node) startupsPath() string {
	return filepath.Join(n.StateDir(), "tracking", componentVersion, "startups.json")
}

// kubeletDoc is a KubeletConfiguration document with the given body lines.
func kubeletDoc(body ...string) string {
	return "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + strings.Join(body, "\n") + "\n"
}

// remoteConfig is a ConfigMap of the directory source.
type remoteConfig struct {
	name      string
	uid       types.UID
	trial     string // dynconfig.io/trial-duration, if set
	threshold int    // dynconfig.io/crash-loop-threshold, if >= 0
	payload   string
}

// put writes the ConfigMap into the directory source.
func (n node) put(t *testing.T, rc remoteConfig) {
	t.Helper()
	ann := map[string]string{}
	if rc.trial != "" {
		ann[components.TrialDurationAnnotation] = rc.trial
	}
	if rc.threshold >= 0 {
		ann[components.CrashLoopThresholdAnnotation] = strconv.Itoa(rc.threshold)
	}
	cm := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: rc.name, UID: rc.uid, Annotations: ann},
		Data:       map[string]string{kubelet.PayloadKey: rc.payload},
	}
	n.WriteConfigMap(t, &cm)
}

// assign points the directory source's assignment at rc.
func (n node) assign(t *testing.T, rc remoteConfig) {
	t.Helper()
	src := corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: rc.name, UID: rc.uid, KubeletConfigKey: kubelet.PayloadKey,
	}}
	n.WriteAssignment(t, &src)
}

// lastKnownGoodUID reads the last-known-good pointer of the state dir (its
// documented envelope) and returns the UID it names, "" for local.
func (n node) lastKnownGoodUID() (types.UID, error) {
	data, err := os.ReadFile(filepath.Join(n.StateDir(), "meta", "last-known-good"))
	if errors.Is(err, fs.ErrNotExist) || len(data) == 0 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var env struct {
		Pointer struct {
			Source *corev1.NodeConfigSource `json:"source"`
		} `json:"pointer"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return "", fmt.Errorf("last-known-good pointer: %w", err)
	}
	if env.Pointer.Source == nil || env.Pointer.Source.ConfigMap == nil {
		return "", nil
	}
	return env.Pointer.Source.ConfigMap.UID, nil
}

// configzResponse is the body of /configz.
type configzResponse struct {
	KubeletConfig *kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
	ConfigOK      *app.Condition                       `json:"configOK"`
}

// getConfigz fetches /configz from addr.
func getConfigz(addr string) (configzResponse, error) {
	return proctest.GetConfigz[configzResponse](addr)
}

// waitStatus waits until the status file satisfies want and was written by
// the running process of l that serves; it returns that process.
func waitStatus(t *testing.T, n node, l *proctest.RestartLoop, what string, want func(app.Condition) bool) *proctest.Proc {
	t.Helper()
	var serving *proctest.Proc
	proctest.WaitFor(t, what, func() (bool, string) {
		if err := l.Failure(); err != nil {
			t.Fatalf("restart loop: %v", err)
		}
		c, ok, err := n.ReadStatus()
		if err != nil || !ok {
			return false, fmt.Sprintf("status file: ok=%t err=%v", ok, err)
		}
		if !want(c) {
			return false, fmt.Sprintf("status %+v", c)
		}
		procs := l.All()
		if len(procs) == 0 {
			return false, "no process started yet"
		}
		last := procs[len(procs)-1]
		if last.PID() != c.PID || last.Exited() || last.ServingAddr() == "" {
			return false, fmt.Sprintf("status %+v, last process pid %d exited=%t serving=%q", c, last.PID(), last.Exited(), last.ServingAddr())
		}
		serving = last
		return true, ""
	}, func() string { return proctest.DescribeProcs(l.All()) })
	return serving
}

// initMaxPods is maxPods in the local init file of the tests.
const initMaxPods = 50

// TestCrashLoopToleratesExactlyThresholdCrashRestarts assigns a config that
// crashes the component at startup and counts the process starts: the start
// that adopts the config runs it (and crashes), exactly threshold crash
// restarts run it again, and the next start marks it bad and rolls back,
// whatever the threshold its ConfigMap annotation sets, and whether the
// config was adopted by a restart of a running process or at startup.
func TestCrashLoopToleratesExactlyThresholdCrashRestarts(t *testing.T) {
	bin := testBinary.Build(t)
	for _, threshold := range []int{0, 1, 3} {
		for _, atStartup := range []bool{false, true} {
			adopted := "by restart"
			if atStartup {
				adopted = "at startup"
			}
			t.Run(fmt.Sprintf("threshold %d adopted %s", threshold, adopted), func(t *testing.T) {
				crashLoopTolerance(t, bin, threshold, atStartup)
			})
		}
	}
}

func crashLoopTolerance(t *testing.T, bin string, threshold int, atStartup bool) {
	{
		{
			n := node{proctest.NewNode(t)}
			initFile := n.File("init.yaml")
			proctest.WriteFile(t, initFile, kubeletDoc(fmt.Sprintf("maxPods: %d", initMaxPods)))
			crash := remoteConfig{name: "kubelet-crash", uid: "c0000000-0000-4000-8000-000000000001",
				trial: "10m", threshold: threshold,
				payload: kubeletDoc("maxPods: 77", "providerID: "+DemoCrashProviderID)}
			var want []string
			var l *proctest.RestartLoop
			if atStartup {
				// Assigned while the component is down: the first start
				// adopts it.
				n.put(t, crash)
				n.assign(t, crash)
				l = proctest.StartLoop(t, bin, n.Args("--config="+initFile), nil)
			} else {
				l = proctest.StartLoop(t, bin, n.Args("--config="+initFile), nil)
				waitStatus(t, n, l, "the local init config", func(c app.Condition) bool {
					return c.Status == corev1.ConditionTrue && c.Reason == status.ReasonLocalInit
				})
				n.put(t, crash)
				n.assign(t, crash)
				// The running process sees the assignment and exits 0 for
				// its successor to adopt it.
				want = append(want, "exit 0")
			}
			serving := waitStatus(t, n, l, "the crash-loop rollback", func(c app.Condition) bool {
				return c.Reason == status.CrashLoopReason(crash.uid)
			})

			// The adopting start and threshold crash restarts ran the
			// config and crashed; the next start rolled back and serves.
			procs := l.All()
			for range threshold + 1 {
				want = append(want, "exit 1")
			}
			want = append(want, "running")
			if diff := cmp.Diff(want, proctest.ExitCodes(procs)); diff != "" {
				t.Errorf("process exits (-want +got):\n%s\n%s", diff, proctest.DescribeProcs(procs))
			}
			t.Logf("threshold %d: %d starts", threshold, len(procs))
			first := 1
			if atStartup {
				first = 0
			}
			for i, p := range procs[first : len(procs)-1] {
				if !strings.Contains(p.Stderr(), "demo hook: crashing at startup") {
					t.Errorf("process %d exited 1 without the demo hook's error; stderr:\n%s", i+2, proctest.Tail(p.Stderr(), 4))
				}
			}

			got, _, err := n.ReadStatus()
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := app.Condition{Status: corev1.ConditionFalse, Reason: status.CrashLoopReason(crash.uid),
				Message: status.LastKnownGoodMessage(status.Ref{}, status.LocalInit), PID: serving.PID()}
			if diff := cmp.Diff(wantStatus, got); diff != "" {
				t.Errorf("status file (-want +got):\n%s", diff)
			}
			z, err := getConfigz(serving.ServingAddr())
			if err != nil {
				t.Fatal(err)
			}
			if z.KubeletConfig.MaxPods != initMaxPods || z.KubeletConfig.ProviderID == DemoCrashProviderID {
				t.Errorf("/configz serves maxPods %d, providerID %q; want the local init config (maxPods %d, no crash hook)",
					z.KubeletConfig.MaxPods, z.KubeletConfig.ProviderID, initMaxPods)
			}
			wantStatus.PID = 0
			if diff := cmp.Diff(&wantStatus, z.ConfigOK); diff != "" {
				t.Errorf("/configz configOK (-want +got):\n%s", diff)
			}
		}
	}
}

// TestDeadEnd promotes a good config, crash-loops on a new one (rolled back
// to the good one after threshold+1 starts), and then makes every start
// crash whatever the config (DYNCONFIG_DEMO_CRASH=1): the rollback target
// crash-loops too, and after threshold+1 more starts the condition says
// "dead end:", with the bad mark kept as evidence.
func TestDeadEnd(t *testing.T) {
	bin := testBinary.Build(t)
	const threshold = 2
	n := node{proctest.NewNode(t)}
	good := remoteConfig{name: "kubelet-good", uid: "a0000000-0000-4000-8000-000000000001",
		trial: "1s", threshold: -1, payload: kubeletDoc("maxPods: 42")}
	crash := remoteConfig{name: "kubelet-crash", uid: "b0000000-0000-4000-8000-000000000002",
		trial: "10m", threshold: threshold,
		payload: kubeletDoc("maxPods: 77", "providerID: "+DemoCrashProviderID)}
	n.put(t, good)
	n.put(t, crash)
	n.assign(t, good)
	deadEnd := func() bool {
		c, ok, err := n.ReadStatus()
		return err == nil && ok && strings.HasPrefix(c.Reason, "dead end:")
	}
	l := proctest.StartLoop(t, bin, n.Args(), deadEnd)

	// 1. The good config runs and, after its 1s trial, becomes last-known-good.
	waitStatus(t, n, l, "the good config", func(c app.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Message == status.CurrentMessage(status.Ref{UID: good.uid}, status.LocalDefault)
	})
	proctest.WaitFor(t, "the good config's promotion to last-known-good", func() (bool, string) {
		uid, err := n.lastKnownGoodUID()
		return err == nil && uid == good.uid, fmt.Sprintf("last-known-good %q, err %v", uid, err)
	}, func() string { return proctest.DescribeProcs(l.All()) })

	// 2. The crash config: the adopting start and threshold crash
	// restarts run it; the next start rolls back to the good one.
	n.assign(t, crash)
	rollback := waitStatus(t, n, l, "the crash-loop rollback", func(c app.Condition) bool {
		return c.Reason == status.CrashLoopReason(crash.uid)
	})
	procs := l.All()
	if diff := cmp.Diff([]string{"exit 0", "exit 1", "exit 1", "exit 1", "running"}, proctest.ExitCodes(procs)); diff != "" {
		t.Fatalf("process exits up to the rollback (-want +got):\n%s\n%s", diff, proctest.DescribeProcs(procs))
	}
	c, _, _ := n.ReadStatus()
	if want := status.LastKnownGoodMessage(status.Ref{UID: good.uid}, status.LocalDefault); c.Message != want {
		t.Errorf("message after the rollback = %q, want %q", c.Message, want)
	}
	if z, err := getConfigz(rollback.ServingAddr()); err != nil || z.KubeletConfig.MaxPods != 42 {
		t.Errorf("/configz after the rollback: err %v; want the good config's maxPods 42", err)
	}

	// 3. Now every start crashes, not because of any config. Stop the
	// serving process (exit 0, restarted by the loop) and count again.
	startsBefore := len(procs)
	l.SetEnv(DemoCrashEnv + "=1")
	if code := rollback.Terminate(t); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0", code)
	}
	select {
	case <-l.Stopped():
	case <-time.After(proctest.WaitTimeout):
		t.Fatalf("no dead end reported\n%s", proctest.DescribeProcs(l.All()))
	}
	procs = l.All()[startsBefore:]
	want := make([]string, threshold+1)
	for i := range want {
		want[i] = "exit 1"
	}
	if diff := cmp.Diff(want, proctest.ExitCodes(procs)); diff != "" {
		t.Errorf("process exits after the rollback (-want +got):\n%s\n%s", diff, proctest.DescribeProcs(procs))
	}
	t.Logf("dead end reported at start %d after the rollback (threshold %d)", len(procs), threshold)
	for i, p := range procs {
		if !strings.Contains(p.Stderr(), DemoCrashEnv+"=1") {
			t.Errorf("start %d after the rollback did not crash through %s; stderr:\n%s", i+1, DemoCrashEnv, proctest.Tail(p.Stderr(), 4))
		}
	}
	got, _, err := n.ReadStatus()
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := app.Condition{Status: corev1.ConditionFalse,
		Reason:  status.DeadEndReason(status.CrashLoopReason(crash.uid), true),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.uid}, status.LocalDefault),
		PID:     procs[len(procs)-1].PID()}
	if diff := cmp.Diff(wantStatus, got); diff != "" {
		t.Errorf("status file (-want +got):\n%s", diff)
	}
	// The evidence stays: the crash config is still marked bad, and the
	// good one is still last-known-good.
	data, err := os.ReadFile(filepath.Join(n.StateDir(), "tracking", componentVersion, "bad-configs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), string(crash.uid)+"/") || !strings.Contains(string(data), status.CrashLoopReason(crash.uid)) {
		t.Errorf("bad-configs.json does not hold the crash config's mark: %s", data)
	}
	if uid, err := n.lastKnownGoodUID(); err != nil || uid != good.uid {
		t.Errorf("last-known-good after the dead end = %q (err %v), want %q", uid, err, good.uid)
	}

	// 4. The repair: the node is fixed (no DYNCONFIG_DEMO_CRASH any more)
	// and the operator forgets the mark, as dynconfigctl forget-bad does
	// (the loop has stopped: the state dir is free). The crash config gets
	// a fresh trial: the crash evidence from before the repair does not
	// count, so it runs at its adopting start and threshold crash restarts
	// again before it is marked bad again.
	st, err := checkpoint.Open(checkpoint.Options{Dir: n.StateDir(), ComponentVersion: componentVersion})
	if err != nil {
		t.Fatal(err)
	}
	forgotten, err := st.ForgetBad(string(crash.uid))
	st.Close()
	if err != nil || len(forgotten) != 1 {
		t.Fatalf("forget-bad: %v, %v", forgotten, err)
	}
	l2 := proctest.StartLoop(t, bin, n.Args(), nil)
	waitStatus(t, n, l2, "the crash-loop rollback after the repair", func(c app.Condition) bool {
		return c.Reason == status.CrashLoopReason(crash.uid)
	})
	want = make([]string, threshold+1)
	for i := range want {
		want[i] = "exit 1"
	}
	want = append(want, "running")
	if diff := cmp.Diff(want, proctest.ExitCodes(l2.All())); diff != "" {
		t.Errorf("process exits after forget-bad (-want +got):\n%s\n%s", diff, proctest.DescribeProcs(l2.All()))
	}
}

// TestInvalidLocalConfigStops runs the binary on a broken local layer: it
// must exit 1 before serving, with an error naming the file (or flag) and
// the field, and without counting a startup.
func TestInvalidLocalConfigStops(t *testing.T) {
	bin := testBinary.Build(t)
	for _, tc := range []struct {
		name  string
		files map[string]string // relative path -> content
		args  []string          // "DIR" is replaced by the test's dir
		want  []string          // substrings of the error; "DIR" replaced too
	}{{
		name:  "unknown field in the init file",
		files: map[string]string{"init.yaml": kubeletDoc("maxPods: 10", "maxPodz: 3")},
		args:  []string{"--config=DIR/init.yaml"},
		want:  []string{"invalid local config", "DIR/init.yaml", `unknown field "maxPodz"`},
	}, {
		name:  "invalid value in the init file",
		files: map[string]string{"init.yaml": kubeletDoc("maxPods: -5")},
		args:  []string{"--config=DIR/init.yaml"},
		want:  []string{"invalid local config", "maxPods: Invalid value: -5", "(set by DIR/init.yaml)"},
	}, {
		name:  "wrong type in a drop-in",
		files: map[string]string{"init.yaml": kubeletDoc("maxPods: 10"), "conf.d/10-qps.conf": kubeletDoc(`kubeAPIQPS: "fast"`)},
		args:  []string{"--config=DIR/init.yaml", "--config-dir=DIR/conf.d"},
		want:  []string{"invalid local config", `DIR/conf.d/10-qps.conf: kubeAPIQPS: expected int32, got string "fast"`},
	}, {
		name: "instance config of another kind",
		files: map[string]string{"instance.yaml": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n" +
			"kind: KubeProxyConfiguration\n"},
		args: []string{"--instance-config=DIR/instance.yaml"},
		want: []string{"invalid local config", `DIR/instance.yaml: kind: expected "KubeletConfiguration", got "KubeProxyConfiguration"`},
	}, {
		name:  "invalid flag over a valid file",
		files: map[string]string{"init.yaml": kubeletDoc("maxPods: 10")},
		args:  []string{"--config=DIR/init.yaml", "--max-pods=-1"},
		want:  []string{"invalid local config", "maxPods: Invalid value: -1", "(set by flag --max-pods)"},
	}, {
		name: "missing init file",
		args: []string{"--config=DIR/nope.yaml"},
		want: []string{"invalid local config", "DIR/nope.yaml: no such file or directory"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := node{proctest.NewNode(t)}
			n.WriteFiles(t, tc.files)
			proctest.ExpectStartError(t, bin, "kubelet-like: ", n.Args(n.ExpandDir(tc.args)...), n.ExpandDir(tc.want))
			if _, err := os.Stat(n.startupsPath()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("startups file: %v; an invalid local config must not count as a startup", err)
			}
		})
	}
}

// served is what TestConfigzServesLayersAndFlags compares in /configz.
type served struct {
	MaxPods      int32
	KubeAPIQPS   int32
	FeatureGates map[string]bool
	ConfigOK     app.Condition
}

// TestConfigzServesLayersAndFlags starts the binary on every local layer,
// with and without a remote config and config flags, and reads /configz:
// defaults < init file (or the remote config) < drop-ins < instance file <
// flags. It also checks /healthz, /metrics and a clean exit 0 on SIGTERM.
func TestConfigzServesLayersAndFlags(t *testing.T) {
	bin := testBinary.Build(t)
	remote := remoteConfig{name: "kubelet-remote", uid: "d0000000-0000-4000-8000-000000000001", threshold: -1,
		payload: kubeletDoc("maxPods: 80", "featureGates:", "  KubeletCrashLoopBackOffMax: true")}
	remoteOK := app.Condition{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed,
		Message: status.CurrentMessage(status.Ref{UID: remote.uid}, status.LocalInit)}
	localOK := app.Condition{Status: corev1.ConditionTrue, Reason: status.ReasonLocalInit,
		Message: status.CurrentMessage(status.Ref{}, status.LocalInit)}
	for _, tc := range []struct {
		name       string
		assign     bool
		flags      []string
		want       served
		wantActive string // a label of dynconfig_active_config_info
	}{{
		name:       "local layers",
		want:       served{MaxPods: 70, KubeAPIQPS: 7, FeatureGates: map[string]bool{"RotateKubeletServerCertificate": true}, ConfigOK: localOK},
		wantActive: `source="local"`,
	}, {
		name:       "a remote config replaces the init file only",
		assign:     true,
		want:       served{MaxPods: 70, KubeAPIQPS: 7, FeatureGates: map[string]bool{"KubeletCrashLoopBackOffMax": true}, ConfigOK: remoteOK},
		wantActive: `uid="` + string(remote.uid) + `"`,
	}, {
		name:   "flags win over every layer, feature gates merge",
		assign: true,
		flags:  []string{"--max-pods=111", "--kube-api-qps=33", "--feature-gates=GracefulNodeShutdown=true"},
		want: served{MaxPods: 111, KubeAPIQPS: 33, FeatureGates: map[string]bool{"KubeletCrashLoopBackOffMax": true, "GracefulNodeShutdown": true},
			ConfigOK: remoteOK},
		wantActive: `uid="` + string(remote.uid) + `"`,
	}, {
		name:       "remote config disabled",
		assign:     true,
		flags:      []string{"--disable-remote-config"},
		want:       served{MaxPods: 70, KubeAPIQPS: 7, FeatureGates: map[string]bool{"RotateKubeletServerCertificate": true}, ConfigOK: localOK},
		wantActive: `source="local"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := node{proctest.NewNode(t)}
			proctest.WriteFile(t, n.File("init.yaml"), kubeletDoc("maxPods: 50", "featureGates:", "  RotateKubeletServerCertificate: true"))
			if err := os.Mkdir(n.File("conf.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			proctest.WriteFile(t, filepath.Join(n.Dir, "conf.d", "10-limits.conf"), kubeletDoc("maxPods: 60", "kubeAPIQPS: 7"))
			proctest.WriteFile(t, n.File("instance.yaml"), kubeletDoc("maxPods: 70"))
			if tc.assign {
				n.put(t, remote)
				n.assign(t, remote)
			}
			args := n.Args(append([]string{
				"--config=" + n.File("init.yaml"),
				"--config-dir=" + n.File("conf.d"),
				"--instance-config=" + n.File("instance.yaml"),
			}, tc.flags...)...)
			p := proctest.Start(t, bin, args, nil)
			addr := p.WaitServing(t)

			if body, code, err := proctest.Get(addr, "/healthz"); err != nil || code != http.StatusOK || body != "ok" {
				t.Errorf("/healthz = %d %q, %v; want 200 \"ok\"", code, body, err)
			}
			z, err := getConfigz(addr)
			if err != nil {
				t.Fatal(err)
			}
			got := served{MaxPods: z.KubeletConfig.MaxPods, FeatureGates: z.KubeletConfig.FeatureGates}
			if q := z.KubeletConfig.KubeAPIQPS; q != nil {
				got.KubeAPIQPS = *q
			}
			if z.ConfigOK != nil {
				got.ConfigOK = *z.ConfigOK
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("/configz (-want +got):\n%s", diff)
			}
			metrics, _, err := proctest.Get(addr, "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			if !metricHasLabel(metrics, status.MetricActiveConfigInfo, tc.wantActive) {
				t.Errorf("/metrics has no %s series with %s:\n%s", status.MetricActiveConfigInfo, tc.wantActive, metrics)
			}

			if code := p.Terminate(t); code != 0 {
				t.Errorf("exit code after SIGTERM = %d, want 0; stderr:\n%s", code, proctest.Tail(p.Stderr(), 5))
			}
		})
	}
}

// metricHasLabel reports whether exposition has a series of metric whose
// labels contain label.
func metricHasLabel(exposition, metric, label string) bool {
	for _, line := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line, label) {
			return true
		}
	}
	return false
}

// TestExitCodes runs the binary on --help, --version and a wrong command
// line: exit codes 0, 0 and 2, through app.Main.
func TestExitCodes(t *testing.T) {
	proctest.ExpectComponentExitCodes(t, testBinary.Build(t), "kubelet-like", "kubelet-like serves /healthz")
}
