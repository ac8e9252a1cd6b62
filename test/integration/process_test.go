//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/status"
)

// The kubelet-like example's names this file relies on (see its doc.go).
const (
	kubeletLikePackage = "github.com/dynconfig/dynconfig/examples/kubelet-like"
	// demoCrashGate, enabled in the config in use, makes the binary exit 1
	// right after Bootstrap.
	demoCrashGate = "DemoCrashAtStartup"
	// demoCrashEnv=1 makes it exit 1 right after Bootstrap whatever the
	// config.
	demoCrashEnv = "DYNCONFIG_DEMO_CRASH"
	// demoCrashLine is in the stderr of a process a demo hook crashed.
	demoCrashLine = "demo hook: crashing at startup"
)

// restartDelay is how long the restart loop waits before starting the
// binary again (systemd's RestartSec, shortened).
const restartDelay = 20 * time.Millisecond

// lockedBuffer is a bytes.Buffer written by a child process's output
// copier and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// binProc is one process of the built binary, in its own process group.
type binProc struct {
	cmd    *exec.Cmd
	pid    int
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{} // closed when the process has exited
	code   int           // valid after done; -1 when a signal ended it
}

func spawnBinary(bin string, args, env []string) (*binProc, error) {
	p := &binProc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// Its own group, so that killing the group ends any child too; the
	// kernel kills it if the test process dies first.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		_ = p.cmd.Wait() // the exit code is in ProcessState
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	return p, nil
}

func (p *binProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process group with SIGKILL and waits for the process.
func (p *binProc) kill() {
	if !p.exited() {
		if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
}

// servingAddr is the address of the "serving on HOST:PORT" line, or "".
func (p *binProc) servingAddr() string {
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		if addr, ok := strings.CutPrefix(line, "serving on "); ok {
			return addr
		}
	}
	return ""
}

// restartLoop starts the binary again whenever it exits, whatever the exit
// code, until the test ends or stopAfter (asked after every exit) says so.
// It keeps every process it started, in order.
type restartLoop struct {
	bin       string
	args      []string
	stopAfter func() bool

	mu      sync.Mutex
	env     []string
	procs   []*binProc
	err     error
	stopped chan struct{} // closed when the loop starts nothing more
}

// startRestartLoop starts the loop; the test's cleanup stops it and kills
// the process group of every process still running.
func startRestartLoop(t *testing.T, bin string, args []string, stopAfter func() bool) *restartLoop {
	t.Helper()
	l := &restartLoop{bin: bin, args: args, stopAfter: stopAfter, stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go l.run(ctx)
	t.Cleanup(func() {
		cancel()
		<-l.stopped
		for _, p := range l.all() {
			p.kill()
		}
	})
	return l
}

func (l *restartLoop) run(ctx context.Context) {
	defer close(l.stopped)
	for ctx.Err() == nil {
		l.mu.Lock()
		env := append([]string(nil), l.env...)
		l.mu.Unlock()
		p, err := spawnBinary(l.bin, l.args, env)
		l.mu.Lock()
		if err != nil {
			l.err = err
			l.mu.Unlock()
			return
		}
		l.procs = append(l.procs, p)
		l.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			p.kill()
			return
		}
		if l.stopAfter != nil && l.stopAfter() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

// setEnv adds KEY=VALUE entries for the processes started from now on.
func (l *restartLoop) setEnv(kv ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.env = append(l.env, kv...)
}

func (l *restartLoop) all() []*binProc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*binProc(nil), l.procs...)
}

func (l *restartLoop) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// exitCodes is "exit N" for each exited process, "running" otherwise.
func exitCodes(procs []*binProc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		out[i] = "running"
		if p.exited() {
			out[i] = fmt.Sprintf("exit %d", p.code)
		}
	}
	return out
}

// describeProcs is each process's state and the tail of its stderr.
func describeProcs(procs []*binProc) string {
	var b strings.Builder
	for i, p := range procs {
		lines := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
		if len(lines) > 6 {
			lines = lines[len(lines)-6:]
		}
		fmt.Fprintf(&b, "--- process %d (pid %d, %s), stderr tail:\n%s\n", i+1, p.pid, exitCodes([]*binProc{p})[0], strings.Join(lines, "\n"))
	}
	return b.String()
}

// buildKubeletLike builds the example binary into a temporary directory of
// the test. The test module's replace directive makes the root module's
// main packages buildable from here.
func buildKubeletLike(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubelet-like")
	// go test puts the go command of its toolchain first on the PATH.
	out, err := exec.Command("go", "build", "-o", bin, kubeletLikePackage).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", kubeletLikePackage, err, out)
	}
	return bin
}

// statusFileCondition is the kubelet-like --status-file's JSON.
type statusFileCondition struct {
	Status  corev1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
	PID     int                    `json:"pid"`
}

// readStatusFile reads the status file; ok is false while there is none.
func readStatusFile(path string) (statusFileCondition, bool, error) {
	var c statusFileCondition
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, false, fmt.Errorf("status file %s: %q: %w", path, data, err)
	}
	return c, true, nil
}

