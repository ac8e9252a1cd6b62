// Package lkg decides which configuration a component runs — its current
// remote config, its last-known-good (LKG) config, or its local config — and
// holds every rule of the lifecycle as a pure function: no clock, no I/O,
// no os import. The caller (the dynconfig Controller) reads the state dir,
// calls these, and writes what they decide.
//
// At startup and on every change, Decide reads an Input (the current and
// LKG pointers, current's bad mark, loaders for the two configs, the
// crash-loop verdicts computed by package crashloop) and returns a Decision:
// what to run, whether to mark current bad or reset LKG to local, and what
// went wrong, for the ConfigOK condition. It calls each loader at most once
// and only when the answer matters.
//
// While the component runs:
//
//   - Promotion: current becomes last-known-good only after this process
//     ran it for a full trial (uptime on that config, in one process) and,
//     when the component opted in, after MarkHealthy for that very config.
//     Time down, unreachable or on another config never counts, so nothing
//     is promoted at a startup. The verdict says what to wait for: a timer
//     while the trial runs, the health channel after it, never a busy loop.
//   - ConfirmDeadline (confirm or revert): with a confirmation deadline,
//     current on trial that is not confirmed healthy within it after its
//     first run is marked bad (Input.NotConfirmed, ProblemNotConfirmed)
//     and rolled back; the deadline counts on records that survive
//     restarts, and a clock stepped back re-anchors it (see confirm.go).
//   - NextAction: move to the decision's config by a reload or a restart,
//     and only when it is not the config already running.
//   - AfterReloadFailure: a config the component could not apply in process
//     is current's fault (mark it bad, reload the rollback target); a
//     rollback target that cannot be applied needs a restart.
//   - A live failure to read the assignment changes nothing (the caller
//     reports it as Unknown with the running config's message).
//
// The identity of a config is its ConfigMap's UID and resourceVersion and
// the payload key (Key, Same): an in-place edit, or another payload key of
// the same ConfigMap, is another config with its own trial and marks.
//
// What this package does not do: it does not read pointers, marks,
// checkpoints or startups (package checkpoint does), count startups
// (package crashloop does), or word the condition (package status does).
package lkg
