// Package changeclass says what it costs to apply a change of the kubelet's
// configuration (kubelet.config.k8s.io/v1beta1 KubeletConfiguration) in
// place, field by field, from the kubelet's own rules (Kubernetes 1.37):
//
//   - Restart (the default): a kubelet restart applies it. Every field not in
//     Table is of this class.
//   - Drain: the kubelet refuses to start when the field's new value does
//     not match a state checkpoint it keeps under its root dir (--root-dir,
//     /var/lib/kubelet by default), and upstream's remedy, in the refusal's
//     own words, is "please drain this node and delete the ... checkpoint
//     file ... before restarting Kubelet". Such a change is applied by
//     draining the node, removing the state files the field names while the
//     kubelet is stopped, and starting it; a rollback takes the same path.
//   - Refuse: no restart, drain or state reset applies it in place, or rolls
//     it back; dynconfig does not apply it at all.
//
// # How the table is derived
//
// The kubelet keeps these checkpoints in its root dir, each written by one
// manager (pkg/kubelet, k8s.io/kubernetes v1.37.0):
//
//   - cpu_manager_state (cm/cpumanager/cpu_manager.go,
//     cpuManagerStateFileName): the CPU manager's policy name, its default
//     CPU set and the exclusive CPUs of each container. At start,
//     state/state_checkpoint.go (*stateCheckpoint).restoreState refuses a
//     policy other than the checkpoint's ("configured policy %q differs from
//     state checkpoint policy %q"), and under the static policy
//     policy_static.go (*staticPolicy).validateState refuses reserved CPUs
//     that are not in the checkpoint's default set ("not all reserved cpus:
//     %q are present in defaultCpuSet: %q"), or, with the
//     strict-cpu-reservation option, reserved CPUs that are in it, and a
//     default set plus assignments that is not every CPU the policy owns.
//   - memory_manager_state (cm/memorymanager/memory_manager.go,
//     memoryManagerStateFileName): the memory manager's policy name and,
//     under the Static policy, each NUMA node's machine state, which records
//     the memory reserved there. restoreState refuses another policy
//     ("[memorymanager] configured policy %q differs from state checkpoint
//     policy %q"), and policy_static.go (*staticPolicy).validateState
//     refuses a reservation that differs from the recorded one
//     ("[memorymanager] the expected machine state is different from the
//     real one").
//   - Both: with the PodLevelResourceManagers feature gate on (beta, off by
//     default in 1.37), the static policies record the resources of a pod
//     with pod-level resources as a pod-level assignment beside the
//     containers' (PodEntries); a kubelet with the gate off does not read
//     them, so that the CPU manager's CPUs no longer add up ("current set
//     of available CPUs %q doesn't match with CPUs in state %q") and the
//     memory manager's machine state no longer matches. Turning the gate
//     off is Drain for the manager whose policy is static before and
//     after (featureGates); turning it on is not.
//   - dra_manager_state, dra_health_state, kubelet_internal_checkpoint
//     (device manager), allocated_pods_state, actuated_pods_state,
//     graceful_node_shutdown_state: none of them records a config field, and
//     none is checked against the config at start (the DRA and allocation
//     checkpoints refuse to load when corrupt, whatever the config). The
//     topology manager and the pod resources API keep no checkpoint. So no
//     field is Drain for them.
//
// Each Drain field of Table names the check (Field.Upstream), the state file
// it reads (Field.StateFiles), and when a change of it trips the check
// (Field.When). Compare applies that condition, so that, for example, a new
// reservedSystemCPUs under the none CPU policy, which keeps no CPU set, is a
// Restart and costs no drain. The conditions are exact (Drain exactly when
// some checkpoint an earlier start can leave makes the new start fail),
// except where a side reserves CPUs by count (kubeReserved and
// systemReserved cpu, reservedSystemCPUs empty): the kubelet then picks the
// CPUs by topology, which a configuration does not show, and any change of
// the count is Drain, also a smaller count whose CPUs the kubelet would
// pick among the old ones.
//
// One field is Refuse: systemCgroups. With it set, the kubelet moves every
// non-kernel process of the host into that cgroup at start
// (cm/container_manager_linux.go, ensureSystemCgroups), and nothing moves
// them back; upstream's own field doc says "Rolling back the flag requires a
// reboot" (k8s.io/kubelet/config/v1beta1 KubeletConfiguration.SystemCgroups).
// A change dynconfig cannot roll back is one it must not make. Fields
// considered and left Restart: cgroupDriver (since 1.34 the kubelet takes
// the driver from the container runtime and ignores the field when the
// runtime reports one); cgroupRoot, cgroupsPerQOS, podLogsDir and the
// topology manager's fields (no start check and no checkpoint; upstream
// documents no drain or reboot for them). The kubelet's root dir, where it
// keeps its state, is a flag (--root-dir), not a config field.
//
// # What is not covered
//
// Compare sees configurations, not the node: command-line flags that
// override a field (--reserved-cpus, --cpu-manager-policy) are invisible to
// it, as they are to the rest of dynconfig; a CPU taken offline or memory
// added while the kubelet was stopped trips the same checks without any
// config change.
//
// # Changing the table
//
// A field joins the table only with an upstream check that refuses the
// kubelet's start (Drain) or an upstream statement that the change cannot be
// undone without a reboot (Refuse), named in Field.Upstream as file:function
// of the kubelet module the test module pins. A Drain field names exactly the
// state files that check reads, and its When is as narrow as the check:
// a false Drain costs a node drain, a missing one a crash loop and a
// rollback. The pin test (test/kubeletpin) fails when upstream renames a
// field, a state file, a function cited or the refusal's message, or adds a
// manager checkpoint no field names; it also runs Compare against the real
// CPU and memory managers, so a new condition comes with its cases there.
// A new upstream version is adopted by reading the checks again, not by
// updating the pin alone. The
// "Changes that need a drain" section of deploy/kubelet/README.md is
// generated from Table (Markdown) and a test keeps it equal.
package changeclass
