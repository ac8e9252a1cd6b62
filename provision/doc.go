// Package provision validates the KubeletConfiguration a user supplies to a
// provisioning tool, under the tool's own say over kubelet settings, after
// the EKS Anywhere "Kubelet Configuration" design.
//
// A tool takes the user's kubelet settings as a document (a file, or an
// unstructured map from its cluster spec), validates them with a Validator,
// and hands the Result to a renderer (render/kubeadm, render/bottlerocket).
// The tool's Policy says which fields it owns:
//
//   - blocked fields, which the user may not set (the platform sets them:
//     readOnlyPort, authentication.anonymous.enabled, providerID...);
//   - fields the platform has a value for, with a rule per field for when
//     the user sets them too: the platform's value wins, the user's wins, or
//     setting both is an error (merge.PlatformWins, UserWins, ErrorIfBoth);
//   - node labels, which are the kubelet flag --node-labels and not a
//     configuration field, with the same rules key by key (NodeLabelPolicy).
//
// EKSAProposedPolicy and EKSAAlternatePolicy build the design's two
// solutions; EKSAManagedFields lists what EKS Anywhere sets per provider.
//
// # Guarantees
//
//   - apiVersion and kind are required; unknown and duplicate keys and values
//     of the wrong type are reported all at once, each with the document name
//     and its field path (package merge's strict decoding).
//   - The configuration is then defaulted and validated with the kubelet
//     profile (components/kubelet); the defaulted copy is used only for that.
//     Result.Config and Result.Document hold what the user and the platform
//     set, nothing the defaults filled in.
//   - Neither the caller's bytes nor the caller's map is modified, and
//     nothing returned shares memory with them.
//   - A Validator holds only read-only data and may be shared by goroutines.
//
// # Not guaranteed
//
//   - Policy violations are checked only in a document that decodes: a
//     document with decode problems reports those first.
//   - The validation is the kubelet's, over the kubelet's defaults, not over
//     a provisioner's (kubeadm fills in other values, such as clusterDNS).
//     What passes here can still be refused where it depends on the host.
//   - Keys of maps (evictionHard signals, featureGates names) are free-form
//     to the decoder; the profile's validation checks the ones it knows.
//   - The EKS Anywhere facts (which fields it sets, and their values) are
//     taken from its design document and templates at the time of writing;
//     a tool with other values passes its own ManagedField list.
package provision
