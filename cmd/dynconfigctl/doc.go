// Dynconfigctl is the operator's tool for a node's dynconfig state: it shows
// what a component's state dir holds, repairs it, and assigns a ConfigMap to a
// node.
//
//	dynconfigctl inspect DIR [--component-version V] [-o text|json] [--no-lock]
//	dynconfigctl forget-bad DIR UID/RV[/PAYLOADKEY] [--component-version V]
//	dynconfigctl reset DIR [--component-version V]
//	dynconfigctl assign --node N --configmap NS/NAME [--key K] [--kubeconfig PATH]
//	dynconfigctl assign --node N --clear [--kubeconfig PATH]
//
// Exit status: 0 on success, 1 on an error, 2 on a usage error (unknown
// command or flag, wrong number of arguments, malformed argument).
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
//     rules the component applies (source.Validate and source.Resolve).
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
//   - assign does not wait for the node to adopt the config; watch the node's
//     ConfigOK condition for that.
package main
