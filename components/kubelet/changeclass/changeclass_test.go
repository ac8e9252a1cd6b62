package changeclass

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

type config = kubeletconfigv1beta1.KubeletConfiguration

func TestTable(t *testing.T) {
	tab := Table()
	if !slices.IsSortedFunc(tab, func(a, b Field) int { return cmpString(a.Path, b.Path) }) {
		t.Errorf("Table is not sorted by Path: %v", tab)
	}
	for i, f := range tab {
		if i > 0 && tab[i-1].Path == f.Path {
			t.Errorf("Table names %s twice", f.Path)
		}
		if f.Class == Restart {
			t.Errorf("%s: Table holds a Restart field", f.Path)
		}
		if f.Upstream == "" {
			t.Errorf("%s: no upstream source named", f.Path)
		}
		if (f.Class == Drain) != (len(f.StateFiles) > 0) {
			t.Errorf("%s: class %s with state files %v: a Drain field names its state files, no other does", f.Path, f.Class, f.StateFiles)
		}
		if got := Of(f.Path); !cmp.Equal(got, f) {
			t.Errorf("Of(%q) = %+v, Table has %+v", f.Path, got, f)
		}
	}
	// The caller's copy is its own.
	tab[0].StateFiles[0] = "changed"
	if Table()[0].StateFiles[0] == "changed" {
		t.Error("Table shares its StateFiles with the caller")
	}
	if got := Of("maxPods"); got.Class != Restart || got.Path != "maxPods" {
		t.Errorf(`Of("maxPods") = %+v, want Restart`, got)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Restart: "Restart", Drain: "Drain", Refuse: "Refuse", 7: "Class(7)"} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
}

func staticCPU(mut func(*config)) *config {
	c := &config{CPUManagerPolicy: "static", KubeReserved: map[string]string{"cpu": "500m", "memory": "1Gi"}, SystemReserved: map[string]string{"cpu": "500m"}}
	if mut != nil {
		mut(c)
	}
	return c
}

func staticMemory(mut func(*config)) *config {
	c := &config{MemoryManagerPolicy: "Static", ReservedMemory: []kubeletconfigv1beta1.MemoryReservation{
		{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("1100Mi")}},
	}}
	if mut != nil {
		mut(c)
	}
	return c
}

func podLevel(on bool) func(*config) {
	return func(c *config) {
		c.FeatureGates = map[string]bool{"PodLevelResourceManagers": on}
	}
}

func podLevelConfig(on bool) *config {
	c := &config{}
	podLevel(on)(c)
	return c
}

