package kubeletpin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/pkg/features"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/utils/cpuset"

	"github.com/dynconfig/dynconfig/components/kubelet/changeclass"
)

type config = kubeletconfigv1beta1.KubeletConfiguration

// machine: one socket, one NUMA node with 8 GiB, two cores of two threads
// (CPUs 0 and 2 on core 0, 1 and 3 on core 1).
var machine = &cadvisorapi.MachineInfo{
	NumCores: 4, NumPhysicalCores: 2, NumSockets: 1, MemoryCapacity: 8 << 30,
	Topology: []cadvisorapi.Node{{Id: 0, Memory: 8 << 30, Cores: []cadvisorapi.Core{
		{Id: 0, Threads: []int{0, 2}, SocketID: 0},
		{Id: 1, Threads: []int{1, 3}, SocketID: 0},
	}}},
}

type notReady struct{}

func (notReady) AddSource(string) {}
func (notReady) AllReady() bool   { return false }

// noRuntime has the one method the CPU and memory managers ask of the
// container runtime.
type noRuntime struct{}

func (noRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

func logger(t *testing.T) klog.Logger { return ktesting.NewLogger(t, ktesting.NewConfig()) }

// podLevelGate is the gate of the managers' pod-level assignments (it
// depends on PodLevelResources, on by default in 1.37).
const podLevelGate = string(features.PodLevelResourceManagers)

// setGates sets, in this process, podLevelGate as c sets it (off when it
// does not: its 1.37 default), as a kubelet on c would; it goes back to
// off when the test ends.
func setGates(t *testing.T, c *config) {
	t.Helper()
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{podLevelGate: c.FeatureGates[podLevelGate]}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{podLevelGate: false}); err != nil {
			t.Error(err)
		}
	})
}

func podLevel(c *config) {
	c.FeatureGates = map[string]bool{podLevelGate: true}
}

// cpuReservation is what the kubelet hands the CPU manager for c
// (cmd/kubelet/app/server.go: reservedSystemCPUs, when set, replaces the cpu
// of kubeReserved and systemReserved with its size).
func cpuReservation(t *testing.T, c *config) (cpuset.CPUSet, v1.ResourceList) {
	t.Helper()
	specific, err := cpuset.Parse(c.ReservedSystemCPUs)
	if err != nil {
		t.Fatalf("reservedSystemCPUs %q: %v", c.ReservedSystemCPUs, err)
	}
	if specific.Size() > 0 {
		return specific, v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(specific.Size()), resource.DecimalSI)}
	}
	total := resource.Quantity{}
	for _, m := range []map[string]string{c.KubeReserved, c.SystemReserved} {
		if v, ok := m["cpu"]; ok {
			total.Add(resource.MustParse(v))
		}
	}
	return specific, v1.ResourceList{v1.ResourceCPU: total}
}

func cpuPolicy(c *config) string {
	if c.CPUManagerPolicy == "" {
		return "none"
	}
	return c.CPUManagerPolicy
}

// startCPU starts the real CPU manager for c on the state files of root,
// as the kubelet's container manager does at the kubelet's start.
func startCPU(t *testing.T, root string, c *config) (cpumanager.Manager, error) {
	t.Helper()
	specific, reservation := cpuReservation(t, c)
	setGates(t, c)
	log := logger(t)
	m, err := cpumanager.NewManager(log, cpuPolicy(c), c.CPUManagerPolicyOptions, time.Hour, machine, specific, reservation, root,
		topologymanager.NewFakeManager(log))
	if err != nil {
		t.Fatalf("the CPU manager for %+v: %v", c, err)
	}
	// The reconcile loop Start launches for the static policy ticks hourly
	// and does nothing while the sources are not ready.
	err = m.Start(klog.NewContext(context.Background(), log), func() []*v1.Pod { return nil }, notReady{}, nil,
		noRuntime{}, containermap.NewContainerMap())
	return m, err
}

// memoryReservation converts c's reservedMemory to the kubelet's internal
// type, and sums it: the static policy requires the node allocatable
// memory reservation to equal it (the kubelet validates that).
func memoryReservation(c *config) ([]kubeletconfig.MemoryReservation, v1.ResourceList) {
	var out []kubeletconfig.MemoryReservation
	total := resource.Quantity{}
	for _, r := range c.ReservedMemory {
		out = append(out, kubeletconfig.MemoryReservation{NumaNode: r.NumaNode, Limits: r.Limits.DeepCopy()})
		if q, ok := r.Limits[v1.ResourceMemory]; ok {
			total.Add(q)
		}
	}
	return out, v1.ResourceList{v1.ResourceMemory: total}
}

func memoryPolicy(c *config) string {
	if c.MemoryManagerPolicy == "" {
		return "None"
	}
	return c.MemoryManagerPolicy
}

