// Package plan is the rollout controller's decision, a pure function: Plan
// takes a ConfigRollout (spec and the status written so far), the
// ConfigMap it names, the nodes it selects (their assignment and the status
// their component publishes), the other rollouts and the time, and returns
// the next status, the Node patches to make (assignments and reverts) and
// the Events to record. It does no I/O; package rollout/controller does.
//
// What it guarantees, for any input:
//   - a node's revert record is on the Node: the claim annotation
//     (nodeapi.ClaimAnnotationFor; nodeapi.Claim: the rollout's namespace,
//     name and uid, the assignment the node had before, when and at which
//     step it was assigned, and why it failed), written in the same patch
//     as the assignment, so a Node never carries the rollout's config
//     without what to put back; the status holds counts, at most
//     v1alpha1.MaxFailureRecords failures with their reasons and the steps
//     done, and does not grow with the fleet;
//   - every patch is made on the resourceVersion the node was read at, and
//     a node another controller claims (a rollout that is active or
//     reverting, or one out of Input.Scope) is never assigned over: it is
//     counted Blocked and the Conflict condition names the claimer;
//   - the per-node records an older controller kept in status.nodes
//     (previousIndex into previousSources, or the full previous source)
//     are written onto their Nodes as claims, and dropped only once the
//     Node is seen carrying the claim; until then they revert as before;
//   - never more than maxUnavailable nodes are in Trial at once; a node is
//     assigned at most once while it carries the claim;
//   - no assignment once the rollout is not Progressing (paused, halted,
//     completed, aborted, reverted);
//   - the failure count reaching maxFailures+1 halts the rollout in that
//     result, and with revertOnHalt every node it claims is put back;
//     a node it took over from an earlier rollout that ended (and still
//     exists) gets that rollout's claim back with its assignment
//     (nodeapi.Claim.PreviousClaim), so that an undo of it still puts the
//     node back;
//   - a status phase this version does not know (a newer agent's) is no
//     verdict: the node waits in Trial until its progress deadline;
//   - a node that reports nodeapi.PhaseNotApplied for the rollout's config
//     (it could not apply it here: its drain did not finish) is no verdict
//     either, but an answer: it is neither failed nor in trial, settles its
//     step, and is named by ConditionNotApplied and the messages
//     (notapplied.go);
//   - a ConfigMap whose UID or resourceVersion differs from the one the
//     rollout started with halts it (the reason names both versions);
//   - a rollout deleted while active reverts every node it changed; one
//     deleted after it ended changes no node (its claims stay, stale once
//     it is gone, and any rollout may take those nodes over);
//     Result.Finalized is false while it is active or a node it reverts
//     still carries its claim (the controller holds Finalizer until then);
//   - with spec.analysis, a held node whose health gate failed
//     (Node.Analysis, which the caller observes) fails like any other; a
//     promoted node stays in Trial (against maxUnavailable, holding the
//     step) until its soak is over and a passing verdict taken after it is
//     in; that pass is written into its claim (nodeapi.Claim.Passed) and
//     is final, as a failure is: the node counts as promoted in every
//     later plan without a verdict (the caller watches it no more);
//     Result.Watch names the nodes whose gates the caller is to run
//     (gates.go);
//   - every patch is idempotent and asked again until the node is
//     observed to carry it, so a lost write or a new leader only repeats
//     the same value;
//   - a rollout starts on an immutable ConfigMap only (ConfigMap.Immutable;
//     Pending, Refused ConfigMapMutable, with the command that makes it
//     so): nobody can edit the config under an active rollout, rather than
//     an edit being detected once a node may already run it (the edit
//     detection above stays, for a metadata edit or a replaced object);
//   - a ConfigMap the fleet knows bad is refused (Pending, Refused
//     KnownBad) unless spec.allowKnownBad: one a ConfigRollout among Others
//     halted on (HaltMarksBad: any halt but ConfigMapChanged and
//     InvalidSpec), or that Input.KnownBadNodes nodes report bad in
//     Input.BadReports (BadReportOf: RolledBack or DeadEnd about it), the
//     same config being the same UID and resourceVersion, or the same UID
//     of an immutable ConfigMap (SameConfig). The refusal names the halted
//     rollouts and the nodes. What is known comes in the Input; deleting
//     the halted rollout forgets its halt (the nodes' reports stay while
//     they say so). Once started, a rollout is not stopped by what the
//     fleet learns later: its own failures halt it;
//   - a selected node whose Node carries no status of the component at
//     all (no nodeapi.StatusAnnotationFor annotation; an unreadable one
//     counts as present) does not run it: it is skipped, not assigned (an
//     assignment would wait for a status that never comes and hold a slot
//     of maxUnavailable until the progress deadline failed it), not
//     counted as failed, and not counted in the steps' targets (a 100%
//     step is done once every node that runs the component runs the
//     config). status.notRunning counts them at once and the
//     ComponentNotRunning condition names a few; a node whose component
//     starts later joins the rollout then. When no selected node runs the
//     component (a misspelt spec.component, a wrong selector), the rollout
//     does not start: Pending, Refused ComponentNotRunning, saying which
//     annotation is missing. A selector that matches no node at all is
//     not refused: there is nothing to do, and it completes;
//   - outside spec.windows no node is assigned: the rollout is Paused,
//     its message and status.nextWindow name the next window, and
//     RequeueAfter is when it opens; inside one it asks to be planned
//     again when it closes. Nodes in trial are still followed, a failure
//     still halts, reverts still happen, a pause step's time still runs:
//     only new assignments wait (windows.go: wall-clock times of the
//     window's zone, days of that zone, and what a daylight saving change
//     does).
//
// What it does not do: it trusts its inputs to be fresh. The caller must
// give it nodes that include its own last writes (a mutation cache), make
// the patches with their ResourceVersion precondition, and write the status
// with optimistic concurrency so that a result planned on an old status is
// dropped. A failed node that is deleted stops counting (its record went
// with it).
package plan
