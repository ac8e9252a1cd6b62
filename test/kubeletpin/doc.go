// Package kubeletpin pins the kubelet change classes of
// components/kubelet/changeclass to the kubelet's own code in
// k8s.io/kubernetes v1.37.0, so that an upstream change breaks a test here
// instead of a node:
//
//   - TestTablePinned: every Path of changeclass.Table is a JSON field of
//     KubeletConfiguration; every state file it names is the constant a
//     kubelet manager passes to its checkpoint; every upstream source it
//     names (file and function, method or field, and the quotation) is in
//     the module.
//   - TestPolicyMismatchRefused: the real checkpoint code of the CPU and
//     memory managers refuses a policy other than the checkpoint's with the
//     message changeclass quotes.
//   - TestCompareAgainstTheManagers: changeclass.Compare against the real
//     CPU and memory managers started on a checkpoint an earlier start left,
//     drained and with every allocatable CPU held by a container: whenever
//     a manager refuses, Compare says Drain; where the package doc says it
//     is exact, it says Drain only then; and after the state files Compare
//     names are removed, the manager starts.
//   - TestPreStartLetsTheKubeletStart: kubeletdropin.PreStart on a
//     cpuManagerPolicy none -> static change and back, with the CPU manager's
//     real start check: without a drain the check refuses, as it does
//     without dynconfig; after the pre-start role of a drained node (or of
//     the node's own fallback) it passes.
//
// No cluster and no binaries: the managers run in the test process on a
// made-up machine (one socket, two cores of two threads, one NUMA node),
// with the kubelet's root dir a temporary directory.
package kubeletpin
