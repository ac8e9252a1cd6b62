// Package kubelet is the dynconfig profile for the kubelet's configuration
// type, kubelet.config.k8s.io/v1beta1 KubeletConfiguration: its
// GroupVersionKind, ConfigMap payload key ("kubelet"), defaulting, validation
// and per-config trial settings.
//
// The kubelet's own defaulting and validation live in k8s.io/kubernetes,
// which a library cannot import. This package carries its own, written from
// the upstream rules of Kubernetes 1.37 on Linux. It works on the v1beta1
// type directly (upstream converts to an internal type first) and treats
// feature gates as the kubelet does: the 1.37 defaults, AllAlpha and AllBeta
// for the alpha and beta gates the configuration does not set itself, and the
// configuration's featureGates map. It is plain functions on the typed
// struct: decoding and layering belong to the merge package.
//
// # Proven against upstream
//
// The test module's conformance tests (test/conformance) import
// k8s.io/kubernetes and compare this package with the kubelet's own code on
// generated configurations:
//
//   - Default equals the kubelet's defaulting field for field: the v1beta1
//     defaults of the kubelet's scheme (resource lists included) and the
//     Linux eviction defaults the kubelet applies when it loads its config
//     file. No difference is allowed; none of these defaults depends on the
//     host.
//   - Drop-ins merge as the kubelet's --config-dir: with
//     merge.Pipeline and this Profile, a base and drop-ins give the
//     configuration the kubelet's own loading and merging gives, field for
//     field on the kubelet's internal type. The base is defaulted (Default)
//     before the drop-ins merge into it, and the result gets
//     DefaultDropInMerge (the v1beta1 defaults, not the eviction defaults,
//     which the kubelet applies to its config file only). Relative paths
//     in a config file are not resolved against its directory, as the
//     kubelet does; the test uses absolute paths.
//   - featureGates is checked as the kubelet checks it: unknown names,
//     locked gates moved, gates not available in 1.37, and (once the names
//     are right) enabled gates whose dependencies are off are rejected.
//   - Validate and the kubelet (ValidateKubeletConfiguration with the
//     kubelet's feature gates, plus the startup checks listed below) agree
//     on accept or reject and on the fields at fault, valid and invalid
//     configurations alike. The only differences allowed are the checks
//     listed under "Checks added beyond upstream" (for exactly the values
//     each rule describes) and "Upstream checks left out"; the test knows
//     these lists and fails when this documentation and the test disagree.
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
// # Sources
//
// Defaults: upstream pkg/kubelet/apis/config/v1beta1/defaults.go and
// pkg/kubelet/eviction/defaults_linux.go, with the 1.35-1.37 changes
// (failCgroupV1 true, memoryReservationPolicy None, memoryThrottlingFactor no
// longer defaulted) taken from the field documentation of
// k8s.io/kubelet@v0.37.2. Validation: pkg/kubelet/apis/config/validation
// (validation.go, validation_reserved_memory.go, validation_linux.go),
// ParseThresholdConfig in pkg/kubelet/eviction/helpers.go, and the startup
// checks listed below. Feature gates: the table of package
// components/internal/featuregates (shared with the kube-proxy profile, as
// kube-proxy 1.37 registers the same gates), every gate the kubelet binary
// of 1.37 registers with its default, lock, stage and dependencies,
// generated from k8s.io/kubernetes by the test module (go generate
// ./components/internal/featuregates; a test there fails when the table is
// stale).
// defaultPodSysctls: the sysctl name grammar and namespaces of
// k8s.io/component-helpers/node/util/sysctl.
//
// # Upstream checks made here although upstream makes them at startup
//
// The kubelet refuses to start on these too, only later than
// ValidateKubeletConfiguration, when it builds the part of itself the field
// configures. Each item names the fields, then the rule.
//
//   - evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim:
//     known signals, thresholds and grace periods as the eviction manager
//     parses them (ParseThresholdConfig); every bad entry is reported here,
//     where upstream stops at the first.
//   - qosReserved: memory only, a whole percentage with its '%' sign, 0% to
//     100% (ParseQOSReserved).
//   - tlsMinVersion, tlsCipherSuites, tlsCurvePreferences: the names and
//     curve IDs component-base accepts.
//   - systemReserved, kubeReserved: cpu, memory, ephemeral-storage and pid,
//     each a non-negative quantity.
//   - containerLogMaxSize: a quantity that is a whole number of bytes (a
//     negative one turns log rotation off, as upstream).
//   - cpuManagerPolicy, memoryManagerPolicy, configMapAndSecretChangeDetectionStrategy, authorization.mode:
//     one of the values the kubelet's managers know on Linux.
//
// # Checks added beyond upstream
//
// Each is something the kubelet accepts but then runs badly with. Each item
// names the fields, then the rule.
//
//   - address: must be an IP (upstream silently listens on every interface
//     otherwise).
//   - clusterDNS: entries must be IPs (upstream drops the others, leaving
//     pods with fewer name servers than configured).
//   - podCIDR: must be a CIDR.
//   - tlsCertFile, tlsPrivateKeyFile: must be set together.
//   - cgroupDriver: "systemd" or "cgroupfs" (upstream takes any other value
//     for cgroupfs).
//   - evictionHard, evictionSoft, evictionMinimumReclaim: a NaN percentage is
//     rejected (it passes every upstream range check).
//   - memoryThrottlingFactor: NaN is rejected, likewise.
//   - shutdownGracePeriodByPodPriority: entries must have non-negative
//     periods and distinct priorities.
//   - reservedMemory: limits must be positive, not only non-zero.
//
// Where upstream stops at the first bad entry of a list or map (eviction
// thresholds, reserved resources, the image allowlist), every bad entry is
// reported here.
//
// # Upstream checks left out
//
// Checks that depend on the host running the kubelet rather than on the
// configuration. Each item names the fields, then the rule.
//
//   - failCgroupV1: true (the default) is refused on a cgroup v1 host.
//   - singleProcessOOMKill: false is refused on a cgroup v1 host.
//
// The kubelet's startup also checks, and this package does not, that
// reservedSystemCPUs are online CPUs, that reservedMemory NUMA nodes exist and
// add up to the node allocatable reservation for the Static memory manager
// policy, that the static CPU manager policy has CPUs reserved, and that
// files named by the configuration exist.
//
// Not checked here either, although the kubelet does at startup: the options
// maps of the CPU and topology managers (cpuManagerPolicyOptions,
// topologyManagerPolicyOptions), whose keys and the gates they need are the
// managers' business and change between releases; and, for logging, that a
// non-text format is not combined with klog command-line flags (that check
// looks at the validating process's own flags, which says nothing about the
// kubelet's).
//
// preloadedImagesVerificationAllowlist: plain image names are parsed with the
// container image reference grammar the kubelet uses
// (github.com/distribution/reference), so an entry is refused exactly when
// the kubelet refuses it.
package kubelet
