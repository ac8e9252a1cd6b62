//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// hollowKubeletBinary returns bin/hollow-kubelet, which
// test/hack/ensure-bins.sh builds (make integration runs it first).
func hollowKubeletBinary(t *testing.T) string {
	t.Helper()
	dir, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hollow-kubelet")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the hollow kubelet: %v (%s)", err, cluster.EnsureBinsHint)
	}
	return bin
}

// kubernetesVersion is the version of k8s.io/kubernetes the test module
// requires (test/go.mod), the kubelet code the hollow kubelet runs.
func kubernetesVersion(t *testing.T) string {
	t.Helper()
	goMod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(goMod)
	if m == nil {
		t.Fatal("test/go.mod requires no k8s.io/kubernetes")
	}
	return string(m[1])
}

// nodeHistory watches one Node and keeps what the test asserts about every
// version of it: once the ConfigOK condition is on the Node, no later
// version may lack it (a kubelet status update that dropped it), and the
// kubelet's status updates (a new Ready heartbeat) made while it is there.
type nodeHistory struct {
	mu sync.Mutex
	// heartbeats are the distinct Ready heartbeats seen with ConfigOK on
	// the Node, each with the kubelet's other conditions.
	heartbeats   map[metav1.Time]bool
	configOKSeen bool
	// statusSeen: the ConfigStatus annotation was on the Node.
	statusSeen bool
	// dropped describes the versions that lacked ConfigOK after it was
	// there, or lacked a kubelet condition next to it.
	dropped []string
	err     error
}

// kubeletConditions are the conditions the kubelet's own status setters
// keep on a Node.
var kubeletConditions = []corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

// watchNode records every version of the Node named name until ctx ends.
func watchNode(ctx context.Context, t *testing.T, h *harness, name string) *nodeHistory {
	t.Helper()
	hist := &nodeHistory{heartbeats: map[metav1.Time]bool{}}
	w, err := h.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatalf("watching Node %s: %v", name, err)
	}
	done := make(chan struct{})
	var stopping atomic.Bool
	t.Cleanup(func() { stopping.Store(true); w.Stop(); <-done })
	go func() {
		defer close(done)
		defer func() {
			if !stopping.Load() { // versions after this would go unchecked
				hist.mu.Lock()
				hist.err = fmt.Errorf("the watch of Node %s ended before the test", name)
				hist.mu.Unlock()
			}
		}()
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Deleted {
				hist.mu.Lock()
				if ev.Type == watch.Error || ev.Type == watch.Deleted {
					hist.err = fmt.Errorf("watch of Node %s: %s event %v", name, ev.Type, ev.Object)
				}
				hist.mu.Unlock()
				continue
			}
			hist.record(node)
		}
	}()
	return hist
}

func (hi *nodeHistory) record(node *corev1.Node) {
	hi.mu.Lock()
	defer hi.mu.Unlock()
	if _, has := node.Annotations[nodeapi.StatusAnnotationFor("kubelet")]; has {
		hi.statusSeen = true
	} else if hi.statusSeen {
		hi.dropped = append(hi.dropped, fmt.Sprintf("resourceVersion %s: no %s annotation",
			node.ResourceVersion, nodeapi.StatusAnnotationFor("kubelet")))
	}
	ok := status.Find(node.Status.Conditions)
	if ok == nil {
		if hi.configOKSeen {
			hi.dropped = append(hi.dropped, fmt.Sprintf("resourceVersion %s: no %s among %s",
				node.ResourceVersion, nodeapi.ConditionType, conditionTypes(node)))
		}
		return
	}
	hi.configOKSeen = true
	ready := status.FindType(node.Status.Conditions, corev1.NodeReady)
	if ready == nil {
		return // not registered by the kubelet yet, or only ConfigOK so far
	}
	for _, typ := range kubeletConditions {
		if status.FindType(node.Status.Conditions, typ) == nil {
			hi.dropped = append(hi.dropped, fmt.Sprintf("resourceVersion %s: %s next to Ready but no %s among %s",
				node.ResourceVersion, nodeapi.ConditionType, typ, conditionTypes(node)))
		}
	}
	hi.heartbeats[ready.LastHeartbeatTime] = true
}

