package changeclass

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/dynconfig/dynconfig/components/internal/featuregates"
)

// Class is what it costs to apply a change of a field in place. The zero
// value is Restart; the classes are ordered by cost.
type Class int

const (
	// Restart: a kubelet restart applies the change.
	Restart Class = iota
	// Drain: the node is drained and the state files the field names are
	// removed while the kubelet is stopped, before it starts with the
	// change.
	Drain
	// Refuse: the change cannot be applied in place (nor rolled back) by
	// dynconfig at all.
	Refuse
)

// String returns the class's name: "Restart", "Drain" or "Refuse".
func (c Class) String() string {
	switch c {
	case Restart:
		return "Restart"
	case Drain:
		return "Drain"
	case Refuse:
		return "Refuse"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// The state files of the kubelet's managers, in its root dir.
const (
	// CPUManagerStateFile is the CPU manager's checkpoint
	// (pkg/kubelet/cm/cpumanager/cpu_manager.go, cpuManagerStateFileName).
	CPUManagerStateFile = "cpu_manager_state"
	// MemoryManagerStateFile is the memory manager's checkpoint
	// (pkg/kubelet/cm/memorymanager/memory_manager.go,
	// memoryManagerStateFileName).
	MemoryManagerStateFile = "memory_manager_state"
)

// Field is the change class of one field of KubeletConfiguration.
type Field struct {
	// Path is the field's JSON name in KubeletConfiguration, e.g.
	// "cpuManagerPolicy".
	Path string
	// Class is the cost of changing it.
	Class Class
	// StateFiles are the files, in the kubelet's root dir, that a Drain
	// change of it removes, e.g. "cpu_manager_state".
	StateFiles []string
	// When says in words when a change of the field is of Class; empty:
	// any change. Compare applies it.
	When string
	// Upstream names the upstream sources that say so, separated by "; ",
	// each as "file:symbol", the file under pkg/kubelet of k8s.io/kubernetes
	// unless a module is named first ("k8s.io/kubelet config/..."), the
	// symbol a function, "(*Type).method" or "Type.Field", optionally
	// followed by a quotation of the file in parentheses. The pin test
	// (test/kubeletpin) finds each in the kubelet module.
	Upstream string
}

// entry is a Field with the condition Compare applies.
type entry struct {
	Field
	// changed reports whether the change from old to new is of the
	// field's class; old and new are not nil.
	changed func(old, new *kubeletconfigv1beta1.KubeletConfiguration) bool
	// files, when set, returns the state files a change removes, a subset
	// of StateFiles (a field that concerns both managers); unset: all.
	files func(old, new *kubeletconfigv1beta1.KubeletConfiguration) []string
}

const (
	cpuStatic      = "static"
	cpuNone        = "none"
	whenCPUStatic  = "the CPU manager policy is static before and after the change, and "
	restoreCPU     = "cm/cpumanager/state/state_checkpoint.go:(*stateCheckpoint).restoreState"
	validateCPU    = "cm/cpumanager/policy_static.go:(*staticPolicy).validateState"
	restoreMemory  = "cm/memorymanager/state/state_checkpoint.go:(*stateCheckpoint).restoreState"
	validateMemory = "cm/memorymanager/policy_static.go:(*staticPolicy).validateState"
	strictOption   = "strict-cpu-reservation"
	podLevelGate   = "PodLevelResourceManagers"
)

// table is sorted by Path.
var table = []entry{
	{Field{
		Path: "cpuManagerPolicy", Class: Drain, StateFiles: []string{CPUManagerStateFile},
		Upstream: restoreCPU,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return cpuPolicy(o) != cpuPolicy(n)
	}, nil},
	{Field{
		Path: "cpuManagerPolicyOptions", Class: Drain, StateFiles: []string{CPUManagerStateFile},
		When:     whenCPUStatic + "the " + strictOption + " option turns on or off",
		Upstream: validateCPU,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return bothCPUStatic(o, n) && strict(o) != strict(n)
	}, nil},
	{Field: Field{
		Path: "featureGates", Class: Drain, StateFiles: []string{CPUManagerStateFile, MemoryManagerStateFile},
		When: "the " + podLevelGate + " gate turns off while the CPU manager policy is static (cpu_manager_state) " +
			"or the memory manager policy is Static (memory_manager_state) before and after the change: " +
			"the checkpoint's pod-level assignments are then ignored and the rest no longer adds up",
		Upstream: restoreCPU + "; " + validateCPU + "; " + validateMemory,
	}, changed: func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return len(podLevelFiles(o, n)) > 0
	}, files: podLevelFiles},
	{Field{
		Path: "kubeReserved", Class: Drain, StateFiles: []string{CPUManagerStateFile},
		When:     whenCPUStatic + "its cpu changes, and with it the number of CPUs the kubelet reserves (reservedSystemCPUs is unset on both sides, or on one)",
		Upstream: "cm/cpumanager/cpu_manager.go:NewManager; " + validateCPU,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return reservedCPUsMoved(o, n) && (o.ReservedSystemCPUs == "" || n.ReservedSystemCPUs == "") &&
			!sameQuantity(o.KubeReserved["cpu"], n.KubeReserved["cpu"])
	}, nil},
	{Field{
		Path: "memoryManagerPolicy", Class: Drain, StateFiles: []string{MemoryManagerStateFile},
		Upstream: restoreMemory,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return memoryPolicy(o) != memoryPolicy(n)
	}, nil},
	{Field{
		Path: "reservedMemory", Class: Drain, StateFiles: []string{MemoryManagerStateFile},
		When:     "the memory manager policy is Static before and after the change, and the memory reserved on a NUMA node changes",
		Upstream: validateMemory,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return memoryPolicy(o) == kubeletconfigv1beta1.StaticMemoryManagerPolicy &&
			memoryPolicy(n) == kubeletconfigv1beta1.StaticMemoryManagerPolicy &&
			!sameReservation(memoryReservation(o), memoryReservation(n))
	}, nil},
	{Field{
		Path: "reservedSystemCPUs", Class: Drain, StateFiles: []string{CPUManagerStateFile},
		When: whenCPUStatic + "the reserved set gains a CPU (with " + strictOption + ": changes at all), " +
			"or is set where it was not or the other way round (the kubelet then picks the CPUs by count and topology)",
		Upstream: validateCPU,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return reservedCPUsMoved(o, n) && !sameCPUs(o.ReservedSystemCPUs, n.ReservedSystemCPUs)
	}, nil},
	{Field{
		Path: "systemCgroups", Class: Refuse,
		Upstream: "k8s.io/kubelet config/v1beta1/types.go:KubeletConfiguration.SystemCgroups (\"Rolling back the flag requires a reboot.\"); " +
			"cm/container_manager_linux.go:ensureSystemCgroups",
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return o.SystemCgroups != n.SystemCgroups
	}, nil},
	{Field{
		Path: "systemReserved", Class: Drain, StateFiles: []string{CPUManagerStateFile},
		When:     whenCPUStatic + "its cpu changes, and with it the number of CPUs the kubelet reserves (reservedSystemCPUs is unset on both sides, or on one)",
		Upstream: "cm/cpumanager/cpu_manager.go:NewManager; " + validateCPU,
	}, func(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
		return reservedCPUsMoved(o, n) && (o.ReservedSystemCPUs == "" || n.ReservedSystemCPUs == "") &&
			!sameQuantity(o.SystemReserved["cpu"], n.SystemReserved["cpu"])
	}, nil},
}

// Table returns every field that is not Restart, sorted by Path. The
// slices are the caller's.
func Table() []Field {
	out := make([]Field, len(table))
	for i, e := range table {
		out[i] = e.Field
		out[i].StateFiles = slices.Clone(e.StateFiles)
	}
	return out
}

// Of returns the change class of the field at path (its JSON name in
// KubeletConfiguration); a field not in Table is Restart.
func Of(path string) Field {
	for _, e := range table {
		if e.Path == path {
			f := e.Field
			f.StateFiles = slices.Clone(e.StateFiles)
			return f
		}
	}
	return Field{Path: path, Class: Restart}
}

// Change is the class of a change of the whole configuration.
type Change struct {
	// Class is the worst class of the fields that changed.
	Class Class
	// Fields are the paths that changed with that class, sorted; empty for
	// Restart.
	Fields []string
	// StateFiles is the union of the StateFiles of Fields, sorted,
	// without duplicates: what a Drain change removes.
	StateFiles []string
}

// String says the class and, unless Restart, the fields and state files.
func (c Change) String() string {
	if c.Class == Restart {
		return "Restart"
	}
	s := fmt.Sprintf("%s (%s)", c.Class, strings.Join(c.Fields, ", "))
	if len(c.StateFiles) > 0 {
		s += ": state files " + strings.Join(c.StateFiles, ", ")
	}
	return s
}

// Compare returns the class of the change from old to new, each the
// kubelet's effective configuration (its config file and drop-ins merged;
// defaulted or not: Compare applies the kubelet's defaults to the fields
// it reads). A nil old (nothing known of what ran before) or nil new is a
// Restart.
func Compare(old, new *kubeletconfigv1beta1.KubeletConfiguration) Change {
	if old == nil || new == nil {
		return Change{}
	}
	var c Change
	for _, e := range table {
		if e.Class < c.Class || !e.changed(old, new) {
			continue
		}
		if e.Class > c.Class {
			c = Change{Class: e.Class}
		}
		c.Fields = append(c.Fields, e.Path)
		if e.files != nil {
			c.StateFiles = append(c.StateFiles, e.files(old, new)...)
		} else {
			c.StateFiles = append(c.StateFiles, e.StateFiles...)
		}
	}
	slices.Sort(c.StateFiles)
	c.StateFiles = slices.Compact(c.StateFiles)
	return c
}

func cpuPolicy(c *kubeletconfigv1beta1.KubeletConfiguration) string {
	if c.CPUManagerPolicy == "" {
		return cpuNone // the kubelet's default
	}
	return c.CPUManagerPolicy
}

func memoryPolicy(c *kubeletconfigv1beta1.KubeletConfiguration) string {
	if c.MemoryManagerPolicy == "" {
		return kubeletconfigv1beta1.NoneMemoryManagerPolicy // the kubelet's default
	}
	return c.MemoryManagerPolicy
}

func bothCPUStatic(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
	return cpuPolicy(o) == cpuStatic && cpuPolicy(n) == cpuStatic
}

// strict reports the strict-cpu-reservation option as the kubelet parses
// it (a value it cannot parse fails the kubelet's start on its own).
func strict(c *kubeletconfigv1beta1.KubeletConfiguration) bool {
	b, err := strconv.ParseBool(c.CPUManagerPolicyOptions[strictOption])
	return err == nil && b
}

// reservedCPUsMoved reports whether, under the static CPU policy on both
// sides, the new reserved CPU set can fail the static policy's start check
// against the old checkpoint. The checkpoint's shared pool holds the old
// reserved CPUs (and, with strict-cpu-reservation, none of them): without
// the option a new set within the old one always passes, with it only the
// same set does. When a side reserves by count (kubeReserved and
// systemReserved cpu, reservedSystemCPUs empty), the kubelet picks the CPUs
// by topology, which a configuration does not show: only the same count is
// known to give the same set.
func reservedCPUsMoved(o, n *kubeletconfigv1beta1.KubeletConfiguration) bool {
	if !bothCPUStatic(o, n) {
		return false
	}
	if o.ReservedSystemCPUs != "" && n.ReservedSystemCPUs != "" {
		a, aerr := cpuset.Parse(o.ReservedSystemCPUs)
		b, berr := cpuset.Parse(n.ReservedSystemCPUs)
		if aerr != nil || berr != nil {
			return o.ReservedSystemCPUs != n.ReservedSystemCPUs
		}
		if strict(n) {
			return !a.Equals(b)
		}
		return !b.IsSubsetOf(a)
	}
	if o.ReservedSystemCPUs == "" && n.ReservedSystemCPUs == "" {
		return reservedCount(o) != reservedCount(n)
	}
	return true
}

// reservedCount is the number of CPUs the static policy reserves when
// reservedSystemCPUs is empty: the ceiling of kubeReserved cpu plus
// systemReserved cpu (cm/cpumanager/cpu_manager.go NewManager). -1 when a
// value does not parse.
func reservedCount(c *kubeletconfigv1beta1.KubeletConfiguration) int64 {
	var milli int64
	for _, m := range []map[string]string{c.KubeReserved, c.SystemReserved} {
		v, ok := m["cpu"]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return -1
		}
		milli += q.MilliValue()
	}
	return int64(math.Ceil(float64(milli) / 1000))
}

