// Package kubeadm writes the files that carry a user's KubeletConfiguration
// into a kubeadm-built node: a patch for kubeadm's "kubeletconfiguration"
// patch target and the kubeadm configuration snippet that points kubeadm at
// the patches directory, as in the EKS Anywhere "Kubelet Configuration"
// design and the Cluster API documentation.
//
// kubeadm generates the kubelet's configuration file itself (its defaults:
// clusterDNS, staticPodPath, authentication and authorization, cgroupDriver,
// rotateCertificates...), then applies the files of the patches directory
// whose names start with the target, in lexical order, and writes the result
// to /var/lib/kubelet/config.yaml. So a patch holds only the fields to
// change, and kubeadm's defaults stay for the rest.
//
// # Guarantees
//
//   - File names follow kubeadm's rule target[suffix][+patchtype].yaml
//     (cmd/kubeadm/app/util/patches); no "+patchtype" means strategic, as in
//     kubeadm.
//   - The patch holds apiVersion and kind, then the fields to set with
//     sorted keys: equal inputs give equal bytes. Applied with strategic merge over
//     kubeadm's generated configuration (as kubeadm does, with the v1beta1
//     type as the schema) it gives kubeadm's configuration with those
//     fields set: maps and nested objects merged by key, lists replaced.
//   - An explicitly empty map or list (evictionHard: {}, clusterDNS: [],
//     or a non-nil empty map or slice for Render) is written as {} or [],
//     never left out: the kubelet reads evictionHard: {} as "no hard
//     eviction", while a patch without it would leave the kubelet its
//     default thresholds. Over kubeadm's generated configuration, which
//     sets none of the map fields and only clusterDNS among the lists, the
//     patched configuration has the empty map or list.
//   - RenderDocument writes every field its document sets, at any depth,
//     zero values included (maxPods: 0, rotateCertificates: false,
//     authentication.webhook.enabled: false, syncFrequency: 0s), so the
//     kubelet's configuration holds them over kubeadm's values; what the
//     kubelet makes of a zero is its own rule (it reads maxPods: 0 as its
//     default, 110, as it would in its own file). Tested for every
//     numeric, bool and duration field.
//   - A null map value or list element in RenderDocument's document is an
//     error naming its path (evictionHard[memory.available]), as in
//     package provision: dropped, {memory.available: null} would become
//     {}, which says "no hard eviction".
//   - Nothing here modifies its arguments; there is no state.
//
// # Not guaranteed
//
//   - No validation: validate the user's configuration first (package
//     provision). Render and RenderDocument only decode strictly.
//   - A patch cannot remove one of kubeadm's values without a null, and
//     neither function writes nulls: "not set" in the user's configuration
//     means "keep kubeadm's value".
//   - Maps merge by key, in a strategic and in a JSON merge patch alike, so
//     {} empties a map only where the configuration below does not fill
//     it: kubeadm's generated configuration does not, but a patch that
//     sorts before this one might.
//   - Render works from the typed struct, where a zero value is unset; use
//     RenderDocument to set a field to false, 0 or "".
//   - The snippet is a fragment of kubeadm's v1beta4 configuration, not a
//     complete configuration.
package kubeadm
