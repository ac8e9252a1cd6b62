// Package kubelet is the dynconfig profile for the kubelet's configuration
// type, kubelet.config.k8s.io/v1beta1 KubeletConfiguration: its
// GroupVersionKind, ConfigMap payload key ("kubelet"), defaulting, validation
// and per-config trial settings.
//
// The kubelet's own defaulting and validation live in k8s.io/kubernetes,
// which a library cannot import. This package carries its own, written from
// the upstream rules of Kubernetes 1.37 on Linux and checked against them in
// its tests. It works on the v1beta1 type directly (upstream converts to an
// internal type first) and treats feature gates as the 1.37 defaults overlaid
// with the configuration's featureGates map.
//
// # Guarantees
//
//   - Default fills only unset fields (nil pointers, zero values) and is
//     idempotent; the few upstream exceptions are listed on Default.
//   - A defaulted empty configuration passes Validate.
//   - Validate reports every problem, each with the JSON path of the field at
//     fault and a field.ErrorType; it never modifies its argument and never
//     stops at the first error. Error order is stable (map keys are sorted).
//   - Profile has no state; every function here is safe for concurrent use.
//
// # Not guaranteed
//
// Validate does not look at the host. Upstream checks that depend on the
// machine the kubelet runs on are left out: the cgroup version (failCgroupV1
// on a cgroup v1 host; singleProcessOOMKill set to false on cgroup v1),
// whether reservedSystemCPUs are online CPUs, whether reservedMemory NUMA
// nodes exist and add up to the node allocatable reservation, and whether
// files named by the configuration (certificates, static pod path) exist.
package kubelet