// pollUntil polls cond every pollInterval until it holds; after
// waitTimeout it fails the test with what it waited for, cond's last
// explanation and more().
func pollUntil(t *testing.T, what string, cond func() (bool, string), more func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s\n%s", waitTimeout, what, why, more())
		}
		<-tick.C
	}
}

// kubeletLikeRun is the binary under its restart loop on one Node.
type kubeletLikeRun struct {
	node       *testNode
	loop       *restartLoop
	statusPath string
}

// waitServing waits until the Node's ConfigOK condition is want, the
// status file says the same, and the process that wrote it is the last
// one started, still running and serving. It returns that process.
func (r *kubeletLikeRun) waitServing(ctx context.Context, t *testing.T, what string, want status.Report) *binProc {
	t.Helper()
	var serving *binProc
	pollUntil(t, what, func() (bool, string) {
		if err := r.loop.failure(); err != nil {
			t.Fatalf("restart loop: %v", err)
		}
		got, ok := r.node.report(ctx, t)
		if !ok || got != want {
			return false, fmt.Sprintf("Node condition %+v (present %t)", got, ok)
		}
		c, ok, err := readStatusFile(r.statusPath)
		if err != nil || !ok {
			return false, fmt.Sprintf("status file: present %t, err %v", ok, err)
		}
		if (status.Report{Status: c.Status, Reason: c.Reason, Message: c.Message}) != want {
			return false, fmt.Sprintf("status file %+v", c)
		}
		procs := r.loop.all()
		last := procs[len(procs)-1]
		if last.pid != c.PID || last.exited() || last.servingAddr() == "" {
			return false, fmt.Sprintf("status file pid %d; last process pid %d, %s, serving on %q",
				c.PID, last.pid, exitCodes([]*binProc{last})[0], last.servingAddr())
		}
		serving = last
		return true, ""
	}, func() string { return describeProcs(r.loop.all()) })
	return serving
}

