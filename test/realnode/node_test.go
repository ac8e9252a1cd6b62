//go:build linux

package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/test/cluster"
)

const (
	busyboxPath = "/bin/busybox"
	cniBinDir   = "/usr/lib/cni"
	appImage    = "localhost/dynconfig-busybox:1"
	pauseImage  = "localhost/dynconfig-pause:1"
	bridgeName  = "dyncfg0"
	restartSec  = time.Second
	waitTimeout = 90 * time.Second
)

// requirements skips the test (fails it in CI: testenv.Missing), saying
// why, when this machine cannot run a real node; it returns the kubelet
// binary.
func requirements(t *testing.T) string {
	t.Helper()
	testenv.Root(t, "for a real node: containerd, runc, cgroups, mounts")
	for _, bin := range []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2"} {
		testenv.LookPath(t, bin, "apt-get install containerd runc")
	}
	for _, f := range []string{filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback"), busyboxPath} {
		if _, err := os.Stat(f); err != nil {
			testenv.Missing(t, f, "apt-get install containernetworking-plugins busybox-static")
		}
	}
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubelet := filepath.Join(binDir, "kubelet")
	if _, err := os.Stat(kubelet); err != nil {
		testenv.Missing(t, kubelet, "run test/hack/ensure-bins.sh (make bins)")
	}
	lockHost(t)
	return kubelet
}

// dynconfigKubelet is cmd/dynconfig-kubelet of the working tree, built by
// TestMain in the library's module before any test starts a clock. The
// tests run it under -short too.
var dynconfigKubelet = proctest.Binary{Name: "dynconfig-kubelet", Package: "./cmd/dynconfig-kubelet", Dir: "../..", Short: true}

func TestMain(m *testing.M) {
	os.Exit(dynconfigKubelet.RunTests(m))
}

// imageArchive writes a one-layer image (busybox-static as /bin/busybox,
// /bin/sh a link to it) in the docker-archive format ctr imports, named
// name, with the given entrypoint.
func imageArchive(t *testing.T, path, name string, entrypoint []string) {
	t.Helper()
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))},
		{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777},
		{Name: "bin/sleep", Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777},
	} {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bb); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(layer.Bytes())
	cfg, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(sum[:])}},
	})
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{name}, "Layers": []string{"layer.tar"}}})
	var out bytes.Buffer
	aw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"layer.tar", layer.Bytes()}, {"config.json", cfg}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := aw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sleeper is a shell loop that exits at once on SIGTERM.
var sleeper = []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done"}

// realNode is one node: its containerd, its kubelet under a supervisor
// playing systemd, and the run role.
type realNode struct {
	t          *testing.T
	cl         *cluster.Cluster
	name       string
	dir        string
	kubeletBin string
	dynBin     string

	sock, kubeconfig, stateDir, confDir, baseConfig, rootDir string
	port, healthzPort                                        int

	containerd *exec.Cmd
	sup        *supervisor
	follow     *exec.Cmd
	followLog  string
	describe   func() string // more to show when a wait fails (systemd_test.go)
}