// startMemory starts the real memory manager for c on the state files of
// root.
func startMemory(t *testing.T, root string, c *config) error {
	t.Helper()
	reserved, reservation := memoryReservation(c)
	setGates(t, c)
	log := logger(t)
	m, err := memorymanager.NewManager(log, memoryPolicy(c), machine, reservation, reserved, root, topologymanager.NewFakeManager(log))
	if err != nil {
		t.Fatalf("the memory manager for %+v: %v", c, err)
	}
	return m.Start(klog.NewContext(context.Background(), log), func() []*v1.Pod { return nil }, notReady{}, nil,
		noRuntime{}, containermap.NewContainerMap())
}

// holdAllCPUs rewrites the CPU manager's checkpoint in root as if a pod
// held every allocatable CPU of m exclusively (pod-level when old turns
// the pod-level gates on), but one when the shared pool would otherwise be
// empty (the static policy refuses that).
func holdAllCPUs(t *testing.T, root string, m cpumanager.Manager, old *config) {
	t.Helper()
	setGates(t, old)
	st, err := cpustate.NewCheckpointState(logger(t), root, changeclass.CPUManagerStateFile, "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatal(err)
	}
	def := st.GetDefaultCPUSet()
	held := def.Intersection(m.GetAllocatableCPUs())
	if held.Equals(def) && held.Size() > 0 {
		held = held.Difference(cpuset.New(held.List()[held.Size()-1]))
	}
	if old.FeatureGates[podLevelGate] {
		st.SetPodCPUSet("pod-uid", held)
	} else {
		st.SetCPUSet("pod-uid", "c", held)
	}
	st.SetDefaultCPUSet(def.Difference(held))
}