// check returns the number of kubelet status updates seen with ConfigOK on
// the Node, and what went wrong.
func (hi *nodeHistory) check() (updates int, problems []string) {
	hi.mu.Lock()
	defer hi.mu.Unlock()
	problems = append(problems, hi.dropped...)
	if hi.err != nil {
		problems = append(problems, hi.err.Error())
	}
	return len(hi.heartbeats), problems
}

func conditionTypes(node *corev1.Node) []corev1.NodeConditionType {
	var out []corev1.NodeConditionType
	for _, c := range node.Status.Conditions {
		out = append(out, c.Type)
	}
	return out
}

// hollowRun is bin/hollow-kubelet under its restart loop on one Node.
type hollowRun struct {
	h        *harness
	nodeName string
	stateDir string
	loop     *proctest.RestartLoop
	// seen is when the test first saw each process (by pid) in the loop:
	// at most a poll interval after it started, long before its kubelet
	// posts anything.
	seen map[int]time.Time
}

// hollowLogsEnv names a directory where the test writes the stderr of
// every hollow-kubelet process it started (process-N.log), for debugging.
const hollowLogsEnv = "HOLLOW_KUBELET_LOGS"

func (r *hollowRun) saveLogs(t *testing.T) {
	dir := os.Getenv(hollowLogsEnv)
	if dir == "" || r.loop == nil {
		return
	}
	for i, p := range r.loop.All() {
		path := filepath.Join(dir, fmt.Sprintf("process-%d.log", i+1))
		if err := os.WriteFile(path, []byte(p.Stderr()), 0o644); err != nil {
			t.Errorf("%s: %v", hollowLogsEnv, err)
		}
	}
}

func (r *hollowRun) describe() string { return proctest.DescribeProcs(r.loop.All()) }

// getNode returns the Node, or nil before it exists.
func (r *hollowRun) getNode(ctx context.Context, t *testing.T) *corev1.Node {
	t.Helper()
	node, err := r.h.client.CoreV1().Nodes().Get(ctx, r.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("getting Node %s: %v", r.nodeName, err)
	}
	return node
}

// waitNode waits until the Node is Ready with a heartbeat the last process
// started posted, capacity pods is wantPods, ConfigOK is want, and that
// process still runs.
func (r *hollowRun) waitNode(ctx context.Context, t *testing.T, what string, want status.Report, wantPods int64) *proctest.Proc {
	t.Helper()
	var last *proctest.Proc
	pollUntil(t, what, func() (bool, string) {
		if err := r.loop.Failure(); err != nil {
			t.Fatalf("restart loop: %v", err)
		}
		procs := r.loop.All()
		if len(procs) == 0 {
			return false, "no process started yet"
		}
		last = procs[len(procs)-1]
		if _, ok := r.seen[last.PID()]; !ok {
			r.seen[last.PID()] = time.Now()
		}
		if last.Exited() {
			return false, fmt.Sprintf("the last process (pid %d) exited", last.PID())
		}
		node := r.getNode(ctx, t)
		if node == nil {
			return false, "no Node yet"
		}
		c := status.Find(node.Status.Conditions)
		if c == nil {
			return false, fmt.Sprintf("no %s condition among %v", nodeapi.ConditionType, conditionTypes(node))
		}
		if got := (status.Report{Status: c.Status, Reason: c.Reason, Message: c.Message}); got != want {
			return false, fmt.Sprintf("%s %+v", nodeapi.ConditionType, got)
		}
		if pods := node.Status.Capacity.Pods(); pods.Value() != wantPods {
			return false, fmt.Sprintf("capacity pods %s", pods)
		}
		ready := status.FindType(node.Status.Conditions, corev1.NodeReady)
		if ready == nil || ready.Status != corev1.ConditionTrue {
			return false, fmt.Sprintf("Ready %+v", ready)
		}
		if seen := r.seen[last.PID()]; !ready.LastHeartbeatTime.Time.After(seen) {
			return false, fmt.Sprintf("Ready heartbeat %v is not newer than the last process (seen at %v)", ready.LastHeartbeatTime, seen)
		}
		return true, ""
	}, r.describe)
	return last
}

