// Package kubeletpin pins the kubelet change classes of
// components/kubelet/changeclass to the kubelet's own code in
// k8s.io/kubernetes v1.37.0, so that an upstream change breaks a test here
// instead of a node:
//
//   - TestTablePinned: every Path of changeclass.Table is a JSON field of
//     KubeletConfiguration; every state file it names is the constant a
//     kubelet manager passes to its checkpoint; every upstream source it
//     names (file and function, method or field, and the quotation) is in
//     the module; and every manager checkpoint of the kubelet is named by
//     some field.
//   - TestPolicyMismatchRefused: the real checkpoint code of the CPU and
//     memory managers refuses a policy other than the checkpoint's with the
//     message changeclass quotes.
//   - TestCompareAgainstTheCPUManager, TestCompareAgainstTheMemoryManager:
//     changeclass.Compare against the real CPU and memory managers started
//     on a checkpoint an earlier start left, drained and busy (a pod
//     holding every allocatable CPU, or 1 GiB of NUMA node 0; pod-level
//     when the old config turns PodLevelResourceManagers on, with that gate
//     set in the process as the kubelet would): whenever a manager refuses,
//     Compare says Drain; where the package doc says it is exact, it says
//     Drain only then; and after the state files Compare names are
//     removed, the manager starts.
//   - TestPreStartLetsTheKubeletStart: kubeletdropin.PreStart on a
//     cpuManagerPolicy none -> static change and back, with the CPU manager's
//     real start check: without a drain the check refuses, as it does
//     without dynconfig; after the pre-start role of a drained node (or of
//     the node's own fallback) it passes.
//   - TestStateChangeReadsTheRealCheckpoints: without dynconfig's record,
//     the policy names in the checkpoints the real managers write still
//     make a policy change Drain.
//
// No cluster and no binaries: the managers run in the test process on a
// made-up machine (one socket, two cores of two threads, one NUMA node),
// with the kubelet's root dir a temporary directory.
package kubeletpin
