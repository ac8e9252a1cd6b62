// Package dynconfig lets a Kubernetes component — a kubelet fork, a
// kube-proxy-like DaemonSet, any daemon with a ComponentConfig-style type —
// take its configuration from the cluster without ever bricking its node.
//
// It implements the Dynamic Kubelet Configuration proposal for any component:
// the configuration assigned to a node (a ConfigMap) is checkpointed on disk,
// tried, and promoted to last-known-good (LKG) after a trial period. A config
// that cannot be decoded or fails validation (a perfect signal), or that
// correlates with a crash loop during its trial (an imperfect signal), is
// marked bad and the component rolls back to its LKG, or to its local config.
// What happens is reported in a ConfigOK NodeCondition.
//
// The library is made of small packages that can be used alone:
//
//   - checkpoint: the on-disk store (checkpoints keyed by ConfigMap UID and
//     resourceVersion, the current and last-known-good pointers, atomic and
//     durable writes, a lock so one process owns a state dir, GC).
//   - crashloop: the startups file and the crash-loop verdict.
//   - lkg: the bad-config tracker and the pure decision of which config to run.
//   - status: the ConfigOK condition builder.
//   - merge: strict decoding with field paths and the layering of defaults,
//     shared or remote config, drop-ins, instance config and flags.
//   - components/kubelet and components/kubeproxy: profiles (defaults,
//     validation, payload key) for the built-in component config types.
//
// A component that runs in another process — the stock kubelet, configured
// through a drop-in file — gets the same lifecycle with Options.External: a
// pre-start role before each of its starts records the start, decides and
// hands the config over; a run role beside it (RunExternal) follows the
// assignment, restarts it and promotes. External documents how the two share
// the state dir (its lock, held per step and never while waiting); package
// kubeletdropin is that for the kubelet.
//
// On-disk layout of a state dir:
//
//	<dir>/lock                                          flock: one process per dir
//	<dir>/checkpoints/<uid>_<resourceVersion>           the whole ConfigMap, in a checksummed envelope
//	<dir>/meta/current                                  the NodeConfigSource in use (empty = local)
//	<dir>/meta/last-known-good                          the rollback target (empty = local)
//	<dir>/tracking/<componentVersion>/bad-configs.json  bad marks, keyed "<uid>/<rv>"
//	<dir>/tracking/<componentVersion>/startups.json     recent startup times
package dynconfig