// waitPhase waits until the Node's ConfigStatus annotation has phase and
// active names the ConfigMap with UID active ("" for the local config).
func (r *hollowRun) waitPhase(ctx context.Context, t *testing.T, phase nodeapi.ConfigPhase, active types.UID) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("ConfigStatus phase %s, active %q", phase, active), func() (bool, string) {
		node := r.getNode(ctx, t)
		if node == nil {
			return false, "no Node yet"
		}
		cs, err := nodeapi.ReadConfigStatus(node, "kubelet")
		if err != nil || cs == nil {
			return false, fmt.Sprintf("ConfigStatus %+v, err %v", cs, err)
		}
		var got types.UID
		if cs.Active != nil && cs.Active.ConfigMap != nil {
			got = cs.Active.ConfigMap.UID
		}
		return cs.Phase == phase && got == active, fmt.Sprintf("phase %s, active %q, error %q", cs.Phase, got, cs.Error)
	}, r.describe)
}

// TestHollowKubeletFork runs the real kubelet code on dynconfig
// (bin/hollow-kubelet: kubemark's HollowKubelet whose KubeletConfiguration
// the Controller chooses, with the kubelet's own defaulting, validation and
// conversion) under a restart loop against the real API server, on one
// Node through five scenarios:
//  1. no assignment: the kubelet registers its Node, which goes Ready, and
//     ConfigOK says the local default config is in use;
//  2. maxPods 150 assigned (a ConfigMap and the annotation, as dynconfigctl
//     assign writes them): one restart, capacity pods 150, ConfigOK True on
//     that UID, promoted to last-known-good after its 2s trial;
//  3. ConfigOK stays on the Node next to the kubelet's own conditions
//     through at least three of the kubelet's status updates, and no
//     update ever drops it (watched over the whole test);
//  4. a config the kubelet's ValidateKubeletConfiguration rejects: no
//     restart, ConfigOK False "failed to validate current (UID: ...)";
//  5. a config the kubelet exits on after it started (its read-only server
//     on the port of its server): the adopting start and threshold
//     restarts crash, the next one rolls back, and the Node is Ready again
//     on the last-known-good config.
//
// Along the way it checks the ConfigStatus phases (Local, Promoted,
// RolledBack), the Controller's ConfigChanged and ConfigRolledBack Events,
// the Node's kubeletVersion and the tracking dir of that version.
func TestHollowKubeletFork(t *testing.T) {
	if testing.Short() {
		t.Skip("real kubelet against the API server: skipped with -short")
	}
	began := time.Now()
	bin := hollowKubeletBinary(t)
	h := newHarness(t)
	ctx := testContext(t, 10*time.Minute)

	// Its status every 2s instead of every 5m when nothing changed, so
	// scenario 3 sees several updates.
	dir, kubeconfig, confDir := hollowKubeletDir(t, h)
	port := cluster.FreePort(t)
	r := &hollowRun{h: h, nodeName: objectName(t, "hollow"), stateDir: filepath.Join(dir, "state"), seen: map[int]time.Time{}}
	history := watchNode(ctx, t, h, r.nodeName)
	t.Cleanup(func() { r.saveLogs(t) })
	loopStart := time.Now()
	r.loop = proctest.StartLoop(t, bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--node-name=" + r.nodeName,
		"--dynamic-config-dir=" + r.stateDir,
		"--root-dir=" + filepath.Join(dir, "root"),
		"--config-dir=" + confDir,
		fmt.Sprintf("--port=%d", port),
	}, nil)

	// 1. No assignment: the kubelet registers the Node; the local default
	// config (the kubelet's maxPods default, 110) is in use.
	r.waitNode(ctx, t, "the Node Ready on the local default config", localDefaultReport(), 110)
	registered := time.Since(loopStart)
	r.waitPhase(ctx, t, nodeapi.PhaseLocal, "")
	if got, want := r.getNode(ctx, t).Status.NodeInfo.KubeletVersion, kubernetesVersion(t); got != want {
		t.Errorf("Node kubeletVersion %q, want %q: the kubelet code of k8s.io/kubernetes this module requires, "+
			"stamped by ensure-bins.sh (a stale bin/hollow-kubelet?)", got, want)
	}
	// The Controller's startups and bad marks are kept per kubelet version.
	if _, err := os.Stat(filepath.Join(r.stateDir, "tracking", "hollow-kubelet-"+kubernetesVersion(t))); err != nil {
		t.Errorf("tracking dir of this kubelet version: %v", err)
	}
	if diff := cmp.Diff([]string{"running"}, proctest.ExitCodes(r.loop.All())); diff != "" {
		t.Fatalf("processes before any assignment (-want +got):\n%s\n%s", diff, r.describe())
	}

	// 2. maxPods 150 with a 2s trial: one restart onto it, then promotion.
	const threshold = 2
	good := h.createTrialConfigMap(ctx, t, objectName(t, "good"), kubeletPayload(150), "2s", threshold)
	node := &testNode{h: h, name: r.nodeName}
	node.assign(ctx, t, good)
	onGood := r.waitNode(ctx, t, "the Node Ready on maxPods 150", currentReport(good), 150)
	if diff := cmp.Diff([]string{"exit 0", "running"}, proctest.ExitCodes(r.loop.All())); diff != "" {
		t.Fatalf("processes up to the assigned config (-want +got):\n%s\n%s", diff, r.describe())
	}
	pollUntil(t, "maxPods 150's promotion to last-known-good", func() (bool, string) {
		src, err := readPointer(r.stateDir, "last-known-good")
		if err != nil || src == nil || src.ConfigMap == nil {
			return false, fmt.Sprintf("pointer %+v, err %v", src, err)
		}
		return src.ConfigMap.UID == good.UID, fmt.Sprintf("names UID %q", src.ConfigMap.UID)
	}, r.describe)
	r.waitPhase(ctx, t, nodeapi.PhasePromoted, good.UID)
	if onGood.Exited() {
		t.Fatalf("the kubelet on maxPods 150 exited during its trial\n%s", r.describe())
	}

	// 3. ConfigOK next to the kubelet's conditions through three more
	// status updates of the kubelet on maxPods 150 (and every version of
	// the Node is watched from before it existed).
	updatesBefore, _ := history.check()
	pollUntil(t, "three kubelet status updates with ConfigOK on the Node", func() (bool, string) {
		n, problems := history.check()
		if len(problems) > 0 {
			t.Fatalf("ConfigOK or a kubelet condition went missing:\n%s", strings.Join(problems, "\n"))
		}
		return n >= updatesBefore+3, fmt.Sprintf("%d updates, %d before", n, updatesBefore)
	}, r.describe)
	if onGood.Exited() || len(r.loop.All()) != 2 {
		t.Fatalf("the kubelet on maxPods 150 did not run through its status updates\n%s", r.describe())
	}
	node.wantReport(ctx, t, currentReport(good))

	// 4. A config the kubelet's own validation rejects (the image GC low
	// threshold must be below the high one): ConfigOK False, the kubelet
	// keeps running maxPods 150, no restart.
	before := len(r.loop.All())
	invalid := h.createTrialConfigMap(ctx, t, objectName(t, "invalid"),
		kubeletPayload(99)+"imageGCHighThresholdPercent: 60\nimageGCLowThresholdPercent: 70\n", "2s", threshold)
	node.assign(ctx, t, invalid)
	r.waitNode(ctx, t, "the invalid config rejected", status.Report{
		Status: corev1.ConditionFalse, Reason: status.ValidateFailedReason(invalid.UID),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault),
	}, 150)
	r.waitPhase(ctx, t, nodeapi.PhaseRolledBack, good.UID)
	if got := len(r.loop.All()); got != before {
		t.Fatalf("%d restarts for a config that fails validation, want none\n%s", got-before, r.describe())
	}
	// The kubelet's own words (components/kubelet says it differently):
	// its ValidateKubeletConfiguration rejected the config.
	const kubeletWords = "imageGCLowThresholdPercent: Invalid value: invalid configuration: " +
		"imageGCLowThresholdPercent (--image-gc-low-threshold) 70 must be less than imageGCHighThresholdPercent"
	if !strings.Contains(onGood.Stderr(), kubeletWords) {
		t.Errorf("the kubelet on maxPods 150 did not log the kubelet's validation error %q; stderr tail:\n%s",
			kubeletWords, proctest.Tail(onGood.Stderr(), 20))
	}

	// 5. A config the kubelet exits on after it started: its read-only
	// server on the port of its server (--port) fails to listen, and the
	// kubelet exits 1. The process on maxPods 150 exits 0 to restart onto
	// it, the adopting start and threshold restarts crash, and the next
	// start rolls back to maxPods 150.
	crash := h.createTrialConfigMap(ctx, t, objectName(t, "crash"),
		kubeletPayload(77)+fmt.Sprintf("readOnlyPort: %d\n", port), "10m", threshold)
	node.assign(ctx, t, crash)
	rolledBack := r.waitNode(ctx, t, "the crash-loop rollback, the Node Ready on maxPods 150", status.Report{
		Status: corev1.ConditionFalse, Reason: status.CrashLoopReason(crash.UID),
		Message: status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault),
	}, 150)
	procs := r.loop.All()[before-1:]
	want := []string{"exit 0"}
	for range threshold + 1 {
		want = append(want, "exit 1")
	}
	want = append(want, "running")
	if diff := cmp.Diff(want, proctest.ExitCodes(procs)); diff != "" {
		t.Fatalf("processes from the crash config's assignment to the rollback (-want +got):\n%s\n%s", diff, r.describe())
	}
	for i, p := range procs[1 : len(procs)-1] {
		if !strings.Contains(p.Stderr(), "address already in use") {
			t.Errorf("start %d on the crash config exited 1 without the port conflict; stderr tail:\n%s", i+1, proctest.Tail(p.Stderr(), 20))
		}
	}
	wantPointer(t, r.stateDir, "last-known-good", good.UID, "")
	r.waitPhase(ctx, t, nodeapi.PhaseRolledBack, good.UID)
	if rolledBack.Exited() {
		t.Fatalf("the kubelet rolled back to maxPods 150 exited\n%s", r.describe())
	}

	// The Events of the two restarts onto a new config and the two
	// rollbacks, recorded by the Controller on the Node.
	changeTo := func(cm *corev1.ConfigMap) string {
		return status.ConfigChangedMessage(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: "kubelet"}})
	}
	lkg := status.LastKnownGoodMessage(status.Ref{UID: good.UID}, status.LocalDefault)
	wantEvents := map[string][]string{
		status.EventReasonConfigChanged: {changeTo(good), changeTo(crash)},
		status.EventReasonConfigRolledBack: {
			status.ValidateFailedReason(invalid.UID) + "; " + lkg,
			status.CrashLoopReason(crash.UID) + "; " + lkg,
		},
	}
	for reason, want := range wantEvents {
		var got []string
		pollUntil(t, reason+" events", func() (bool, string) {
			got = eventMessages(h.nodeEvents(ctx, t, r.nodeName, reason))
			return len(got) >= len(want), fmt.Sprintf("%q", got)
		}, r.describe)
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s events of Node %s (-want +got):\n%s", reason, r.nodeName, diff)
		}
	}

	updates, problems := history.check()
	if len(problems) > 0 {
		t.Errorf("ConfigOK or a kubelet condition went missing:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("Node Ready on the local config %v after the first start; %d kubelet status updates with ConfigOK; %d processes; %v in all",
		registered.Round(time.Millisecond), updates, len(r.loop.All()), time.Since(began).Round(time.Millisecond))
}

// hollowKubeletDir makes a hollow kubelet's working dir: its kubeconfig for
// the test cluster, and a --config-dir whose drop-in makes the kubelet post
// its Node status every 2s instead of every 5m when nothing changed.
func hollowKubeletDir(t *testing.T, h *harness) (dir, kubeconfig, confDir string) {
	t.Helper()
	dir = t.TempDir()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, h.cl.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	confDir = filepath.Join(dir, "kubelet.conf.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-status.conf"), []byte(
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
			"nodeStatusUpdateFrequency: 2s\nnodeStatusReportFrequency: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, kubeconfig, confDir
}
