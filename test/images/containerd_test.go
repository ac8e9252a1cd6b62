package images

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// containerd is a private containerd: its own socket, root and state
// under a test dir, so that it touches no system containerd. The real
// node helper (test/realnode) starts one the same way for the kubelet.
type containerd struct {
	socket string
	ns     string
}

// containerParts returns what this machine lacks to run containers, and
// how to get it; "" when it lacks nothing.
func containerParts() (what, how string) {
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			return b, "apt-get install containerd runc"
		}
	}
	if os.Geteuid() != 0 {
		return "root (to run containers)", "run the tests as root, as .ci/run does"
	}
	return "", ""
}

// needRoot skips (or, in CI, fails: testenv.Missing) when the test cannot
// run containers.
func needRoot(t *testing.T) {
	t.Helper()
	if what, how := containerParts(); what != "" {
		testenv.Missing(t, what, how)
	}
}

// startContainerd starts containerd and stops it when the test ends.
func startContainerd(t *testing.T) *containerd {
	t.Helper()
	// A short path: a unix socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  # runc cannot set oom_score_adj in this VM (no CAP_SYS_RESOURCE):
  # /work/shared/REAL-NODE.md, gotcha 1.
  restrict_oom_score_adj = true
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), socket, socket+".ttrpc")
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", cfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			t.Logf("containerd log (tail):\n%s", tail(string(data), 40))
		}
		logFile.Close()
	})
	c := &containerd{socket: socket, ns: "dynconfig-test"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ctr(context.Background(), "version"); err == nil {
			return c
		}
		select {
		case err := <-exited:
			t.Fatalf("containerd exited while starting: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("containerd did not answer within 30 s")
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ctr runs ctr against this containerd and returns its combined output.
func (c *containerd) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.socket, "--namespace", c.ns}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// staticRollout is the rollout controller built as make images builds it:
// static, reproducible. TestMain builds it before any test starts a clock:
// TestImageRuns' 5-minute context once covered this build, and a cold
// build on a fresh 2-core machine ran it out ("ctr images import ...:
// context deadline exceeded" after 335 s).
var staticRollout = proctest.Binary{Name: "dynconfig-rollout", Package: "./cmd/dynconfig-rollout", Dir: "../..",
	Env: []string{"CGO_ENABLED=0"}, Flags: []string{"-trimpath", "-ldflags", "-s -w -buildid="}}

func TestMain(m *testing.M) {
	// Only where TestImageRuns can run: elsewhere it stops at needRoot,
	// and this build (its own cache entries: static, -trimpath) would be
	// minutes for nothing on a cold machine.
	var bins []*proctest.Binary
	if what, _ := containerParts(); what == "" {
		bins = append(bins, &staticRollout)
	}
	os.Exit(proctest.Main(m, bins...))
}

// TestImageRuns builds the rollout controller's image as `make images`
// does, imports it into a real containerd and runs it with runc: first
// --version, then as the controller against a real API server, whose
// metrics it then serves.
func TestImageRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a static binary, starts containerd and kube-apiserver")
	}
	needRoot(t)
	bin := staticRollout.Build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const ref = "localhost/dynconfig-rollout:test"
	img, err := Build(Spec{Name: "dynconfig-rollout", Binary: bin, Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "dynconfig-rollout.oci.tar")
	digest, err := WriteArchive(archive, ref, img)
	if err != nil {
		t.Fatal(err)
	}

	c := startContainerd(t)
	out, err := c.ctr(ctx, "images", "import", archive)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ctr(ctx, "images", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, ref) || !strings.Contains(list, digest.String()) {
		t.Fatalf("after import (%s) the image list has no %s at %s:\n%s", out, ref, digest, list)
	}

	out, err = c.ctr(ctx, "run", "--rm", ref, "version", "/dynconfig-rollout", "--version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(strings.TrimSpace(out), "dynconfig-rollout v") {
		t.Fatalf("dynconfig-rollout --version in the container printed %q", out)
	}

	// As the controller: the host's network (the API server listens on
	// the host's loopback), the admin kubeconfig mounted read-only.
	cl := cluster.Start(t)
	if _, err := cl.ApplyManifests(ctx, "../../deploy/rollout/dynconfig.io_configrollouts.yaml"); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cl.KubeConfig, 0o644); err != nil {
		t.Fatal(err)
	}
	// 0644: the container runs as 65532 and reads it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := c.ctr(ctx, "run", "-d", "--net-host",
		"--mount", "type=bind,src="+kubeconfig+",dst=/kubeconfig,options=rbind:ro",
		ref, "controller", "/dynconfig-rollout", "--kubeconfig=/kubeconfig", "--leader-elect=false",
		"--metrics-address="+addr, "--logging-format=json"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		_, _ = c.ctr(cctx, "tasks", "kill", "--signal", "SIGKILL", "controller")
		for range 50 {
			if _, err := c.ctr(cctx, "tasks", "delete", "controller"); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = c.ctr(cctx, "containers", "delete", "controller")
	})
	var body string
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(data)
			if resp.StatusCode == http.StatusOK && strings.Contains(body, "dynconfig_rollout_reconcile_duration_seconds") {
				break
			}
		}
		if time.Now().After(deadline) {
			tasks, _ := c.ctr(ctx, "tasks", "list")
			t.Fatalf("the controller in the container never served its metrics on %s (last: %v %.200s); tasks:\n%s", addr, err, body, tasks)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Ready once it has read its Lease and, leading, its informers have
	// synced: that may follow the first /metrics by a moment.
	for _, path := range []string{"/readyz", "/livez"} {
		code := 0
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if code = resp.StatusCode; code == http.StatusOK || time.Now().After(deadline) {
				break
			}
		}
		if code != http.StatusOK {
			t.Errorf("%s: %d", path, code)
		}
	}
	// The process runs as the image's non-root user.
	ps, err := c.ctr(ctx, "tasks", "ps", "controller")
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, line := range strings.Split(ps, "\n")[1:] {
		if _, err := fmt.Sscan(strings.Fields(line + " x")[0], &pid); err == nil && pid > 0 {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("ctr tasks ps controller: no pid in\n%s", ps)
	}
	statusFile, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(statusFile), "\n") {
		if strings.HasPrefix(line, "Uid:") && strings.Fields(line)[1] != fmt.Sprint(UID) {
			t.Errorf("the controller runs as %s, want uid %d", line, UID)
		}
	}
}