// holdMemory rewrites the memory manager's checkpoint in root as a Static
// policy would after admitting a pod of 1 GiB on NUMA node 0: pod-level
// when old turns the pod-level gates on (the pod's 1 GiB, and its two
// containers each given the pod's shared pool, as AllocatePod records
// them), else one container's.
func holdMemory(t *testing.T, root string, old *config) {
	t.Helper()
	setGates(t, old)
	st, err := memorystate.NewCheckpointState(logger(t), root, changeclass.MemoryManagerStateFile, "Static")
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 30
	ms := st.GetMachineState()
	node := ms[0]
	node.NumberOfAssignments++
	node.Cells = []int{0}
	node.MemoryMap[v1.ResourceMemory].Reserved += size
	node.MemoryMap[v1.ResourceMemory].Free -= size
	st.SetMachineState(ms)
	blocks := []memorystate.Block{{NUMAAffinity: []int{0}, Type: v1.ResourceMemory, Size: size}}
	if old.FeatureGates[podLevelGate] {
		st.SetMemoryBlocks("pod-uid", "a", blocks)
		st.SetMemoryBlocks("pod-uid", "b", blocks)
		st.SetPodMemoryBlocks("pod-uid", blocks)
	} else {
		st.SetMemoryBlocks("pod-uid", "a", blocks)
	}
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func resetStateFiles(t *testing.T, root string, ch changeclass.Change) {
	t.Helper()
	for _, name := range ch.StateFiles {
		if err := os.Remove(filepath.Join(root, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

func static(reserved string, mut ...func(*config)) *config {
	c := &config{CPUManagerPolicy: "static", ReservedSystemCPUs: reserved}
	for _, f := range mut {
		f(c)
	}
	return c
}

func strict(c *config) {
	c.CPUManagerPolicyOptions = map[string]string{cpumanager.StrictCPUReservationOption: "true"}
}

func byCount(kube, system string) func(*config) {
	return func(c *config) {
		c.KubeReserved = map[string]string{"cpu": kube}
		if system != "" {
			c.SystemReserved = map[string]string{"cpu": system}
		}
	}
}

// The CPU manager: for each change, the manager of the old config starts
// on an empty root dir, then the manager of the new one starts on what
// that left (drained: no container holds a CPU) and on a copy where
// containers hold every allocatable CPU. Compare must say Drain whenever
// either start is refused, must say it only then where the package claims
// to be exact, and removing the files it names must let both start.
func TestCompareAgainstTheCPUManager(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *config
		// inexact: Compare may say Drain where the manager starts (the
		// kubelet picks reserved CPUs by topology, which Compare does not
		// see).
		inexact bool
	}{
		{"none to static", &config{}, static("0"), false},
		{"static to none", static("0"), &config{}, false},
		{"none, reserved CPUs change", &config{ReservedSystemCPUs: "0"}, &config{ReservedSystemCPUs: "1"}, false},
		{"static, the same", static("0"), static("0"), false},
		{"static, the same spelled otherwise", static("0-1"), static("0,1"), false},
		{"static, a CPU added", static("0"), static("0-1"), false},
		{"static, a CPU moved", static("0"), static("1"), false},
		{"static, a CPU removed", static("0-1"), static("1"), false},
		{"strict, the same", static("0", strict), static("0", strict), false},
		{"strict, a CPU removed", static("0-1", strict), static("1", strict), false},
		{"strict turns on", static("0"), static("0", strict), false},
		{"strict turns off", static("0", strict), static("0"), false},
		{"another option", static("0"), static("0", func(c *config) { c.CPUManagerPolicyOptions = map[string]string{cpumanager.FullPCPUsOnlyOption: "true"} }), false},
		{"by count, the same count", static("", byCount("500m", "500m")), static("", byCount("1", "")), false},
		{"by count, more", static("", byCount("1", "")), static("", byCount("1", "1")), false},
		{"by count, fewer", static("", byCount("2", "")), static("", byCount("1", "")), true},
		{"explicit to count", static("0"), static("", byCount("1", "")), true},
		{"count to explicit", static("", byCount("1", "")), static("1"), false},
		{"pod-level managers turn off", static("0", podLevel), static("0"), false},
		{"pod-level managers turn on", static("0"), static("0", podLevel), false},
		{"pod-level managers stay on", static("0", podLevel), static("0", podLevel), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := t.TempDir()
			m, err := startCPU(t, first, tc.old)
			if err != nil {
				t.Fatalf("the old config's first start: %v", err)
			}
			states := map[string]string{"drained": first}
			if cpuPolicy(tc.old) == "static" {
				busy := copyDir(t, first)
				holdAllCPUs(t, busy, m, tc.old)
				if _, err := startCPU(t, copyDir(t, busy), tc.old); err != nil {
					t.Fatalf("the old config on its own busy checkpoint: %v", err)
				}
				states["busy"] = busy
			}
			ch := changeclass.Compare(tc.old, tc.new)
			refused := ""
			for name, dir := range states {
				if _, err := startCPU(t, copyDir(t, dir), tc.new); err != nil {
					refused += fmt.Sprintf("%s: %v; ", name, err)
				}
			}
			switch {
			case refused != "" && ch.Class != changeclass.Drain:
				t.Errorf("the CPU manager refuses (%s) and Compare says %v", refused, ch)
			case refused == "" && ch.Class == changeclass.Drain && !tc.inexact:
				t.Errorf("Compare says %v and the CPU manager starts in every state", ch)
			}
			if ch.Class == changeclass.Drain {
				for name, dir := range states {
					reset := copyDir(t, dir)
					resetStateFiles(t, reset, ch)
					if _, err := startCPU(t, reset, tc.new); err != nil {
						t.Errorf("%s: with %v removed the CPU manager still refuses: %v", name, ch.StateFiles, err)
					}
				}
			}
		})
	}
}

func staticMemory(reserved string, mut ...func(*config)) *config {
	c := &config{MemoryManagerPolicy: "Static", ReservedMemory: []kubeletconfigv1beta1.MemoryReservation{
		{NumaNode: 0, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(reserved)}},
	}}
	for _, f := range mut {
		f(c)
	}
	return c
}

// The memory manager, the same way, a pod of 1 GiB holding memory on the
// busy checkpoint.
func TestCompareAgainstTheMemoryManager(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *config
	}{
		{"None to Static", &config{}, staticMemory("1Gi")},
		{"Static to None", staticMemory("1Gi"), &config{}},
		{"Static, the same", staticMemory("1Gi"), staticMemory("1024Mi")},
		{"Static, more reserved", staticMemory("1Gi"), staticMemory("2Gi")},
		{"None, the reservation changes", &config{ReservedMemory: staticMemory("1Gi").ReservedMemory}, &config{ReservedMemory: staticMemory("2Gi").ReservedMemory}},
		{"pod-level managers turn off", staticMemory("1Gi", podLevel), staticMemory("1Gi")},
		{"pod-level managers turn on", staticMemory("1Gi"), staticMemory("1Gi", podLevel)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := t.TempDir()
			if err := startMemory(t, first, tc.old); err != nil {
				t.Fatalf("the old config's first start: %v", err)
			}
			states := map[string]string{"drained": first}
			if memoryPolicy(tc.old) == "Static" {
				busy := copyDir(t, first)
				holdMemory(t, busy, tc.old)
				if err := startMemory(t, copyDir(t, busy), tc.old); err != nil {
					t.Fatalf("the old config on its own busy checkpoint: %v", err)
				}
				states["busy"] = busy
			}
			ch := changeclass.Compare(tc.old, tc.new)
			refused := ""
			for name, dir := range states {
				if err := startMemory(t, copyDir(t, dir), tc.new); err != nil {
					refused += fmt.Sprintf("%s: %v; ", name, err)
				}
			}
			if (refused != "") != (ch.Class == changeclass.Drain) {
				t.Fatalf("the memory manager refuses: %q; Compare says %v", refused, ch)
			}
			for name, dir := range states {
				if ch.Class != changeclass.Drain {
					break
				}
				reset := copyDir(t, dir)
				resetStateFiles(t, reset, ch)
				if err := startMemory(t, reset, tc.new); err != nil {
					t.Errorf("%s: with %v removed the memory manager still refuses: %v", name, ch.StateFiles, err)
				}
			}
		})
	}
}
