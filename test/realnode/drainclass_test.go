//go:build linux

package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// The drain-class change of issue 31 on the real kubelet: the CPU manager's
// policy, none (the default) to static. The kubelet keeps its policy's
// state in cpuManagerStateFile under its root dir
// (pkg/kubelet/cm/cpumanager: cpuManagerStateFileName) and refuses to start
// when the configured policy differs from the one in that file
// (cpumanager/state/state_checkpoint.go: the error below, then
// "Failed to start ContainerManager" and exit 1 in
// pkg/kubelet/kubelet.go; the log quotes the error with %q, hence the
// backslashes). The static policy also needs CPUs reserved for
// the system (cpu_manager.go: "the static policy requires
// systemreserved.cpu + kubereserved.cpu to be greater than zero"):
// reservedSystemCPUs "0" reserves CPU 0 and sets systemReserved cpu to 1
// (cmd/kubelet/app/server.go), which leaves CPU 1 for pods on this 2-core
// machine.
const (
	cpuManagerStateFile = "cpu_manager_state"
	staticPolicyPayload = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
	staticRefusedLog    = `configured policy \"static\" differs from state checkpoint policy \"none\"` // as klog quotes err=

	staticRefusedAdvice = "please drain this node and delete the CPU manager checkpoint file"
)

// needsTwoCPUs skips the test on a machine with one CPU: the static policy
// with CPU 0 reserved leaves no CPU to share.
func needsTwoCPUs(t *testing.T) {
	t.Helper()
	if runtime.NumCPU() < 2 {
		t.Skipf("the static CPU manager policy with CPU 0 reserved needs a second CPU; this machine has %d", runtime.NumCPU())
	}
}

// TestStockKubeletDrainClassWithoutDrain is the drain-class change as
// dynconfig applied it before it knew the class (issue 31, "seen failing"):
// a stock kubelet that ran cpuManagerPolicy none with a pod on it is assigned
// cpuManagerPolicy static (CPU 0 reserved). The run role restarts the
// kubelet in place, no drain, the pre-start role leaves cpu_manager_state
// alone, and the kubelet refuses every start with the upstream error
// (staticRefusedLog); after threshold+1 starts the pre-start role puts
// last-known-good (none) back, the kubelet starts on it, and the pod,
// never evicted, runs on untouched. The state file still names the none
// policy throughout: the refused starts never wrote it.
func TestStockKubeletDrainClassWithoutDrain(t *testing.T) {
	cl, n := drainClassNode(t, false)
	pod := n.runPod(cl.Client, "web")
	containerID := pod.Status.ContainerStatuses[0].ContainerID

	// A remote last-known-good on the none policy (crashLoopRollsBack knows
	// it by maxPods 50).
	good := n.configMap("cpu-none", "maxPods: 50\n", trial, threshold)
	n.assign(good)
	n.eventually("the none config promoted", n.phase(nodeapi.PhasePromoted, good))
	n.lastKnownGoodIs(good)
	n.cpuPolicyOnDisk("none")

	static := n.configMap("cpu-static", "maxPods: 40\n"+staticPolicyPayload, trial, threshold)
	n.crashLoopRollsBack(static, good, staticRefusedLog)
	st := n.sup.startsSoFar()
	first := st[len(st)-threshold-2]
	if b, _ := os.ReadFile(first.log); !strings.Contains(string(b), staticRefusedAdvice) {
		t.Fatalf("the first start on %s does not give the kubelet's advice %q:\n%s", static.Name, staticRefusedAdvice, tail(first.log, 10))
	}
	n.podUntouched("web", containerID)
	n.lastKnownGoodIs(good)
	n.cpuPolicyOnDisk("none")
}

// cpuPolicyOnDisk fails the test unless the kubelet's CPU manager state
// file names policy want.
func (n *realNode) cpuPolicyOnDisk(want string) {
	n.t.Helper()
	if got := n.cpuPolicyFile(); got != want {
		n.t.Fatalf("%s: policy %q, want %q\n%s", filepath.Join(n.rootDir, cpuManagerStateFile), got, want, n.more())
	}
}

// cpuPolicyFile returns the policyName in the kubelet's CPU manager state
// file, "" when there is none, or a description of what is wrong with it.
func (n *realNode) cpuPolicyFile() string {
	b, err := os.ReadFile(filepath.Join(n.rootDir, cpuManagerStateFile))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	var cp struct {
		PolicyName string `json:"policyName"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return fmt.Sprintf("undecodable (%v): %s", err, b)
	}
	return cp.PolicyName
}
