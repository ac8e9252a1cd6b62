// Package kubeletdropin brings dynconfig's whole lifecycle — checkpoint,
// trial, last-known-good, rollback on a decode or validation failure or a
// crash loop, ConfigOK — to the unmodified kubelet, through the drop-in
// directory it reads since Kubernetes 1.35 (--config-dir, KEP-3983).
// dynconfig owns exactly one file there (Files.Name); the node's base config
// (--config) and its other drop-ins stay the node's.
//
// Two roles of one program (cmd/dynconfig-kubelet) share one state dir
// (dynconfig.External documents how they share it):
//
//   - prestart, the systemd ExecStartPre= of kubelet.service, runs before
//     every start of the kubelet. It records the start (the crash-loop rule
//     counts the kubelet's starts), decides with lkg.Decide from the state
//     dir alone (no cluster access: a reboot with the API server down
//     decides the same way), validates the EFFECTIVE config — the node's
//     base config, its other drop-ins, and the candidate in the place the
//     kubelet will merge it, with the kubelet profile — and writes the
//     chosen config as dynconfig's drop-in (atomically and durably), or
//     removes it for the local config. PreStart (this package) bounds it in
//     time and never makes it the reason a kubelet does not start: on any
//     failure it leaves the drop-in as it was, except when the node's own
//     files are invalid, when it removes dynconfig's drop-in so that the
//     kubelet starts on the node's own config as it would without dynconfig.
//   - run follows the Node's assignment, checkpoints it, makes it current,
//     restarts the kubelet (systemd over D-Bus in production), promotes the
//     config once the kubelet has been healthy (Healthy: its /healthz; the
//     Node's Ready only holds it back when the API server answers that the
//     kubelet reported it False, never while the API server is out of
//     reach) for a trial and, when a ConfigRollout with health gates
//     assigned it, once the rollout passed the Node (PromotionHeld), and
//     reports ConfigOK and the ConfigStatus of component "kubelet"
//     (dynconfig.RunExternal).
//
// A change of class changeclass.Drain (cpuManagerPolicy and the other
// fields the kubelet checks against a state file at its start) is applied
// on a drained node (drain.go): before the restart the run role cordons
// the Node (with nodeapi.CordonAnnotation), evicts its pods through the
// Eviction API with k8s.io/kubectl/pkg/drain (PodDisruptionBudgets
// honoured, DaemonSet and mirror pods left) within RunOptions.Drain.Timeout,
// and marks the node drained (MarkDrained) for the pre-start role, which
// removes the state files; it uncordons the Node once the kubelet runs its
// last-known-good healthily. A drain that does not finish leaves the node
// on its config, uncordoned, and reports the config not applied here
// (nodeapi.PhaseNotApplied, no verdict on it); a change of class Refuse is
// refused without a restart, as a validation failure
// (dynconfig.External.BeforeRestart).
//
// A node drop-in that sorts after dynconfig's file wins over the assigned
// config for every field it sets, as in the kubelet; Build logs a warning
// naming each such field and the file that wins, and the run role records
// it as a Warning Event (status.EventReasonConfigOverridden) on the Node.
//
// Decoding follows the kubelet where the node's files are concerned: its
// base config and its other drop-ins are decoded leniently (an unknown field
// is ignored, as the kubelet ignores it), while the assigned config is
// decoded strictly: an unknown, duplicate or mistyped field in it is a
// decode failure that rolls back, where the kubelet would silently ignore
// it. Command-line flags of the kubelet override its config files; they are
// not seen here, so a flag that makes a valid config invalid is caught only
// as a crash loop.
package kubeletdropin
