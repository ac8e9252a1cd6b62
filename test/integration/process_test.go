//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/statusfile"
	"github.com/dynconfig/dynconfig/status"
)

// The kubelet-like example's names this file relies on (see its doc.go).
const (
	kubeletLikePackage = "github.com/dynconfig/dynconfig/examples/kubelet-like"
	// demoCrashProviderID, the providerID of the config in use, makes the
	// binary exit 1 right after Bootstrap.
	demoCrashProviderID = "demo://crash-at-startup"
	// demoCrashEnv=1 makes it exit 1 right after Bootstrap whatever the
	// config.
	demoCrashEnv = "DYNCONFIG_DEMO_CRASH"
	// demoCrashLine is in the stderr of a process a demo hook crashed.
	demoCrashLine = "demo hook: crashing at startup"
)

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
	loop       *proctest.RestartLoop
	statusPath string
}

// waitServing waits until the Node's ConfigOK condition is want, the
// status file says the same, and the process that wrote it is the last
// one started, still running and serving. It returns that process.
func (r *kubeletLikeRun) waitServing(ctx context.Context, t *testing.T, what string, want status.Report) *proctest.Proc {
	t.Helper()
	var serving *proctest.Proc
	pollUntil(t, what, func() (bool, string) {
		if err := r.loop.Failure(); err != nil {
			t.Fatalf("restart loop: %v", err)
		}
		got, ok := r.node.report(ctx, t)
		if !ok || got != want {
			return false, fmt.Sprintf("Node condition %+v (present %t)", got, ok)
		}
		c, ok, err := statusfile.Read(r.statusPath)
		if err != nil || !ok {
			return false, fmt.Sprintf("status file: present %t, err %v", ok, err)
		}
		if (status.Report{Status: c.Status, Reason: c.Reason, Message: c.Message}) != want {
			return false, fmt.Sprintf("status file %+v", c)
		}
		procs := r.loop.All()
		last := procs[len(procs)-1]
		if last.PID() != c.PID || last.Exited() || last.ServingAddr() == "" {
			return false, fmt.Sprintf("status file pid %d; last process pid %d, %s, serving on %q",
				c.PID, last.PID(), proctest.ExitCodes([]*proctest.Proc{last})[0], last.ServingAddr())
		}
		serving = last
		return true, ""
	}, func() string { return proctest.DescribeProcs(r.loop.All()) })
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
// trial-duration and crash-loop-threshold annotations, immutable.
func (h *harness) createTrialConfigMap(ctx context.Context, t *testing.T, name, payload, trial string, threshold int) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{
			components.TrialDurationAnnotation:      trial,
			components.CrashLoopThresholdAnnotation: strconv.Itoa(threshold),
		}},
		Data: map[string]string{kubelet.PayloadKey: payload},
		// Immutable, as a ConfigRollout requires (and nothing edits it).
		Immutable: ptr.To(true),
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
// Node. It counts process starts: a crash-looping config runs at the start
// that adopts it and exactly threshold crash restarts, and the next start
// rolls back to the last-known-good one; when every start crashes whatever
// the config, the
// last-known-good one crash-loops too and the Node reports a dead end
// after exactly threshold+1 more starts.
func TestKubeletLikeAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process test against the API server: skipped with -short")
	}
	began := time.Now()
	bin := kubeletLikeBin.Build(t)
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
		c, ok, err := statusfile.Read(statusPath)
		return err == nil && ok && strings.HasPrefix(c.Reason, "dead end:")
	}
	run := &kubeletLikeRun{node: node, statusPath: statusPath}
	run.loop = proctest.StartLoop(t, bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--node-name=" + node.name,
		"--dynamic-config-dir=" + node.dir,
		"--port=0",
		"--status-file=" + statusPath,
	}, deadEnd)
	describe := func() string { return proctest.DescribeProcs(run.loop.All()) }

	// 1. No assignment: the built-in defaults.
	run.waitServing(ctx, t, "the local default config", localDefaultReport())
	if diff := cmp.Diff([]string{"running"}, proctest.ExitCodes(run.loop.All())); diff != "" {
		t.Fatalf("processes before any assignment (-want +got):\n%s\n%s", diff, describe())
	}

	// 2. A good config with a 2s trial: the process exits 0 to restart onto
	// it, and the config becomes last-known-good once its trial passes.
	const threshold = 2
	good := h.createTrialConfigMap(ctx, t, objectName(t, "good"), kubeletPayload(42), "2s", threshold)
	node.assign(ctx, t, good)
	onGood := run.waitServing(ctx, t, "the good config", currentReport(good))
	if diff := cmp.Diff([]string{"exit 0", "running"}, proctest.ExitCodes(run.loop.All())); diff != "" {
		t.Fatalf("processes up to the good config (-want +got):\n%s\n%s", diff, describe())
	}
	pollUntil(t, "the good config's promotion to last-known-good", func() (bool, string) {
		src, err := readPointer(node.dir, "last-known-good")
		if err != nil || src == nil || src.ConfigMap == nil {
			return false, fmt.Sprintf("pointer %+v, err %v", src, err)
		}
		return src.ConfigMap.UID == good.UID, fmt.Sprintf("names UID %q", src.ConfigMap.UID)
	}, describe)
	if onGood.Exited() {
		t.Fatalf("the process on the good config exited during its trial\n%s", describe())
	}

	// 3. A config that crashes the component at startup: counted from the
	// assignment, the process on the good config exits 0 (not a start of
	// the crash config), then the adopting start and threshold crash
	// restarts crash on it, and the next one rolls back to the good config
	// and serves.
	before := len(run.loop.All())
	crash := h.createTrialConfigMap(ctx, t, objectName(t, "crash"),
		kubeletPayload(77)+"providerID: "+demoCrashProviderID+"\n", "10m", threshold)
	node.assign(ctx, t, crash)
	rolledBack := run.waitServing(ctx, t, "the crash-loop rollback", status.Report{
		Status: corev1.ConditionFalse, Reason: status.CrashLoopReason(crash.UID),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault),
	})
	procs := run.loop.All()[before-1:]
	want := []string{"exit 0"}
	for range threshold + 1 {
		want = append(want, "exit 1")
	}
	want = append(want, "running")
	if diff := cmp.Diff(want, proctest.ExitCodes(procs)); diff != "" {
		t.Fatalf("processes from the crash config's assignment to the rollback (-want +got):\n%s\n%s", diff, describe())
	}
	startsToRollback := len(procs) - 1
	for i, p := range procs[1 : len(procs)-1] {
		if !strings.Contains(p.Stderr(), demoCrashLine) || !strings.Contains(p.Stderr(), demoCrashProviderID) {
			t.Errorf("start %d after the crash assignment exited 1 without the providerID demo hook; stderr:\n%s", i+1, p.Stderr())
		}
	}
	if got, err := servedMaxPods(rolledBack.ServingAddr()); err != nil || got != 42 {
		t.Errorf("/configz after the rollback: maxPods %d, err %v; want the good config's 42", got, err)
	}

	// 4. Dead end: from now on every start crashes whatever the config.
	// SIGTERM ends the process on the last-known-good config with exit 0;
	// threshold starts crash on it, the next one crashes too and reports
	// the dead end, and the loop stops there.
	before = len(run.loop.All())
	run.loop.SetEnv(demoCrashEnv + "=1")
	if err := syscall.Kill(rolledBack.PID(), syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM pid %d: %v", rolledBack.PID(), err)
	}
	select {
	case <-run.loop.Stopped():
	case <-time.After(waitTimeout):
		t.Fatalf("no dead end in the status file within %v\n%s", waitTimeout, describe())
	}
	if err := run.loop.Failure(); err != nil {
		t.Fatalf("restart loop: %v", err)
	}
	procs = run.loop.All()[before-1:]
	want = []string{"exit 0"}
	for range threshold + 1 {
		want = append(want, "exit 1")
	}
	if diff := cmp.Diff(want, proctest.ExitCodes(procs)); diff != "" {
		t.Fatalf("processes from SIGTERM to the dead end (-want +got):\n%s\n%s", diff, describe())
	}
	startsToDeadEnd := len(procs) - 1
	for i, p := range procs[1:] {
		if !strings.Contains(p.Stderr(), demoCrashLine) || !strings.Contains(p.Stderr(), demoCrashEnv+"=1") {
			t.Errorf("start %d after SIGTERM did not crash through %s; stderr:\n%s", i+1, demoCrashEnv, p.Stderr())
		}
	}
	wantDeadEnd := status.Report{Status: corev1.ConditionFalse,
		Reason:  status.DeadEndReason(status.CrashLoopReason(crash.UID), true),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault)}
	// The last process reported before it exited: no wait is needed.
	node.wantReport(ctx, t, wantDeadEnd)
	if got, _ := node.report(ctx, t); !strings.HasPrefix(got.Reason, "dead end:") {
		t.Errorf("Node reason %q does not start with \"dead end:\"", got.Reason)
	}
	c, ok, err := statusfile.Read(statusPath)
	if err != nil || !ok {
		t.Fatalf("status file after the dead end: present %t, err %v", ok, err)
	}
	if diff := cmp.Diff(statusfile.Condition{Status: wantDeadEnd.Status, Reason: wantDeadEnd.Reason,
		Message: wantDeadEnd.Message, PID: procs[len(procs)-1].PID()}, c); diff != "" {
		t.Errorf("status file after the dead end (-want +got):\n%s", diff)
	}
	wantPointer(t, node.dir, "last-known-good", good.UID, "")

	t.Logf("starts after the crash assignment up to the rollback: %d; after SIGTERM up to the dead end: %d "+
		"(threshold %d); %d processes in all; %v", startsToRollback, startsToDeadEnd, threshold,
		len(run.loop.All()), time.Since(began).Round(time.Millisecond))
}
