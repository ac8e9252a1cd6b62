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
//   - A user's invalid value is an error under every policy, also in a
//     field whose value the platform replaces (PlatformWins, the alternate
//     solution's managed fields): a document that sets such a field is
//     first validated with its own values standing (the platform's values
//     fill in only what it leaves unset), and each error about a value the
//     platform would replace names the document and the field path and
//     ends "; the user's value must be valid even though the platform's
//     replaces it (owner: ...)". A valid value the platform replaces is a
//     warning, as before.
//     Result.Config and Result.Document hold what the user and the platform
//     set, nothing the defaults filled in.
//   - Result.User and Result.UserDocument hold the user's own fields only:
//     a field whose value came from the platform is left out, and so is a
//     map or object that only held platform values (a platform
//     featureGates[X] leaves no empty featureGates behind).
//   - Neither the caller's bytes nor the caller's map is modified, and
//     nothing returned shares memory with them.
//   - A Validator holds only read-only data and may be shared by goroutines.
//
// # Explicit empty maps and lists, and null
//
// A map or list set to empty is set, to nothing: the kubelet reads
// evictionHard: {} as "no hard eviction" and clusterDNS: [] as "no cluster
// DNS", and leaving either out means something else (the kubelet's default
// thresholds; kubeadm's DNS address). So an explicit empty the user wrote
// is in Document and UserDocument as {} or [], and in Config and User as a
// non-nil empty map or slice; the defaulted copy that is validated keeps
// it (defaults fill only unset fields, so the thresholds do not come back,
// unless mergeDefaultEvictionSettings: true asks the kubelet to add its
// default signals to the ones set);
// the renderers write it or refuse it with an error naming the field
// (render/kubeadm, render/bottlerocket). A platform's value may be an
// explicit empty too (Field.Value map[string]string{}).
//
// null as a field's whole value (evictionHard: null) means "not set", as in
// every Kubernetes decoder. null as a map value or a list element
// (evictionHard: {memory.available: null}, clusterDNS: [null]) is an error
// naming the document and the path, evictionHard[memory.available], because
// no reading of it is shared by the programs that would read it: the
// kubelet decoding its file gives the entry its zero value ("", which it
// refuses as a threshold, or false, which turns a feature gate off); in a
// kubelet drop-in, a JSON merge patch, it deletes the key from the layer
// below; package merge, reading a complete document, drops it, which would
// turn the example into evictionHard: {}, no hard eviction at all, likely
// the opposite of what was meant. Removing the key, or writing {} for an
// empty map, says either meaning without doubt. These errors are decode
// problems (*merge.DecodeError, reported with the document's other decode
// problems, sorted by key within each map), and NewValidator refuses the
// same nulls in a Policy's values.
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
