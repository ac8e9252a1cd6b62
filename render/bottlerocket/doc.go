// Package bottlerocket translates a user's KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) into Bottlerocket's settings.kubernetes
// TOML, the form in which Bottlerocket takes kubelet settings in user data.
//
// Bottlerocket has no kubelet configuration file of its own to hand over; it
// builds the kubelet's file from a fixed set of API settings. This package
// holds the mapping of the 31 KubeletConfiguration fields that have such a
// setting (see SupportedFields), as in the EKS Anywhere "Kubelet
// Configuration" design: translate what Bottlerocket supports, refuse the
// rest with an error that names every offending field.
//
// # Guarantees
//
//   - Render reads only the fields the user set (non-zero, non-empty) and
//     writes only those, so Bottlerocket keeps its own defaults for the rest.
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
//   - A zero in a non-pointer field (maxPods: 0, eventBurst: 0) cannot be told
//     from an unset field and is not rendered; neither are empty lists or
//     maps, except an explicitly empty evictionHard, which the kubelet reads
//     as "no hard eviction" and Bottlerocket cannot express, so it is an
//     error.
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
