// Package realnode proves dynconfig's stock-kubelet integration
// (package kubeletdropin, cmd/dynconfig-kubelet) on a real node on this
// machine: the real kube-apiserver and etcd (package cluster), a containerd
// of the test's own (own socket, root and state; Debian's containerd, runc
// and CNI plugins), the UNMODIFIED upstream kubelet built from
// k8s.io/kubernetes/cmd/kubelet into bin/kubelet by test/hack/ensure-bins.sh,
// and pods from images built by the test (one layer holding busybox-static,
// imported with ctr, imagePullPolicy Never; the sandbox image too).
//
// TestStockKubelet has a small supervisor play systemd's kubelet.service
// with the drop-in of deploy/kubelet: ExecStartPre=dynconfig-kubelet
// prestart, then the kubelet, Restart=always with a RestartSec. The run
// role is the dynconfig-kubelet binary too, on the node's own credentials,
// restarting the kubelet through --restart-command (the supervisor's
// stop-the-kubelet signal). TestStockKubeletUnderSystemd runs real systemd
// instead (PID 1 here is not systemd: it boots one as PID 1 of new PID,
// mount and UTS namespaces) with the unit files of deploy/kubelet as
// systemd reads them, and the run role restarts the kubelet over systemd's
// D-Bus API.
//
// The config the kubelet refuses at start (the crash loops) is a reserved
// CPU no machine has, refused on cgroup v1 and v2 hosts alike.
//
// The drain-class change of issue 31 is cpuManagerPolicy none -> static
// (CPU 0 reserved: the static policy needs a reservation, so the tests skip
// on a one-CPU machine). Through the path before issue 31 (in place, no
// drain) the kubelet refused every start with upstream's "configured policy
// "static" differs from state checkpoint policy "none"" and the pre-start
// role rolled back. TestStockKubeletDrainClassAssigned assigns it to a node:
// refused by the drain while a pod no controller owns runs there (not
// applied here: no restart, uncordoned, ConfigOK says why), applied without
// it (cpu_manager_state reset), and back. TestStockKubeletDrainClassRollout
// applies it by ConfigRollouts with the upstream control plane running
// (cluster.Options.ControlPlane), PodDisruptionBudget-guarded pods on the
// node and hollow kubelets for the evicted pods to land on: cordon, evict,
// state reset, trial, promotion, uncordon, there and back, with watchers of
// the budgets that must record no moment below a minimum.
//
// The tests skip, saying why, when they cannot run: not root, or
// containerd, runc, the CNI plugins, busybox-static, bin/kubelet, or for
// the systemd test systemd, unshare, nsenter or overlayfs missing (.ci/run
// installs the packages; ensure-bins.sh builds the kubelet); in CI
// (DYNCONFIG_CI=1) they fail instead (internal/testenv). They
// undo their host side effects where they can: mounts under their temporary
// directories, containerd's shims, the CNI bridge, the kubepods cgroups,
// systemd's namespaces and the cgroups it made.
package realnode
