// Dynconfigctl is the operator's tool for components that use dynconfig: it
// shows what a component's state dir holds and repairs it, validates and
// renders config files offline, assigns a ConfigMap to a node's component,
// and shows the fleet's configs.
//
//	dynconfigctl inspect DIR [--component-version V] [-o text|json] [--no-lock]
//	dynconfigctl forget-bad DIR UID/RV[/PAYLOADKEY] [--component-version V]
//	dynconfigctl reset DIR [--component-version V]
//	dynconfigctl validate FILE...
//	dynconfigctl render [--node N | --state-dir DIR] [--config F] [--config-dir D] [--instance F] [--set PATH=VALUE]... [--component C] [-o yaml|json]
//	dynconfigctl assign --node N --configmap [NS/]NAME [--key K] [--component C]
//	dynconfigctl assign --node N --clear [--component C]
//	dynconfigctl status [NODE...] [--selector L] [--component C] [-o wide|json|yaml] [--no-headers] [--known-bad]
//	dynconfigctl rollout start|status|list|get|delete|pause|resume|abort|undo|history ... (package rollout/cli)
//
// Installed as kubectl-dynconfig on the PATH it is the kubectl plugin
// `kubectl dynconfig`: the same commands and flags, and help, usage and
// errors say `kubectl dynconfig`. The rollout commands print as kubectl
// does (-o json|yaml|wide|name|jsonpath=|custom-columns=, -w follows a
// watch).
//
// The commands that talk to the API server (assign, status, render --node,
// rollout)
// take kubectl's client flags (--kubeconfig, --context, --namespace,
// --cluster, --user, --server, --token, --as, --request-timeout, ...)
// through k8s.io/cli-runtime's genericclioptions.ConfigFlags, with
// kubectl's loading rules; with no kubeconfig anywhere and no --server they
// fail rather than fall back to http://localhost:8080. The offline commands
// do not take them.
//
// Exit status of every command: 0 on success, 1 on an error, 2 on a usage
// error (unknown command or flag, wrong number of arguments, malformed
// argument). validate exits 1 when any file is invalid, status when a node
// carries an annotation it cannot decode (after printing every row).
//
// # What it guarantees
//
//   - It never writes a state dir without its lock. forget-bad and reset
//     open it with checkpoint.Open, which takes the lock; inspect takes it
//     shared with checkpoint.LockShared and writes nothing. All three refuse
//     to run while the component holds the lock, with an error that says so.
//     inspect --no-lock reads without the lock and writes nothing.
//   - It decodes no state file itself: inspect reads the whole state dir
//     with checkpoint.Inspect (checksums verified, no symbolic link followed,
//     no FIFO waited on), forget-bad and reset go through checkpoint.Store.
//   - Every write goes through the library's atomic, durable APIs
//     (checkpoint.Store.SetCurrent, SetLastKnownGood and ForgetBad): an
//     interrupted command leaves each file old or new, never half-written.
//   - forget-bad of current's mark clears current's first run (ForgetBad does
//     it before it removes the mark), so current gets a fresh trial and the
//     startups before the repair no longer count.
//   - It checks its input before touching anything: a missing dir, a dir that
//     is not a state dir (no checkpoints/, meta/ and tracking/), an unknown
//     component version, a malformed UID/RV or NS/NAME are reported and nothing
//     is created.
//   - A corrupt checkpoint, pointer, bad-config or startups file (garbage, a
//     bad checksum, empty, missing where it must exist, or a FIFO, a directory
//     or a symbolic link in its place) is reported by inspect, naming it, next
//     to the rest, never a reason to fail; so is damage to the directories of
//     the layout, and the quarantine is listed.
//   - inspect flags a dead end per component version: current is marked bad
//     and the startups since the mark exceed current's crash-loop threshold
//     within its trial (crashloop.CrashLooping from the mark's time, with
//     the trial of current's checkpoint annotations). It names forget-bad as
//     the repair only for a crash-loop mark.
//   - assign writes the Node annotation only after it has found the ConfigMap,
//     checked that it holds the payload key and that the assignment passes the
//     rules the component applies (nodeapi.Validate and source.Resolve).
//   - validate and render decode as the component does (package merge:
//     strict, case-sensitive field names, one document per file), with the
//     profile of components/kubelet or components/kubeproxy; validate
//     reports every error of every file, the validation errors of a file
//     with unknown fields too (decoded leniently for that).
//   - render writes nothing; with --state-dir it reads the state dir
//     without its lock through checkpoint.Inspect (checksums verified).
//   - status reads the assignment annotation as the Node source does
//     (strict; for the kubelet without one, the legacy spec.configSource)
//     and the status with nodeapi.ReadConfigStatus (a phase of a newer
//     component is shown as it is); a row it cannot decode
//     is shown as <invalid> and named in the error, never skipped.
//
// # What it does not do
//
//   - inspect --no-lock reads what a running component may change right
//     after: each file is seen whole (every write is a rename), but the
//     files are not read at one instant.
//   - inspect judges trials with the built-in defaults
//     (components.DefaultTrial) for a config without trial annotations: a
//     component configured with other defaults is not known to it. Whether
//     a config was promoted needs a full trial of uptime in one process,
//     which the state dir does not record: inspect shows the trial's end
//     and the pointers, not the running process.
//   - inspect and the repair commands hold the lock while they run (a fraction
//     of a second): a component that starts in that moment fails to take the
//     lock and is restarted by its supervisor.
//   - reset does not change the node's assignment: a component that still has
//     a ConfigMap assigned adopts it again. Clear it with assign --clear.
//     reset leaves bad marks and checkpoints in place; the component's garbage
//     collection removes checkpoints no pointer references.
//   - assign does not wait for the node to adopt the config; watch
//     'dynconfigctl status' (ASSIGNED shows "(pending)" until the component
//     reports it) or the node's condition for that.
//   - validate, render and assign know the kubelet and kube-proxy profiles
//     only; a third-party component's config is checked by its own binary,
//     and assign --component for it needs --key.
//   - status shows what components report; a component that is down
//     reports nothing new, and its row stays as it last was (compare the
//     condition's lastHeartbeatTime in -o json).
package main
