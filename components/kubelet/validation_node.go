package kubelet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/cpuset"
)

// Node allocatable enforcement keys (upstream pkg/kubelet/types).
const (
	enforcePods                       = "pods"
	enforceSystemReserved             = "system-reserved"
	enforceSystemReservedCompressible = "system-reserved-compressible"
	enforceKubeReserved               = "kube-reserved"
	enforceKubeReservedCompressible   = "kube-reserved-compressible"
	enforceNone                       = "none"
)

// validateNodeAllocatable checks enforceNodeAllocatable and the settings it
// depends on: the reserved cgroups and cgroupsPerQOS.
func (v *validator) validateNodeAllocatable() {
	kc := v.kc
	list := kc.EnforceNodeAllocatable
	if len(list) == 0 {
		return
	}
	path := field.NewPath("enforceNodeAllocatable")
	has := func(key string) bool {
		for _, k := range list {
			if k == key {
				return true
			}
		}
		return false
	}
	if has(enforceSystemReserved) && has(enforceSystemReservedCompressible) {
		v.add(field.Invalid(path, list, fmt.Sprintf("%q and %q must not be used together", enforceSystemReserved, enforceSystemReservedCompressible)))
	}
	if has(enforceKubeReserved) && has(enforceKubeReservedCompressible) {
		v.add(field.Invalid(path, list, fmt.Sprintf("%q and %q must not be used together", enforceKubeReserved, enforceKubeReservedCompressible)))
	}
	needSystemCgroup, needKubeCgroup, needQOS := false, false, ""
	for i, key := range list {
		if i > 0 && contains(list[:i], key) {
			v.add(field.Duplicate(path.Index(i), key))
			continue
		}
		switch key {
		case enforcePods:
		case enforceSystemReserved, enforceSystemReservedCompressible:
			needSystemCgroup = true
		case enforceKubeReserved, enforceKubeReservedCompressible:
			needKubeCgroup = true
		case enforceNone:
			if len(list) > 1 {
				v.add(field.Invalid(path, list, fmt.Sprintf("must not list anything else when %q is listed", enforceNone)))
			}
			continue
		default:
			v.add(field.NotSupported(path.Index(i), key, []string{
				enforcePods, enforceSystemReserved, enforceSystemReservedCompressible,
				enforceKubeReserved, enforceKubeReservedCompressible, enforceNone,
			}))
			continue
		}
		if needQOS == "" {
			needQOS = key
		}
	}
	if needSystemCgroup && kc.SystemReservedCgroup == "" {
		v.add(field.Required(field.NewPath("systemReservedCgroup"),
			fmt.Sprintf("required when enforceNodeAllocatable lists %q or %q", enforceSystemReserved, enforceSystemReservedCompressible)))
	}
	if needKubeCgroup && kc.KubeReservedCgroup == "" {
		v.add(field.Required(field.NewPath("kubeReservedCgroup"),
			fmt.Sprintf("required when enforceNodeAllocatable lists %q or %q", enforceKubeReserved, enforceKubeReservedCompressible)))
	}
	if needQOS != "" && !boolean(kc.CgroupsPerQOS) {
		v.add(field.Invalid(field.NewPath("cgroupsPerQOS"), false,
			fmt.Sprintf("must be true when enforceNodeAllocatable lists %q", needQOS)))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateReservations checks systemReserved, kubeReserved,
// reservedSystemCPUs, reservedMemory and qosReserved. Upstream parses the
// first and last when the container manager starts, and refuses to start on
// failure.
func (v *validator) validateReservations() {
	kc := v.kc
	v.reservedResources("systemReserved", kc.SystemReserved)
	v.reservedResources("kubeReserved", kc.KubeReserved)

	if cpus := kc.ReservedSystemCPUs; cpus != "" {
		if kc.SystemReservedCgroup != "" || kc.KubeReservedCgroup != "" {
			v.add(field.Forbidden(field.NewPath("reservedSystemCPUs"), "must not be used together with systemReservedCgroup or kubeReservedCgroup"))
		}
		if _, err := cpuset.Parse(cpus); err != nil {
			v.add(field.Invalid(field.NewPath("reservedSystemCPUs"), cpus, "must be a CPU list such as \"0-3,8\": "+err.Error()))
		}
	}

	if len(kc.ReservedMemory) > 0 {
		path := field.NewPath("reservedMemory")
		type numaResource struct {
			node int32
			name corev1.ResourceName
		}
		seen := make(map[numaResource]bool)
		for i, rm := range kc.ReservedMemory {
			for _, name := range sortedResourceNames(rm.Limits) {
				limitPath := func() *field.Path { return path.Index(i).Child("limits").Key(string(name)) }
				if name != corev1.ResourceMemory && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
					v.add(field.NotSupported(limitPath(), string(name), []string{string(corev1.ResourceMemory), corev1.ResourceHugePagesPrefix + "<size>"}))
				}
				q := rm.Limits[name]
				if q.Sign() <= 0 {
					v.add(field.Invalid(limitPath(), q.String(), "reserved memory must be greater than zero"))
				}
				key := numaResource{rm.NumaNode, name}
				if seen[key] {
					v.add(field.Duplicate(limitPath(), fmt.Sprintf("NUMA node %d", rm.NumaNode)))
				}
				seen[key] = true
			}
		}
	}

	for _, name := range sortedKeys(kc.QOSReserved) {
		path := func() *field.Path { return field.NewPath("qosReserved").Key(name) }
		if name != string(corev1.ResourceMemory) {
			v.add(field.NotSupported(path(), name, []string{string(corev1.ResourceMemory)}))
			continue
		}
		raw := kc.QOSReserved[name]
		n, err := strconv.ParseInt(strings.TrimRight(raw, "%"), 10, 0)
		if err != nil || !strings.HasSuffix(raw, "%") {
			v.add(field.Invalid(path(), raw, "must be a whole percentage such as \"50%\""))
			continue
		}
		if n < 0 || n > 100 {
			v.add(field.Invalid(path(), raw, "must be between 0% and 100%"))
		}
	}
}

// reservedResources checks one of systemReserved and kubeReserved.
func (v *validator) reservedResources(fieldName string, m map[string]string) {
	for _, name := range sortedKeys(m) {
		path := func() *field.Path { return field.NewPath(fieldName).Key(name) }
		switch name {
		case string(corev1.ResourceCPU), string(corev1.ResourceMemory), string(corev1.ResourceEphemeralStorage), "pid":
		default:
			v.add(field.NotSupported(path(), name, []string{"cpu", "memory", "ephemeral-storage", "pid"}))
			continue
		}
		raw := m[name]
		q, err := resource.ParseQuantity(raw)
		if err != nil {
			v.add(field.Invalid(path(), raw, "must be a quantity such as \"500m\" or \"1Gi\""))
			continue
		}
		if q.Sign() < 0 {
			v.add(field.Invalid(path(), raw, "must not be negative"))
		}
	}
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// validateTaints checks registerWithTaints the way upstream does
// (pkg/util/taints CheckTaintValidation): a qualified-name key, a label-value
// value and a known effect; timeAdded must not be set.
func (v *validator) validateTaints() {
	for i, taint := range v.kc.RegisterWithTaints {
		path := field.NewPath("registerWithTaints").Index(i)
		for _, msg := range utilvalidation.IsQualifiedName(taint.Key) {
			v.add(field.Invalid(path.Child("key"), taint.Key, msg))
		}
		if taint.Value != "" {
			for _, msg := range utilvalidation.IsValidLabelValue(taint.Value) {
				v.add(field.Invalid(path.Child("value"), taint.Value, msg))
			}
		}
		switch taint.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			v.add(field.NotSupported(path.Child("effect"), taint.Effect, []corev1.TaintEffect{
				corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute,
			}))
		}
		if taint.TimeAdded != nil {
			v.add(field.Forbidden(path.Child("timeAdded"), "must not be set in the kubelet configuration"))
		}
	}
}
