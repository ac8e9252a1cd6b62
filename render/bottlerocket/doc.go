// Package bottlerocket translates a user's KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) into Bottlerocket's settings.kubernetes
// TOML, the form in which Bottlerocket takes kubelet settings in user data.
//
// Bottlerocket has no kubelet configuration file of its own to hand over; it
// builds the kubelet's file from a fixed set of API settings. This package
// holds the mapping of the 32 KubeletConfiguration fields that have such a
// setting (see SupportedFields), as in the EKS Anywhere "Kubelet
// Configuration" design ("Bottlerocket only supports configuration of 32
// fields"): translate what Bottlerocket supports, refuse the rest with an
// error that names every offending field. The 32 are the settings whose
// Bottlerocket documentation names a KubeletConfiguration field; the list
// in EKS Anywhere's user documentation has 31 of them, leaving out
// serverTLSBootstrap (settings.kubernetes.server-tls-bootstrap), which
// Bottlerocket turns on by default, so a user's serverTLSBootstrap: false
// must reach it.
//
// Render takes a typed configuration, where a field at its zero value is
// unset; RenderDocument takes the user's document (such as
// provision.Result.UserDocument), where a field written with its zero value
// is set, and is what a provisioning tool should call.
//
// # Guarantees
//
//   - Render reads only the fields the user set (non-zero; a map or list
//     counts when it is not nil) and writes only those, so Bottlerocket
//     keeps its own defaults for the rest.
//   - An explicitly empty map or list (non-nil, no entries: what
//     evictionHard: {} or clusterDNS: [] decode to) is never dropped
//     silently. Bottlerocket cannot say "empty" other than by leaving the
//     setting out: its kubelet configuration template writes a map or list
//     only when the setting has entries. So where the kubelet reads the
//     empty value as it reads the field's absence (FieldMapping.EmptyIsUnset:
//     allowedUnsafeSysctls, cpuManagerPolicyOptions, evictionSoft,
//     evictionSoftGracePeriod, systemReserved) nothing is written, with the
//     same result on the node; every other mapped field is an
//     *InvalidValueError that says what Bottlerocket would do instead:
//     evictionHard: {} ("no hard eviction"; unset, the kubelet's default
//     thresholds apply), kubeReserved: {} (Bottlerocket always reserves
//     cpu, memory and ephemeral-storage), clusterDNS: [] (unset, the
//     platform fills in the cluster's DNS address). An explicitly empty
//     field without a Bottlerocket setting (tlsCipherSuites: [],
//     featureGates: {}) is reported as unsupported, as any set field is.
//   - A field the document sets to its zero value is never dropped
//     (RenderDocument). It is rendered with the zero where the kubelet gets
//     it from Bottlerocket: false for cpuCFSQuota and serverTLSBootstrap
//     (Bottlerocket's defaults are true); 0 for the counts, QPS and
//     percentages (for eventBurst, kubeAPIBurst and registryBurst the
//     kubelet reads 0 as its default, as it would from a kubeadm patch;
//     Bottlerocket leaves evictionMaxPodGracePeriod: 0 out, which is the
//     kubelet's 0 too); "0s" for durations (the kubelet reads a zero
//     cpuManagerReconcilePeriod as its 10s). It is an *InvalidValueError
//     where Bottlerocket cannot take it: maxPods: 0 (the kubelet replaces
//     it with 110, and Bottlerocket sizes its kube-reserved memory from
//     max-pods, reserving none for 0), and "" for every string setting
//     (clusterDomain, containerLogMaxSize, providerID and the manager
//     policies and scope: Bottlerocket's types have no empty value; the
//     error says what the kubelet reads "" as). A field without a setting
//     written with its zero value (readOnlyPort: 0, serializeImagePulls:
//     false) is reported as unsupported.
//   - Every set field without a Bottlerocket setting is reported, all in one
//     *UnsupportedFieldsError, by its JSON name. Every value Bottlerocket's
//     API would refuse (an eviction signal or reserved resource it does not
//     know, a percentage out of range, a negative duration or count, a value
//     that is not an IP address, quantity or duration, a control character)
//     is reported as an *InvalidValueError naming the field path. All
//     problems come back from one call.
//   - The output is deterministic: keys sorted within each table, map
//     settings as sorted subtables after the scalar keys. Strings are TOML
//     basic strings with every character TOML requires escaped.
//   - Values keep the user's spelling when Bottlerocket accepts it; otherwise
//     an equal value is respelled (a quantity in canonical form, a duration
//     below one millisecond as a fraction of "ms") or the value is an error.
//   - Render does not modify its argument and has no state; it is safe for
//     concurrent use.
//
// # Not guaranteed
//
//   - Render does not run the kubelet's validation: a configuration that the
//     kubelet would refuse (say imageGCLowThresholdPercent above the high
//     one) renders if each value fits its Bottlerocket setting. Validate with
//     components/kubelet first.
//   - Render cannot tell a zero in a non-pointer field (maxPods: 0,
//     serverTLSBootstrap: false) from an unset field and renders neither;
//     use RenderDocument.
//   - server-tls-bootstrap has no effect where the node is also given
//     settings.kubernetes.server-certificate and server-key (Bottlerocket
//     then configures the kubelet's serving certificate instead); those are
//     not KubeletConfiguration fields and are not produced here.
//   - The mapping targets the settings Bottlerocket has documented since
//     release 1.14 (before 1.14 the image GC percentages had to be strings).
//     Settings added in later releases (container-log-max-workers,
//     image-maximum-gc-age, reserved-cpus, topology-manager-policy-options,
//     memory-manager-reserved-memory, more cpu-manager-policy-options, ...)
//     are not mapped, so those kubelet fields are reported as unsupported.
//     cpuManagerPolicyOptions accepts only full-pcpus-only, the one option
//     every such release accepts.
//   - Settings outside settings.kubernetes, and kubelet flags such as node
//     labels, are not produced here.
//
// # Sources
//
// What Bottlerocket writes into the kubelet's configuration for each setting,
// set or unset (the kubelet-config template of the kubernetes-1.x packages):
// https://github.com/bottlerocket-os/bottlerocket-core-kit/tree/develop/packages.
// Setting names and meanings:
// https://bottlerocket.dev/en/os/1.20.x/api/settings/kubernetes/ (the site's
// data file: https://github.com/bottlerocket-os/bottlerocket-project-website/blob/develop/data/settings/1.14.x/kubernetes.toml).
// Value types (integers, durations, quantities, thresholds, eviction and
// reserved-resource keys, enumerations):
// https://github.com/bottlerocket-os/bottlerocket-settings-sdk/blob/develop/bottlerocket-settings-models/settings-extensions/kubernetes/src/lib.rs,
// https://github.com/bottlerocket-os/bottlerocket-settings-sdk/blob/develop/bottlerocket-settings-models/modeled-types/src/kubernetes.rs
// and
// https://github.com/bottlerocket-os/bottlerocket-settings-sdk/blob/develop/bottlerocket-settings-models/modeled-types/src/shared.rs.
// TOML: https://toml.io/en/v1.0.0.
package bottlerocket