func newRealNode(t *testing.T, cl *cluster.Cluster, kubeletBin string) *realNode {
	t.Helper()
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "rn")
	if err != nil {
		t.Fatal(err)
	}
	n := &realNode{
		t: t, cl: cl, name: "realnode-" + strconv.Itoa(os.Getpid()), dir: dir, kubeletBin: kubeletBin,
		sock:        filepath.Join(dir, "containerd.sock"),
		kubeconfig:  filepath.Join(dir, "kubelet.kubeconfig"),
		stateDir:    filepath.Join(dir, "dynconfig"),
		confDir:     filepath.Join(dir, "kubelet.conf.d"),
		baseConfig:  filepath.Join(dir, "kubelet-config.yaml"),
		rootDir:     filepath.Join(dir, "kubelet-root"),
		port:        cluster.FreePort(t),
		healthzPort: cluster.FreePort(t),
	}
	t.Cleanup(n.cleanup)
	n.dynBin = dynconfigKubelet.Build(t)
	nc, err := cl.NodeConfig(n.name)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cluster.KubeConfigFor(nc)
	if err != nil {
		t.Fatal(err)
	}
	n.write(n.kubeconfig, string(kc))
	n.write(n.baseConfig, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
address: 127.0.0.1
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
resolvConf: ""
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "10Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
`, n.sock, filepath.Join(dir, "pod-logs"), n.port, n.healthzPort))
	if err := os.MkdirAll(n.confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *realNode) write(path, data string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

func logFile(t *testing.T, path string) *os.File {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// startContainerd starts the node's own containerd with containerdConfig,
// and imports the images once.
func (n *realNode) startContainerd(importImages bool) {
	t := n.t
	t.Helper()
	cmd := exec.Command("containerd", "--config", n.containerdConfig())
	f := logFile(t, filepath.Join(n.dir, "containerd.log"))
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.containerd = cmd
	n.waitContainerd()
	if importImages {
		n.importImages()
	}
}

// containerdConfig writes the config of the node's own containerd (socket,
// root and state under the node's dir; restrict_oom_score_adj: root here
// lacks CAP_SYS_RESOURCE) with a bridge CNI config, and returns its path.
func (n *realNode) containerdConfig() string {
	cniConf := filepath.Join(n.dir, "cni")
	n.write(filepath.Join(cniConf, "10-dynconfig.conflist"), fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "dynconfig-realnode", "plugins": [
 {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.77.0/24"}]], "dataDir": %q}}]}`,
		bridgeName, filepath.Join(n.dir, "cni-ipam")))
	cfg := filepath.Join(n.dir, "containerd.toml")
	n.write(cfg, fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
`, filepath.Join(n.dir, "containerd-root"), filepath.Join(n.dir, "containerd-state"), n.sock, pauseImage, cniBinDir, cniConf))
	return cfg
}

func (n *realNode) waitContainerd() {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n.ctr("version") != nil {
		if time.Now().After(deadline) {
			n.t.Fatalf("containerd did not answer on %s", n.sock)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// importImages builds the app and sandbox images and imports them.
func (n *realNode) importImages() {
	t := n.t
	t.Helper()
	for _, im := range []struct {
		name string
		ep   []string
	}{{appImage, sleeper}, {pauseImage, sleeper}} {
		path := filepath.Join(n.dir, strings.NewReplacer("/", "_", ":", "_").Replace(im.name)+".tar")
		imageArchive(t, path, im.name, im.ep)
		if err := n.ctr("-n", "k8s.io", "images", "import", path); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *realNode) ctr(args ...string) error {
	out, err := exec.Command("ctr", append([]string{"--address", n.sock, "--timeout", "10s"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %v: %w: %s", args, err, out)
	}
	return nil
}

func (n *realNode) ctrOut(args ...string) string {
	out, _ := exec.Command("ctr", append([]string{"--address", n.sock, "--timeout", "10s"}, args...)...).Output()
	return string(out)
}

// stopRuntime kills every container, stops containerd, and kills its shims
// (they outlive containerd), as a power cut leaves nothing running.
func (n *realNode) stopRuntime() {
	if n.containerd == nil {
		return
	}
	for _, id := range strings.Fields(n.ctrOut("-n", "k8s.io", "tasks", "ls", "-q")) {
		_ = n.ctr("-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
	}
	time.Sleep(200 * time.Millisecond)
	for _, id := range strings.Fields(n.ctrOut("-n", "k8s.io", "tasks", "ls", "-q")) {
		_ = n.ctr("-n", "k8s.io", "tasks", "rm", "-f", id)
	}
	_ = n.containerd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.containerd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.containerd.Process.Kill()
		<-done
	}
	n.containerd = nil
	n.killShims()
}

// killShims kills the containerd shims of this node's containerd (their
// command line names its socket).
func (n *realNode) killShims() {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("containerd-shim")) || !bytes.Contains(b, []byte(n.sock)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountAll unmounts everything mounted under the node's dir (the
// kubelet bind-mounts its root dir onto itself; pod volumes, sandbox
// mounts), deepest first.
func (n *realNode) unmountAll() {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == n.dir || strings.HasPrefix(f[4], n.dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func (n *realNode) cleanup() {
	n.stopFollow()
	if n.sup != nil {
		n.sup.stop()
	}
	n.stopRuntime()
	n.unmountAll()
	_ = exec.Command("ip", "link", "del", bridgeName).Run()
	// The kubelet's QoS cgroups, in every v1 hierarchy (and v2), deepest first.
	for _, root := range append(globDirs("/sys/fs/cgroup/*/kubepods"), globDirs("/sys/fs/cgroup/kubepods")...) {
		removeCgroup(root)
	}
	if n.t.Failed() {
		n.t.Logf("realnode: the node's files are kept in %s", n.dir)
		return
	}
	_ = os.RemoveAll(n.dir)
}

func globDirs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

func removeCgroup(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

// supervisor plays systemd's kubelet.service with deploy/kubelet's
// drop-in: ExecStartPre=-dynconfig-kubelet prestart, then the kubelet;
// Restart=always, RestartSec=restartSec. The run role restarts the kubelet
// by signalling the pid in pidFile (--restart-command).
type supervisor struct {
	n       *realNode
	cancel  context.CancelFunc
	done    chan struct{}
	pidFile string
	args    []string // the pre-start role's, from deploy/kubelet/20-dynconfig.conf

	mu     sync.Mutex
	starts []start
}

// start is one start of the kubelet.
type start struct {
	preStart string    // the pre-start role's output
	dropIn   string    // dynconfig's drop-in as the kubelet saw it ("" = none)
	log      string    // the kubelet's log file
	exit     string    // how it ended ("" while it runs)
	began    time.Time // when the kubelet was started (after the pre-start role)
}

func (n *realNode) startSupervisor(extra ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &supervisor{n: n, cancel: cancel, done: make(chan struct{}), pidFile: filepath.Join(n.dir, "kubelet.pid"),
		args: append(n.unitArgs("20-dynconfig.conf", "ExecStartPre=-"), extra...)}
	n.sup = s
	go s.loop(ctx)
}

// unitArgs returns the arguments of dynconfig-kubelet in the checked-in
// unit file deploy/kubelet/FILE (the line starting with directive), with
// the host paths replaced by this node's: the test runs what the units
// say. A flag it does not know fails the test.
func (n *realNode) unitArgs(file, directive string) []string {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubelet", file))
	if err != nil {
		n.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		if !strings.HasPrefix(line, directive) {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, directive))
		if len(f) < 2 || filepath.Base(f[0]) != "dynconfig-kubelet" {
			n.t.Fatalf("%s: %s runs %v, want dynconfig-kubelet ROLE", file, directive, f)
		}
		args := []string{f[1]}
		for _, a := range f[2:] {
			name, value, _ := strings.Cut(a, "=")
			switch name {
			case "--state-dir":
				value = n.stateDir
			case "--kubelet-config":
				value = n.baseConfig
			case "--kubelet-config-dir":
				value = n.confDir
			case "--kubelet-binary":
				value = n.kubeletBin // asked for its version, as on a node
			case "--kubeconfig":
				value = n.kubeconfig
			case "--kubelet-unit":
				continue // no systemd here: --restart-command instead
			case "--metrics-address":
				value = fmt.Sprintf("127.0.0.1:%d", cluster.FreePort(n.t))
			case "--timeout":
			default:
				n.t.Fatalf("%s: flag %s unknown to this test: map it to the test node", file, name)
			}
			args = append(args, name+"="+value)
		}
		return args
	}
	n.t.Fatalf("%s: no %s line", file, directive)
	return nil
}

func (s *supervisor) loop(ctx context.Context) {
	defer close(s.done)
	n := s.n
	for i := 0; ctx.Err() == nil; i++ {
		pctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		out, err := exec.CommandContext(pctx, n.dynBin, s.args...).CombinedOutput()
		cancel()
		st := start{preStart: string(out), log: filepath.Join(n.dir, fmt.Sprintf("kubelet-%02d.log", i))}
		if err != nil {
			st.preStart += fmt.Sprintf("\n(pre-start failed: %v; the start goes on, as with ExecStartPre=-)", err)
		}
		if b, err := os.ReadFile(filepath.Join(n.confDir, "99-dynconfig.conf")); err == nil {
			st.dropIn = string(b)
		}
		if ctx.Err() != nil {
			return
		}
		cmd := exec.CommandContext(ctx, n.kubeletBin, "--config", n.baseConfig, "--config-dir", n.confDir,
			"--kubeconfig", n.kubeconfig, "--root-dir", n.rootDir, "--cert-dir", filepath.Join(n.dir, "pki"),
			"--hostname-override", n.name, "--v", "1")
		f := logFile(n.t, st.log)
		cmd.Stdout, cmd.Stderr = f, f
		st.began = time.Now()
		err = cmd.Start()
		s.mu.Lock()
		s.starts = append(s.starts, st)
		s.mu.Unlock()
		if err == nil {
			_ = os.WriteFile(s.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
			err = cmd.Wait()
		}
		f.Close()
		s.mu.Lock()
		s.starts[len(s.starts)-1].exit = fmt.Sprint("exited: ", err)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartSec):
		}
	}
}

// stop kills the kubelet (SIGKILL, as a power cut) and ends the loop.
func (s *supervisor) stop() {
	s.cancel()
	<-s.done
}

func (s *supervisor) startsSoFar() []start {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]start(nil), s.starts...)
}

func (s *supervisor) describe() string {
	var b strings.Builder
	for i, st := range s.startsSoFar() {
		fmt.Fprintf(&b, "start %d: %s\n  pre-start: %s\n  drop-in: %q\n", i, st.exit, strings.TrimSpace(st.preStart), st.dropIn)
	}
	return b.String()
}

// startFollow starts the run role on the node's own credentials, with
// extra flags after the unit's.
func (n *realNode) startFollow(extra ...string) {
	n.followLog = filepath.Join(n.dir, "follow.log")
	args := append(n.unitArgs("dynconfig-kubelet.service", "ExecStart="), "--node-name", n.name,
		"--restart-command", "kill -TERM $(cat "+n.sup.pidFile+")",
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", n.healthzPort),
		"--poll-interval", "500ms", "--start-timeout", "30s", "--v", "2")
	cmd := exec.Command(n.dynBin, append(args, extra...)...)
	f := logFile(n.t, n.followLog)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.follow = cmd
}

func (n *realNode) stopFollow() {
	if n.follow == nil {
		return
	}
	_ = n.follow.Process.Kill()
	_ = n.follow.Wait()
	n.follow = nil
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// more is what a failed wait shows.
// offlineRollback waits, after a reboot in the middle of a crash loop on the
// reboot config (maxPods 30) with the API server down, until the kubelet is
// healthy on last-known-good (maxPods 50), and checks that the pre-start
// role alone took it there: threshold+1 starts on the bad config in all
// (one before the reboot, threshold-1 after), then last-known-good. dropIns
// returns dynconfig's drop-in as each kubelet start since the reboot saw it.
func (n *realNode) offlineRollback(threshold int, dropIns func() []string) {
	n.t.Helper()
	n.eventually("the kubelet healthy on last-known-good, offline", func() (bool, string) {
		st := dropIns()
		if len(st) == 0 || !strings.Contains(st[len(st)-1], "maxPods: 50") {
			return false, fmt.Sprintf("%d starts since the reboot", len(st))
		}
		return n.healthz()
	})
	st := dropIns()
	if len(st) != threshold+1 {
		n.t.Fatalf("after the reboot: %d starts, want %d (two more on the bad config, then last-known-good)\n%s", len(st), threshold+1, n.more())
	}
	for i, d := range st[:threshold] {
		if !strings.Contains(d, "maxPods: 30") {
			n.t.Fatalf("start %d after the reboot ran %q, want the bad config", i, d)
		}
	}
}

// dropInsOf lists what each start saw of dynconfig's drop-in.
func dropInsOf[S any](starts []S, dropIn func(S) string) []string {
	out := make([]string, len(starts))
	for i, s := range starts {
		out[i] = dropIn(s)
	}
	return out
}

func (n *realNode) more() string {
	var b strings.Builder
	if n.sup != nil {
		b.WriteString(n.sup.describe())
		if st := n.sup.startsSoFar(); len(st) > 0 {
			fmt.Fprintf(&b, "last kubelet log:\n%s\n", tail(st[len(st)-1].log, 25))
		}
	}
	if n.followLog != "" {
		fmt.Fprintf(&b, "run role log:\n%s\n", tail(n.followLog, 40))
	}
	if n.describe != nil {
		b.WriteString(n.describe())
	}
	return b.String()
}

// eventually polls cond every 250ms for waitTimeout.
func (n *realNode) eventually(what string, cond func() (bool, string)) {
	n.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("timed out after %v waiting for %s; last: %s\n%s", waitTimeout, what, why, n.more())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *realNode) node() (*corev1.Node, error) {
	return n.cl.Client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
}

func condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// ready: the Node is Ready with pods capacity maxPods, and its kubelet is
// alive: its Lease was renewed after since (with no controller-manager,
// Ready never turns Unknown when a kubelet dies).
func (n *realNode) ready(maxPods int64, since time.Time) func() (bool, string) {
	return func() (bool, string) {
		node, err := n.node()
		if err != nil {
			return false, err.Error()
		}
		c := condition(node, corev1.NodeReady)
		if c == nil || c.Status != corev1.ConditionTrue {
			return false, fmt.Sprintf("Ready: %+v", c)
		}
		if got := node.Status.Capacity.Pods().Value(); got != maxPods {
			return false, fmt.Sprintf("capacity pods %d, want %d", got, maxPods)
		}
		lease, err := n.cl.Client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !renewedAfter(lease, since) {
			return false, "the node Lease was not renewed since " + since.Format(time.RFC3339Nano)
		}
		return true, ""
	}
}

func renewedAfter(l *coordinationv1.Lease, t time.Time) bool {
	return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(t)
}

// healthz reports whether the kubelet's healthz answers ok, without the API.
func (n *realNode) healthz() (bool, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.healthzPort))
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode == http.StatusOK && string(b) == "ok", fmt.Sprintf("%s %s", resp.Status, b)
}

// configMap creates a kubelet ConfigMap in the config namespace,
// immutable.
func (n *realNode) configMap(name, payload, trial string, threshold int) *corev1.ConfigMap {
	n.t.Helper()
	cm, err := n.cl.Client.CoreV1().ConfigMaps("dynconfig-configs").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			"dynconfig.io/trial-duration":       trial,
			"dynconfig.io/crash-loop-threshold": strconv.Itoa(threshold),
		}},
		Data: map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + payload},
		// Immutable, as a ConfigRollout requires (rollout_test.go).
		Immutable: ptr.To(true),
	}, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return cm
}

// assign points the Node's assignment annotation at cm (as dynconfigctl
// assign does, with the admin's credentials).
func (n *realNode) assign(cm *corev1.ConfigMap) {
	n.t.Helper()
	src, _ := json.Marshal(corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, KubeletConfigKey: "kubelet"}})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{nodeapi.AssignmentAnnotationFor("kubelet"): string(src)}}})
	if _, err := n.cl.Client.CoreV1().Nodes().Patch(context.Background(), n.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// unassign removes the Node's assignment annotation.
func (n *realNode) unassign() {
	n.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{nodeapi.AssignmentAnnotationFor("kubelet"): nil}}})
	if _, err := n.cl.Client.CoreV1().Nodes().Patch(context.Background(), n.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// runPod creates a Pod bound to the node and waits until it runs.
func (n *realNode) runPod(client kubernetes.Interface, name string) *corev1.Pod {
	n.t.Helper()
	f := false
	grace := int64(1)
	_, err := client.CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName: n.name, AutomountServiceAccountToken: &f, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: appImage, ImagePullPolicy: corev1.PullNever, Command: sleeper}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var pod *corev1.Pod
	n.eventually("pod "+name+" Running", func() (bool, string) {
		pod, err = client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podRunning(pod), fmt.Sprintf("%s %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
	})
	return pod
}

func podRunning(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].State.Running != nil
}

var errNoStatus = errors.New("no ConfigStatus yet")
