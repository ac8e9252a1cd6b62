// Command eksa-render turns a small EKS Anywhere-like cluster spec into the
// files that carry each node group's kubelet settings, or prints the
// validation errors a user would see:
//
//	go run ./examples/eksa-render --out /tmp/eksa examples/eksa-render/testdata/vsphere/cluster.yaml
//
// The spec has a control plane and worker node groups, each with an
// osFamily (ubuntu or bottlerocket), optional labels and an optional
// kubeletConfiguration (an upstream KubeletConfiguration, as in the design's
// proposed solution), plus the provider (datacenterRef.kind) and the
// cluster's resolvConf. Each group's kubeletConfiguration is validated with
// package provision under the design's proposed or alternate policy
// (--policy), for the fields the provider makes EKS Anywhere set. Then, into
// --out/<group>/ (the control plane's group is "control-plane"):
//
//   - ubuntu: patches/kubeletconfiguration.yaml, the kubeadm patch of the
//     user's and the platform's settings, and kubeadm-config.yaml, the
//     InitConfiguration (control plane only), JoinConfiguration and
//     UpgradeConfiguration fragments pointing kubeadm at
//     /etc/kubernetes/patches and passing the labels as --node-labels;
//   - bottlerocket: settings.toml, Bottlerocket's settings.kubernetes for
//     the user's settings plus the node-labels table.
//
// An explicitly empty map or list in a kubeletConfiguration (evictionHard:
// {}, "no hard eviction") is carried as written into the kubeadm patch; a
// bottlerocket group refuses the ones Bottlerocket cannot express
// (evictionHard: {}, kubeReserved: {}, clusterDNS: [], or any field it has
// no setting for). A zero value written on purpose (serverTLSBootstrap:
// false, eventBurst: 0) is carried into the kubeadm patch and into
// settings.toml, or a bottlerocket group refuses it with an error naming
// the field (maxPods: 0, clusterDomain: ""). A null map value or list
// element (evictionHard: {memory.available: null}) is an error naming its
// path.
//
// On any problem, in any group, nothing is written: every error is printed
// to stderr, one per line, and the exit code is 1. Warnings (a user value
// the platform replaced) go to stderr too. The exit code is 2 for bad
// command-line usage, which is reported with a pointer to --help (a cobra
// command, like every binary of the project: --out, --policy, --allow,
// --error-if-both take two dashes).
//
// What it does not do: read a real EKS Anywhere spec (the decoder is strict
// and knows only the fields above), or carry the platform's own kubelet
// values into Bottlerocket settings (Bottlerocket has no setting for most of
// them: the TLS cipher suites, the anonymous-auth and read-only-port
// settings).
package main
