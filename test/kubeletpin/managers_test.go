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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
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
	log := logger(t)
	m, err := memorymanager.NewManager(log, memoryPolicy(c), machine, reservation, reserved, root, topologymanager.NewFakeManager(log))
	if err != nil {
		t.Fatalf("the memory manager for %+v: %v", c, err)
	}
	return m.Start(klog.NewContext(context.Background(), log), func() []*v1.Pod { return nil }, notReady{}, nil,
		noRuntime{}, containermap.NewContainerMap())
}

// holdAllCPUs rewrites the CPU manager's checkpoint in root as if
// containers held every allocatable CPU of m exclusively, but one when the
// shared pool would otherwise be empty (the static policy refuses that).
func holdAllCPUs(t *testing.T, root string, m cpumanager.Manager) {
	t.Helper()
	st, err := cpustate.NewCheckpointState(logger(t), root, changeclass.CPUManagerStateFile, "static", containermap.NewContainerMap())
	if err != nil {
		t.Fatal(err)
	}
	def := st.GetDefaultCPUSet()
	held := def.Intersection(m.GetAllocatableCPUs())
	if held.Equals(def) && held.Size() > 0 {
		held = held.Difference(cpuset.New(held.List()[held.Size()-1]))
	}
	st.SetCPUSet("pod-uid", "c", held)
	st.SetDefaultCPUSet(def.Difference(held))
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
				holdAllCPUs(t, busy, m)
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

func staticMemory(reserved string) *config {
	return &config{MemoryManagerPolicy: "Static", ReservedMemory: []kubeletconfigv1beta1.MemoryReservation{
		{NumaNode: 0, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(reserved)}},
	}}
}

// The memory manager, the same way (its check does not depend on what
// containers hold: a drained node is refused the same).
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := startMemory(t, root, tc.old); err != nil {
				t.Fatalf("the old config's first start: %v", err)
			}
			ch := changeclass.Compare(tc.old, tc.new)
			err := startMemory(t, copyDir(t, root), tc.new)
			if (err != nil) != (ch.Class == changeclass.Drain) {
				t.Fatalf("the memory manager's start: %v; Compare says %v", err, ch)
			}
			if ch.Class == changeclass.Drain {
				resetStateFiles(t, root, ch)
				if err := startMemory(t, root, tc.new); err != nil {
					t.Errorf("with %v removed the memory manager still refuses: %v", ch.StateFiles, err)
				}
			}
		})
	}
}