func sameQuantity(a, b string) bool {
	if a == b {
		return true
	}
	qa, aerr := resource.ParseQuantity(a)
	qb, berr := resource.ParseQuantity(b)
	if a == "" {
		qa, aerr = resource.Quantity{}, nil
	}
	if b == "" {
		qb, berr = resource.Quantity{}, nil
	}
	return aerr == nil && berr == nil && qa.Cmp(qb) == 0
}

func sameCPUs(a, b string) bool {
	if a == b {
		return true
	}
	sa, aerr := cpuset.Parse(a)
	sb, berr := cpuset.Parse(b)
	return aerr == nil && berr == nil && sa.Equals(sb)
}

// memoryReservation is reservedMemory as the memory manager reads it
// (cm/memorymanager/memory_manager.go convertReserved): NUMA node ->
// resource -> bytes, a later entry for the same pair winning, without zero
// amounts (a zero reservation is no reservation).
func memoryReservation(c *kubeletconfigv1beta1.KubeletConfiguration) map[int32]map[string]int64 {
	out := map[int32]map[string]int64{}
	for _, r := range c.ReservedMemory {
		if out[r.NumaNode] == nil {
			out[r.NumaNode] = map[string]int64{}
		}
		for name, q := range r.Limits {
			out[r.NumaNode][string(name)] = q.Value()
		}
	}
	for node, m := range out {
		maps.DeleteFunc(m, func(_ string, v int64) bool { return v == 0 })
		if len(m) == 0 {
			delete(out, node)
		}
	}
	return out
}

func sameReservation(a, b map[int32]map[string]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]int64) bool { return maps.Equal(x, y) })
}

// podLevelFiles returns the checkpoints a change of the
// PodLevelResourceManagers gate from on to off breaks: with it on, the
// managers keep pod-level assignments in their checkpoints
// (PodEntries), which a kubelet with it off does not read, so that the
// CPU manager's CPUs, or the memory manager's machine state, no longer add
// up (cm/cpumanager/state/state_checkpoint.go restoreState; the static
// policies' validateState). Turning it on reads what is there.
func podLevelFiles(o, n *kubeletconfigv1beta1.KubeletConfiguration) []string {
	if !featuregates.Gates(o.FeatureGates).Enabled(podLevelGate) || featuregates.Gates(n.FeatureGates).Enabled(podLevelGate) {
		return nil
	}
	var files []string
	if bothCPUStatic(o, n) {
		files = append(files, CPUManagerStateFile)
	}
	if memoryPolicy(o) == kubeletconfigv1beta1.StaticMemoryManagerPolicy && memoryPolicy(n) == kubeletconfigv1beta1.StaticMemoryManagerPolicy {
		files = append(files, MemoryManagerStateFile)
	}
	return files
}
