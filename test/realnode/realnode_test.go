//go:build linux

package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// The trial and threshold of the configs the test assigns (ConfigMap
// annotations).
const (
	trial     = "8s"
	threshold = 2
)

// refusedConfig is a drop-in our validation accepts and the real kubelet
// refuses at start whatever the host's cgroup version: a reserved CPU that
// no Linux machine has (the kernel's NR_CPUS is at most 8192). The kubelet's
// own validation only parses reservedSystemCPUs; its run() then compares
// them with the CPUs cadvisor found online and returns refusedLog, before
// the container manager starts (cmd/kubelet/app/server.go, getReservedCPUs).
// failCgroupV1: true, used before, is refused on a cgroup v1 host only.
const (
	refusedConfig = "reservedSystemCPUs: \"9999\"\n"
	refusedLog    = "is not a subset of online-cpus"
)

// TestStockKubelet runs the whole lifecycle on one real node, in order:
// stock start; a good config; a config the kubelet refuses at start; a
// config it starts with and then exits on; a reboot with the API server
// down in the middle of a crash loop.
func TestStockKubelet(t *testing.T) {
	kubeletBin := requirements(t)
	began := time.Now()
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx := context.Background()
	repo := filepath.Join("..", "..")
	if _, err := cl.ApplyManifests(ctx, filepath.Join(repo, "deploy", "config-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	n := newRealNode(t, cl, kubeletBin)
	n.startContainerd(true)

	// 1. Stock start: no assignment, no drop-in; the Node goes Ready on the
	// node's own config and a pod runs.
	t0 := time.Now()
	n.startSupervisor()
	n.eventually("Node Ready on the local config", n.ready(110, t0))
	t.Logf("stock start: Node Ready %v after the supervisor started", time.Since(t0).Round(time.Millisecond))
	if st := n.sup.startsSoFar(); len(st) != 1 || st[0].dropIn != "" {
		t.Fatalf("stock start: %d starts, want 1 without a drop-in\n%s", len(st), n.more())
	}
	pod := n.runPod(cl.Client, "web")
	containerID := pod.Status.ContainerStatuses[0].ContainerID
	n.startFollow()
	n.eventually("ConfigOK True on the local config", func() (bool, string) {
		node, err := n.node()
		if err != nil {
			return false, err.Error()
		}
		c := condition(node, "ConfigOK")
		return c != nil && c.Status == corev1.ConditionTrue, fmt.Sprintf("%+v", c)
	})

	// 2. A good config: one kubelet restart, capacity 50, ConfigOK True on
	// its UID, the pod untouched, promoted after the trial.
	good := n.configMap("maxpods-50", "maxPods: 50\n", trial, threshold)
	t1 := time.Now()
	n.assign(good)
	n.eventually("Node Ready with capacity 50", n.ready(50, t1))
	t.Logf("good config: Node Ready with maxPods 50 %v after the assignment", time.Since(t1).Round(time.Millisecond))
	n.eventually("ConfigOK True on the good config", n.configOK(corev1.ConditionTrue, string(good.UID), ""))
	n.eventually("the good config promoted", n.phase(nodeapi.PhasePromoted, good))
	t.Logf("good config promoted %v after the assignment (trial %s)", time.Since(t1).Round(time.Millisecond), trial)
	if st := n.sup.startsSoFar(); len(st) != 2 || !strings.Contains(st[1].dropIn, "maxPods: 50") {
		t.Fatalf("good config: %d starts, want 2 (one restart), the second on the drop-in\n%s", len(st), n.more())
	}
	n.podUntouched("web", containerID)
	n.lastKnownGoodIs(good)

	// 3. A config our validation accepts that the real kubelet refuses at
	// start, on cgroup v1 and v2 hosts alike (refusedConfig): threshold+1
	// starts on it, then the pre-start role rolls back.
	refused := n.configMap("cpus-offline", "maxPods: 40\n"+refusedConfig, trial, threshold)
	n.crashLoopRollsBack(refused, good, refusedLog)

	// 4. A config the kubelet starts with and then exits on: its port is
	// taken.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	portTaken := n.configMap("port-taken", fmt.Sprintf("maxPods: 40\nport: %d\n", busy), trial, threshold)
	n.crashLoopRollsBack(portTaken, good, "address already in use")
	n.podUntouched("web", containerID)

	// 5. Reboot in the middle of a crash loop, the API server down: the
	// pre-start role alone counts the starts across the reboot, puts the
	// last-known-good back, and the kubelet starts.
	rebootBad := n.configMap("reboot-bad", "maxPods: 30\n"+refusedConfig, trial, threshold)
	before := len(n.sup.startsSoFar())
	n.assign(rebootBad)
	// Cut the power right after its first exit, while the supervisor waits
	// RestartSec (1s): polled every 10ms, so no pre-start role is cut short.
	deadline := time.Now().Add(waitTimeout)
	for {
		st := n.sup.startsSoFar()
		if len(st) > before && strings.Contains(st[len(st)-1].dropIn, "maxPods: 30") && st[len(st)-1].exit != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start on %s\n%s", rebootBad.Name, n.more())
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.stopFollow()
	n.sup.stop()
	n.stopRuntime()
	n.unmountAll()
	if err := os.RemoveAll(filepath.Join(n.dir, "containerd-state")); err != nil {
		t.Fatal(err)
	}
	if err := cl.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Log("reboot: kubelet, run role and containerd killed, runtime state wiped, API server stopped")
	n.startContainerd(false)
	n.startSupervisor()
	n.offlineRollback(threshold, func() []string { return dropInsOf(n.sup.startsSoFar(), func(s start) string { return s.dropIn }) })
	if err := cl.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	n.startFollow()
	n.eventually("Node Ready on last-known-good after the reboot", n.ready(50, t2))
	n.eventually("ConfigOK False after the reboot", n.configOK(corev1.ConditionFalse, string(good.UID), status.CrashLoopReason(rebootBad.UID)))
	// The pod's sandbox died with the runtime; the kubelet starts it again.
	n.eventually("pod web Running again after the reboot", func() (bool, string) {
		pod, err := cl.Client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podRunning(pod), string(pod.Status.Phase)
	})

	// 6. Managed → stock: the empty assignment. One restart; the pre-start
	// role removes the drop-in and resets last-known-good to local.
	before = len(n.sup.startsSoFar())
	t3 := time.Now()
	n.unassign()
	n.eventually("Node Ready on the node's own config again", n.ready(110, t3))
	n.eventually("ConfigOK True on the local config", n.configOK(corev1.ConditionTrue, "init", ""))
	if st := n.sup.startsSoFar(); len(st) != before+1 || st[len(st)-1].dropIn != "" {
		t.Fatalf("unassign: %d starts, want 1 more, without the drop-in\n%s", len(st)-before, n.more())
	}
	if _, err := os.Stat(filepath.Join(n.confDir, "99-dynconfig.conf")); !os.IsNotExist(err) {
		t.Fatalf("the drop-in is still there: %v", err)
	}

	// 7. ConfigRollouts over this real node and hollow kubelets.
	n.rollouts(ctx)
	t.Logf("realnode: whole test %v", time.Since(began).Round(time.Second))
}

// crashLoopRollsBack assigns bad and checks that the kubelet ran it exactly
// threshold+1 times, that the next start ran last-known-good, that the Node
// is Ready again with last-known-good's capacity, and that ConfigOK says
// so in the seed's words. want is a fragment of the kubelet's exit log.
func (n *realNode) crashLoopRollsBack(bad, lastKnownGood *corev1.ConfigMap, want string) {
	t := n.t
	t.Helper()
	before := len(n.sup.startsSoFar())
	t0 := time.Now()
	n.assign(bad)
	n.eventually("rollback of "+bad.Name, func() (bool, string) {
		st := n.sup.startsSoFar()
		if len(st) <= before+threshold+1 {
			return false, fmt.Sprintf("%d starts on it so far", len(st)-before)
		}
		return strings.Contains(st[len(st)-1].dropIn, "maxPods: 50"), "last start: " + st[len(st)-1].dropIn
	})
	n.eventually("Node Ready on last-known-good", n.ready(50, time.Now()))
	t.Logf("%s: rolled back, Node Ready again %v after the assignment", bad.Name, time.Since(t0).Round(time.Millisecond))
	st := n.sup.startsSoFar()[before:]
	if len(st) != threshold+2 {
		t.Fatalf("%s: %d starts, want %d: threshold+1 on it, then one on last-known-good\n%s", bad.Name, len(st), threshold+2, n.more())
	}
	for i, s := range st[:threshold+1] {
		if !strings.Contains(s.dropIn, string(bad.UID)) || s.exit == "" {
			t.Fatalf("%s: start %d ran %q (%s), want the bad config, ended", bad.Name, i, s.dropIn, s.exit)
		}
		if b, _ := os.ReadFile(s.log); !strings.Contains(string(b), want) {
			t.Fatalf("%s: start %d's kubelet log does not say %q:\n%s", bad.Name, i, want, tail(s.log, 10))
		}
	}
	last := st[threshold+1]
	if !strings.Contains(last.dropIn, string(lastKnownGood.UID)) || !strings.Contains(last.dropIn, "(last-known-good)") {
		t.Fatalf("%s: the rollback start ran %q, want last-known-good", bad.Name, last.dropIn)
	}
	n.eventually("ConfigOK False for "+bad.Name, n.configOK(corev1.ConditionFalse, string(lastKnownGood.UID), status.CrashLoopReason(bad.UID)))
}

// configOK: the condition has status s, its message names uid, and its
// reason is reason (when not empty).
func (n *realNode) configOK(s corev1.ConditionStatus, uid, reason string) func() (bool, string) {
	return func() (bool, string) {
		node, err := n.node()
		if err != nil {
			return false, err.Error()
		}
		c := condition(node, "ConfigOK")
		if c == nil {
			return false, "no ConfigOK"
		}
		return c.Status == s && strings.Contains(c.Message, uid) && (reason == "" || c.Reason == reason), fmt.Sprintf("%s %q %q", c.Status, c.Message, c.Reason)
	}
}

// phase: the ConfigStatus names cm as assigned and active, in phase p.
func (n *realNode) phase(p nodeapi.ConfigPhase, cm *corev1.ConfigMap) func() (bool, string) {
	return func() (bool, string) {
		node, err := n.node()
		if err != nil {
			return false, err.Error()
		}
		s, err := nodeapi.ReadConfigStatus(node, "kubelet")
		if err != nil || s == nil {
			return false, fmt.Sprint(err, errNoStatus)
		}
		ok := s.Phase == p && s.Active != nil && s.Active.ConfigMap != nil && s.Active.ConfigMap.UID == cm.UID
		return ok, fmt.Sprintf("%+v", s)
	}
}

func (n *realNode) podUntouched(name, containerID string) {
	n.t.Helper()
	pod, err := n.cl.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	if !podRunning(pod) || pod.Status.ContainerStatuses[0].ContainerID != containerID || pod.Status.ContainerStatuses[0].RestartCount != 0 {
		n.t.Fatalf("pod %s changed across kubelet restarts: %+v (was %s)", name, pod.Status.ContainerStatuses, containerID)
	}
}

func (n *realNode) lastKnownGoodIs(cm *corev1.ConfigMap) {
	n.t.Helper()
	snap, err := checkpoint.Inspect(n.stateDir)
	if err != nil {
		n.t.Fatal(err)
	}
	src := snap.LastKnownGood.Pointer.Source
	if src == nil || src.ConfigMap == nil || src.ConfigMap.UID != cm.UID {
		n.t.Fatalf("last-known-good is %+v, want %s", src, cm.UID)
	}
}
