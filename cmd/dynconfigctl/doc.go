// Dynconfigctl is the operator's tool for a node's dynconfig state: it shows
// what a component's state dir holds, repairs it, and assigns a ConfigMap to a
// node.
//
//	dynconfigctl inspect DIR [--component-version V] [-o text|json] [--no-lock]
//	dynconfigctl forget-bad DIR UID/RV [--component-version V]
//	dynconfigctl reset DIR [--component-version V]
//	dynconfigctl assign --node N --configmap NS/NAME [--key K] [--kubeconfig PATH]
//	dynconfigctl assign --node N --clear [--kubeconfig PATH]
//
// Exit status: 0 on success, 1 on an error, 2 on a usage error (unknown
// command or flag, wrong number of arguments, malformed argument).
//
// # What it guarantees
//
//   - It never writes a state dir without its lock. inspect, forget-bad and
//     reset take the state-dir lock through package checkpoint, so they refuse
//     to run while the component holds it, with an error that says so.
//     inspect --no-lock reads without the lock and writes nothing.
//   - Every write goes through the library's atomic, durable APIs
//     (checkpoint.Store.SetCurrent and SetLastKnownGood, lkg.Tracker.Forget):
//     an interrupted command leaves each file old or new, never half-written.
//   - It checks its input before touching anything: a missing dir, a dir that
//     is not a state dir (no checkpoints/, meta/ and tracking/), an unknown
//     component version, a malformed UID/RV or NS/NAME are reported and nothing
//     is created.
//   - A corrupt checkpoint, pointer, bad-config or startups file is reported by
//     inspect next to the rest, never a reason to fail.
//   - assign writes the Node annotation only after it has found the ConfigMap,
//     checked that it holds the payload key and that the assignment passes the
//     rules the component applies (source.Validate and source.Resolve).
//
// # What it does not do
//
//   - inspect --no-lock shows the bad marks and the names and sizes of the
//     checkpoints only: package checkpoint exports no decoder for its pointer
//     and checkpoint files and package crashloop none for the startups file,
//     and their readers need the lock, so current, last-known-good and the
//     startups are not read and checkpoints are not verified.
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