// servedMaxPods reads maxPods from the /configz of the server at addr.
func servedMaxPods(addr string) (int32, error) {
	resp, err := http.Get("http://" + addr + "/configz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/configz: HTTP %d: %s", resp.StatusCode, body)
	}
	var z struct {
		KubeletConfig *kubeletConfig `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(body, &z); err != nil || z.KubeletConfig == nil {
		return 0, fmt.Errorf("/configz %s: no kubeletconfig (%v)", body, err)
	}
	return z.KubeletConfig.MaxPods, nil
}

// createTrialConfigMap creates a ConfigMap with the kubelet payload and the
// trial-duration and crash-loop-threshold annotations.
func (h *harness) createTrialConfigMap(ctx context.Context, t *testing.T, name, payload, trial string, threshold int) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{
			components.TrialDurationAnnotation:      trial,
			components.CrashLoopThresholdAnnotation: strconv.Itoa(threshold),
		}},
		Data: map[string]string{kubelet.PayloadKey: payload},
	}
	got, err := h.client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s: %v", name, err)
	}
	return got
}

// TestKubeletLikeAgainstAPIServer builds examples/kubelet-like and runs it
// as a real process under a restart loop (a stand-in for systemd's
// Restart=always) against the real kube-apiserver, with the assignment in
// its Node's annotation and the ConfigOK condition read back from the
// Node. It counts process starts: a crash-looping config is rolled back to
// the last-known-good one at exactly the threshold+1-th start after it was
// assigned, and when every start crashes whatever the config, the
// last-known-good one crash-loops too and the Node reports a dead end
// after exactly threshold+1 more starts.
func TestKubeletLikeAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process test against the API server: skipped with -short")
	}
	began := time.Now()
	bin := buildKubeletLike(t)
	h := newHarness(t)
	ctx := testContext(t, 10*time.Minute)
	node := h.newNode(ctx, t)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, h.cl.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	statusPath := filepath.Join(dir, "configok.json")
	deadEnd := func() bool {
		c, ok, err := readStatusFile(statusPath)
		return err == nil && ok && strings.HasPrefix(c.Reason, "dead end:")
	}
	run := &kubeletLikeRun{node: node, statusPath: statusPath}
	run.loop = startRestartLoop(t, bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--node-name=" + node.name,
		"--dynamic-config-dir=" + node.dir,
		"--port=0",
		"--status-file=" + statusPath,
	}, deadEnd)
	describe := func() string { return describeProcs(run.loop.all()) }

	// 1. No assignment: the built-in defaults.
	run.waitServing(ctx, t, "the local default config", localDefaultReport())
	if diff := cmp.Diff([]string{"running"}, exitCodes(run.loop.all())); diff != "" {
		t.Fatalf("processes before any assignment (-want +got):\n%s\n%s", diff, describe())
	}

	// 2. A good config with a 2s trial: the process exits 0 to restart onto
	// it, and the config becomes last-known-good once its trial passes.
	const threshold = 2
	good := h.createTrialConfigMap(ctx, t, objectName(t, "good"), kubeletPayload(42), "2s", threshold)
	node.assign(ctx, t, good)
	onGood := run.waitServing(ctx, t, "the good config", currentReport(good))
	if diff := cmp.Diff([]string{"exit 0", "running"}, exitCodes(run.loop.all())); diff != "" {
		t.Fatalf("processes up to the good config (-want +got):\n%s\n%s", diff, describe())
	}
	pollUntil(t, "the good config's promotion to last-known-good", func() (bool, string) {
		src, err := readPointer(node.dir, "last-known-good")
		if err != nil || src == nil || src.ConfigMap == nil {
			return false, fmt.Sprintf("pointer %+v, err %v", src, err)
		}
		return src.ConfigMap.UID == good.UID, fmt.Sprintf("names UID %q", src.ConfigMap.UID)
	}, describe)
	if onGood.exited() {
		t.Fatalf("the process on the good config exited during its trial\n%s", describe())
	}

	// 3. A config that crashes the component at startup: counted from the
	// assignment, the process on the good config exits 0 (not a start of
	// the crash config), then threshold starts crash and the next one rolls
	// back to the good config and serves.
	before := len(run.loop.all())
	crash := h.createTrialConfigMap(ctx, t, objectName(t, "crash"),
		kubeletPayload(77)+"featureGates:\n  "+demoCrashGate+": true\n", "10m", threshold)
	node.assign(ctx, t, crash)
	rolledBack := run.waitServing(ctx, t, "the crash-loop rollback", status.Report{
		Status: corev1.ConditionFalse, Reason: status.CrashLoopReason(crash.UID),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault),
	})
	procs := run.loop.all()[before-1:]
	want := []string{"exit 0"}
	for range threshold {
		want = append(want, "exit 1")
	}
	want = append(want, "running")
	if diff := cmp.Diff(want, exitCodes(procs)); diff != "" {
		t.Fatalf("processes from the crash config's assignment to the rollback (-want +got):\n%s\n%s", diff, describe())
	}
	startsToRollback := len(procs) - 1
	for i, p := range procs[1 : len(procs)-1] {
		if !strings.Contains(p.stderr.String(), demoCrashLine) || !strings.Contains(p.stderr.String(), demoCrashGate) {
			t.Errorf("start %d after the crash assignment exited 1 without the feature-gate demo hook; stderr:\n%s", i+1, p.stderr.String())
		}
	}
	if got, err := servedMaxPods(rolledBack.servingAddr()); err != nil || got != 42 {
		t.Errorf("/configz after the rollback: maxPods %d, err %v; want the good config's 42", got, err)
	}

	// 4. Dead end: from now on every start crashes whatever the config.
	// SIGTERM ends the process on the last-known-good config with exit 0;
	// threshold starts crash on it, the next one crashes too and reports
	// the dead end, and the loop stops there.
	before = len(run.loop.all())
	run.loop.setEnv(demoCrashEnv + "=1")
	if err := rolledBack.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM pid %d: %v", rolledBack.pid, err)
	}
	select {
	case <-run.loop.stopped:
	case <-time.After(waitTimeout):
		t.Fatalf("no dead end in the status file within %v\n%s", waitTimeout, describe())
	}
	if err := run.loop.failure(); err != nil {
		t.Fatalf("restart loop: %v", err)
	}
	procs = run.loop.all()[before-1:]
	want = []string{"exit 0"}
	for range threshold + 1 {
		want = append(want, "exit 1")
	}
	if diff := cmp.Diff(want, exitCodes(procs)); diff != "" {
		t.Fatalf("processes from SIGTERM to the dead end (-want +got):\n%s\n%s", diff, describe())
	}
	startsToDeadEnd := len(procs) - 1
	for i, p := range procs[1:] {
		if !strings.Contains(p.stderr.String(), demoCrashLine) || !strings.Contains(p.stderr.String(), demoCrashEnv+"=1") {
			t.Errorf("start %d after SIGTERM did not crash through %s; stderr:\n%s", i+1, demoCrashEnv, p.stderr.String())
		}
	}
	wantDeadEnd := status.Report{Status: corev1.ConditionFalse,
		Reason:  status.DeadEndReason(status.CrashLoopReason(crash.UID)),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault)}
	// The last process reported before it exited: no wait is needed.
	node.wantReport(ctx, t, wantDeadEnd)
	if got, _ := node.report(ctx, t); !strings.HasPrefix(got.Reason, "dead end:") {
		t.Errorf("Node reason %q does not start with \"dead end:\"", got.Reason)
	}
	c, ok, err := readStatusFile(statusPath)
	if err != nil || !ok {
		t.Fatalf("status file after the dead end: present %t, err %v", ok, err)
	}
	if diff := cmp.Diff(statusFileCondition{Status: wantDeadEnd.Status, Reason: wantDeadEnd.Reason,
		Message: wantDeadEnd.Message, PID: procs[len(procs)-1].pid}, c); diff != "" {
		t.Errorf("status file after the dead end (-want +got):\n%s", diff)
	}
	wantPointer(t, node.dir, "last-known-good", good.UID, "")

	t.Logf("starts after the crash assignment up to the rollback: %d; after SIGTERM up to the dead end: %d "+
		"(threshold %d); %d processes in all; %v", startsToRollback, startsToDeadEnd, threshold,
		len(run.loop.all()), time.Since(began).Round(time.Millisecond))
}
