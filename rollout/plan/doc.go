// Package plan is the rollout controller's decision, a pure function: Plan
// takes a ConfigRollout (spec and the status written so far), the
// ConfigMap it names, the nodes it selects (their assignment and the status
// their component publishes), the other rollouts and the time, and returns
// the next status, the Node patches to make (assignments and reverts) and
// the Events to record. It does no I/O; package rollout/controller does.
//
// What it guarantees, for any input:
//   - a node is recorded in the status, with the assignment it had before
//     (NodeRecord.PreviousIndex into status.previousSources, where each
//     distinct source is stored once), in the same result that first asks to assign
//     it: the caller writes the status before the patches, so a revert
//     always knows what to put back;
//   - never more than maxUnavailable nodes are Assigning or in Trial at
//     once; a node gets at most one record, so it is assigned at most once;
//   - no assignment once the rollout is not Progressing (paused, halted,
//     completed, aborted, reverted) or conflicts with an active rollout;
//   - the failure count reaching maxFailures+1 halts the rollout in that
//     result, and with revertOnHalt every node it changed is Reverting;
//   - a ConfigMap whose UID or resourceVersion differs from the one the
//     rollout started with halts it (the reason names both versions);
//   - a rollout deleted while active reverts every node it changed, and
//     Finalized is false until they all carry their previous source again
//     (the controller holds Finalizer until then); one deleted after it
//     ended changes nothing;
//   - every patch is idempotent and asked again until the node is
//     observed to carry it, so a lost write or a new leader only repeats
//     the same value.
//
// What it does not do: it trusts its inputs to be fresh. The caller must
// give it nodes that include its own last writes (a mutation cache), and
// write the status with optimistic concurrency so that a result planned on
// an old status is dropped.
package plan