func TestCompare(t *testing.T) {
	cpuDrain := func(fields ...string) Change {
		return Change{Class: Drain, Fields: fields, StateFiles: []string{CPUManagerStateFile}}
	}
	memDrain := func(fields ...string) Change {
		return Change{Class: Drain, Fields: fields, StateFiles: []string{MemoryManagerStateFile}}
	}
	for _, tc := range []struct {
		name     string
		old, new *config
		want     Change
	}{
		{"nil old", nil, staticCPU(nil), Change{}},
		{"nil new", staticCPU(nil), nil, Change{}},
		{"nothing changed", staticCPU(nil), staticCPU(nil), Change{}},
		{"a restart field", &config{}, &config{MaxPods: 60}, Change{}},
		// The kubelet's check: "configured policy "static" differs from
		// state checkpoint policy "none"".
		{"cpu none to static", &config{}, staticCPU(nil), cpuDrain("cpuManagerPolicy")},
		{"cpu static to none (the rollback)", staticCPU(nil), &config{CPUManagerPolicy: "none"}, cpuDrain("cpuManagerPolicy")},
		{"cpu policy defaulted or not", &config{}, &config{CPUManagerPolicy: "none"}, Change{}},
		{"reserved CPUs under none keep no state", &config{ReservedSystemCPUs: "0"}, &config{ReservedSystemCPUs: "1"}, Change{}},
		{"reserved CPUs grow under static", staticCPU(func(c *config) { c.ReservedSystemCPUs = "0" }), staticCPU(func(c *config) { c.ReservedSystemCPUs = "0-1" }), cpuDrain("reservedSystemCPUs")},
		{"reserved CPUs shrink under static", staticCPU(func(c *config) { c.ReservedSystemCPUs = "0-1" }), staticCPU(func(c *config) { c.ReservedSystemCPUs = "1" }), Change{}},
		{"reserved CPUs spelled otherwise", staticCPU(func(c *config) { c.ReservedSystemCPUs = "0-2" }), staticCPU(func(c *config) { c.ReservedSystemCPUs = "0,1,2" }), Change{}},
		{"reserved CPUs shrink with strict reservation",
			staticCPU(func(c *config) {
				c.ReservedSystemCPUs = "0-1"
				c.CPUManagerPolicyOptions = map[string]string{"strict-cpu-reservation": "true"}
			}),
			staticCPU(func(c *config) {
				c.ReservedSystemCPUs = "1"
				c.CPUManagerPolicyOptions = map[string]string{"strict-cpu-reservation": "true"}
			}),
			cpuDrain("reservedSystemCPUs")},
		{"strict reservation turns on", staticCPU(nil), staticCPU(func(c *config) { c.CPUManagerPolicyOptions = map[string]string{"strict-cpu-reservation": "true"} }), cpuDrain("cpuManagerPolicyOptions")},
		{"strict reservation turns on under none", &config{}, &config{CPUManagerPolicyOptions: map[string]string{"strict-cpu-reservation": "true"}}, Change{}},
		{"another option", staticCPU(nil), staticCPU(func(c *config) { c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "true"} }), Change{}},
		{"reserved count grows", staticCPU(nil), staticCPU(func(c *config) { c.KubeReserved["cpu"] = "1500m" }), cpuDrain("kubeReserved")},
		{"reserved count the same", staticCPU(nil), staticCPU(func(c *config) { c.KubeReserved["cpu"] = "600m"; c.SystemReserved["cpu"] = "0.4" }), Change{}},
		{"reserved memory is not the CPU manager's", staticCPU(nil), staticCPU(func(c *config) { c.KubeReserved["memory"] = "2Gi" }), Change{}},
		{"reserved count under explicit CPUs", staticCPU(func(c *config) { c.ReservedSystemCPUs = "0" }), staticCPU(func(c *config) { c.ReservedSystemCPUs = "0"; c.SystemReserved["cpu"] = "3" }), Change{}},
		{"explicit CPUs to a count", staticCPU(func(c *config) { c.ReservedSystemCPUs = "0" }), staticCPU(nil), cpuDrain("reservedSystemCPUs")},
		{"memory None to Static", &config{}, staticMemory(nil), memDrain("memoryManagerPolicy")},
		{"memory Static to None", staticMemory(nil), &config{MemoryManagerPolicy: "None"}, memDrain("memoryManagerPolicy")},
		{"memory reservation changes", staticMemory(nil), staticMemory(func(c *config) {
			c.ReservedMemory[0].Limits["memory"] = resource.MustParse("2Gi")
		}), memDrain("reservedMemory")},
		{"memory reservation spelled otherwise", staticMemory(nil), staticMemory(func(c *config) {
			c.ReservedMemory[0].Limits = corev1.ResourceList{"memory": resource.MustParse("1153433600"), "hugepages-1Gi": resource.MustParse("0")}
		}), Change{}},
		{"memory reservation under None", &config{}, staticMemory(func(c *config) { c.MemoryManagerPolicy = "None" }), Change{}},
		{"both managers", &config{}, staticMemory(func(c *config) { c.CPUManagerPolicy = "static" }),
			Change{Class: Drain, Fields: []string{"cpuManagerPolicy", "memoryManagerPolicy"}, StateFiles: []string{CPUManagerStateFile, MemoryManagerStateFile}}},
		{"pod-level managers turn off under static CPU", staticCPU(podLevel(true)), staticCPU(podLevel(false)), cpuDrain("featureGates")},
		{"pod-level managers turn off by AllBeta", staticCPU(func(c *config) { c.FeatureGates = map[string]bool{"AllBeta": true} }), staticCPU(nil), cpuDrain("featureGates")},
		{"pod-level managers turn on", staticCPU(nil), staticCPU(podLevel(true)), Change{}},
		{"pod-level managers turn off under Static memory", staticMemory(podLevel(true)), staticMemory(podLevel(false)), memDrain("featureGates")},
		{"pod-level managers turn off under none", podLevelConfig(true), &config{}, Change{}},
		{"pod-level managers turn off under both", staticMemory(func(c *config) { c.CPUManagerPolicy = "static"; podLevel(true)(c) }), staticMemory(func(c *config) { c.CPUManagerPolicy = "static" }),
			Change{Class: Drain, Fields: []string{"featureGates"}, StateFiles: []string{CPUManagerStateFile, MemoryManagerStateFile}}},
		{"refuse wins", &config{}, staticCPU(func(c *config) { c.SystemCgroups = "/system.slice" }), Change{Class: Refuse, Fields: []string{"systemCgroups"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.old, tc.new)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Compare: -want +got:\n%s", diff)
			}
		})
	}
}

func TestChangeString(t *testing.T) {
	c := Compare(&config{}, staticMemory(func(c *config) { c.CPUManagerPolicy = "static" }))
	if got, want := c.String(), "Drain (cpuManagerPolicy, memoryManagerPolicy): state files cpu_manager_state, memory_manager_state"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Change{}).String(); got != "Restart" {
		t.Errorf("String() = %q, want Restart", got)
	}
}

// BenchmarkCompare: one comparison of two static CPU configs that differ
// in their reserved CPUs.
func BenchmarkCompare(b *testing.B) {
	old := staticCPU(func(c *config) { c.ReservedSystemCPUs = "0-1" })
	new := staticCPU(func(c *config) { c.ReservedSystemCPUs = "0-3" })
	b.ReportAllocs()
	for b.Loop() {
		if Compare(old, new).Class != Drain {
			b.Fatal("not Drain")
		}
	}
}
