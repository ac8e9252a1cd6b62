// Package merge turns a component's configuration layers into one validated
// configuration object: strict decoding, the kubelet's drop-in directory, the
// instance-specific file of the KEP "Instance-Specific ComponentConfig",
// command-line flags, and a platform's field policy.
//
// # Layers
//
// Lowest precedence first:
//
//	defaults < base < drop-ins < instance < platform values < flags
//
// Each layer in turn:
//
//   - Base is a complete document (Layers.Base): the init file or the remote
//     config, which replaces it, so there is only ever one.
//   - Drop-ins (Layers.DropIns, read by Pipeline.ReadDropIns with the
//     kubelet's --config-dir rules: *.conf, lexical order) are JSON merge
//     patches (RFC 7386): objects and maps merge by key, lists are replaced,
//     null deletes, the later file wins.
//   - The instance document (Layers.Instance) is a strategic merge patch
//     driven by the configuration type: maps merge by key, lists are
//     replaced unless the field has patchStrategy:"merge", null deletes,
//     "$patch: replace" and "$patch: delete" work. It must have the same
//     apiVersion and kind as the base, as the KEP requires.
//   - Platform values (Policy.Platform) apply with their Rule; locked fields
//     (Policy.Locked) may not be set by any document.
//   - Flags (Layers.Flags, see Pipeline.FlagOverrides) override everything.
//
// Without drop-ins, defaults are applied once, to the merged object, and
// validation runs after defaulting. For a defaulter that only fills unset
// fields this is the same as defaults being the lowest layer.
//
// With drop-ins, the order is the kubelet's --config-dir order
// (cmd/kubelet/app loadConfigFile and mergeKubeletConfigurations): the base
// is decoded, defaulted with Profile.Default and encoded again by
// encoding/json's rules (built as a tree straight from the Go value, with
// encoding/json itself for what that does not reproduce exactly); the
// drop-ins merge into that; then the instance, platform
// values and flags apply as above; and the result is defaulted again, with
// DropInDefaulter.DefaultDropInMerge when the profile has it (the kubelet's
// does: its v1beta1 defaults only) and Default otherwise. As with the
// kubelet:
//
//   - a drop-in that sets one key of a defaulted map keeps the other default
//     keys (one evictionHard signal keeps the default disk signals);
//   - a default the base decided stays decided (a drop-in setting
//     nodeStatusUpdateFrequency does not move the nodeStatusReportFrequency
//     the base defaulted);
//   - null in a drop-in deletes the field, and the second defaulting decides
//     whether a default comes back (for the kubelet, evictionHard does not:
//     no hard eviction thresholds);
//   - an empty map or list in the base (evictionHard: {},
//     enforceNodeAllocatable: []) is left out by the encoding, so after a
//     drop-in merge it counts as unset (enforceNodeAllocatable gets its
//     default back).
//
// Without a base, the drop-ins merge into the defaults of an empty document
// (the kubelet without --config starts from its command-line defaults
// instead, which differ in a few fields).
//
// # Decoding
//
// Each document is parsed once (YAML 1.1 with sigs.k8s.io/yaml's semantics,
// or JSON) into a tree that is checked against the Go type: unknown fields,
// duplicate fields, values of the wrong type, out-of-range numbers and values
// a custom decoder rejects (a duration "10x") are all reported at once, each
// with the document name and the field path, for example
//
//	kubelet.yaml: authentication.x509: unknown field "clientCAFle"
//	kubelet.yaml: port: expected int32, got string "ten"
//
// Field names are matched case-sensitively, as Kubernetes decoders do. apiVersion and
// kind must be the profile's. In a complete document null means "not set",
// and so it does, in every layer, inside an element of a list that the
// merges replace as a whole (reservedMemory: [{limits: {cpu: null}}] sets
// no cpu limit), as jsonpatch.MergePatch prunes such nulls.
// Options.Lenient decodes documents with unknown or duplicate fields anyway
// and returns what it ignored as warnings. The trees are merged without being
// serialized and converted to the Go type once, at the end, with
// encoding/json's rules.
//
// The block-style YAML configuration files are written in, and JSON without
// string escapes, are read by fast paths straight into the tree (yaml.v2's
// scalar resolution, JSON's grammar); everything else, and every document
// with a problem, by go.yaml.in/yaml/v2 and encoding/json, so results and
// messages are theirs. Tests and fuzz targets compare the two ways
// (TestYAMLFastPath, TestJSONFastPath). A merge of five realistic kubelet
// layers makes fewer than 400 allocations; TestPipelineAllocations fails when
// that grows past its budget.
//
// What strict decoding cannot catch: keys of Go maps are free-form. The
// kubelet's evictionHard is a map[string]string, so a misspelt signal
// ("memory.avaliable") is a valid key to the decoder; it is the profile's
// validation that must reject it. Likewise values of string fields are not
// checked against enums here.
//
// # Guarantees
//
//   - Merge does no I/O and is safe for concurrent use; only ReadDropIns
//     and ReadFile touch the file system.
//   - ReadFile is the one reader of local config paths (dynconfig's
//     NewLayers, kubeletdropin, dynconfigctl): what is not a regular file (a
//     FIFO, a device such as /dev/zero, a directory) is refused before any
//     read, never waited on, and a document larger than MaxDocumentSize is
//     refused, each with an error naming the file. ReadDropIns reads every
//     drop-in with it, and refuses a drop-in "directory" that is not one.
//   - The result equals, after decoding into the typed struct, what
//     jsonpatch.MergePatch would produce for the drop-ins applied to the
//     encoded defaulted base (test/conformance compares the kubelet profile
//     with the kubelet's own merge) and what
//     strategicpatch.StrategicMergePatch would produce for the instance,
//     except for the differences listed below.
//   - Every error names the document (or flag) and the field path.
//
// # Differences from strategicpatch
//
// The instance layer departs from strategicpatch.StrategicMergePatch (the
// KEP's way of merging an instance file) only in these cases, each a fix
// where strategicpatch fails, drops what the user wrote, or lets the base
// decide what an instance value means. test/conformance
// (TestKubeletInstanceMerge) compares the two on generated KubeletConfiguration
// documents and fails on any difference this table does not list.
//
//	| difference                        | merge                                   | strategicpatch                                |
//	|-----------------------------------|-----------------------------------------|-----------------------------------------------|
//	| maps of lists                     | merge by key (staticPodURLHeader)       | fails: "data type is not struct"              |
//	| $patch: replace on an unset field | sets the field                          | drops the field                               |
//	| null in a $patch: replace object  | not set                                 | kept: a map key with an empty value           |
//	| null in a list element            | not set, as in a complete document      | kept as a value if the base has the list      |
//	| $patch: delete                    | removes the field                       | leaves {}: a pointer field set to zeros       |
//	| $patch in a list element          | error naming the element                | element dropped, or "$patch" kept as a field  |
//	| custom JSON decoding              | replaced as a whole                     | merged as an object                           |
//
// Where strategicpatch's result depends on the base (the last column of
// the null and "$patch" rows: what it keeps where the base has the list or
// the field), merge gives the instance's value one meaning whatever the base
// holds. The last row cannot arise with the kubelet's type, whose
// custom-decoded values (durations, quantities) are all JSON strings.
//
// # Not guaranteed
//
//   - The $retainKeys, $setElementOrder and $deleteFromPrimitiveList
//     directives, which tools generate and people do not write, are rejected.
//   - Multi-document YAML files are rejected, not merged by kind.
//   - Documents using YAML merge keys (<<) report duplicate keys with a line
//     number instead of a field path.
//   - Flags are not checked against the Policy (see Policy).
//   - Provenance records leaves: scalars, whole lists, map entries. A
//     defaulter that changes a value a layer set is not detected.
package merge
