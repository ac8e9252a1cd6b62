// Package controller runs ConfigRollouts: the I/O around rollout/plan. It
// watches ConfigRollouts (through a dynamic client), Nodes and ConfigMaps
// with client-go informers, queues the rollouts to plan on every relevant
// change, and for each plan writes the status first (an update with the
// rollout's resourceVersion), then the Node annotation patches, then the
// Events; it exports Prometheus metrics and, when configured, runs only
// while it holds a Lease.
//
// What it guarantees:
//   - a Node's assignment and its revert record (the rollout's claim,
//     package plan) are one merge patch, made on the Node's
//     resourceVersion: a Node another controller claimed since it was read
//     conflicts and is planned again; the status is written before the
//     patches, and a plan made on an old status is dropped (the update
//     conflicts) and planned again;
//   - its own patches are seen by the next plan (a mutation cache over the
//     Node informer), so a slow watch does not make it patch twice;
//   - with leader election, informers start only once the Lease is held,
//     so a new leader plans on a fresh list and the records its
//     predecessor stored; on shutdown the workers stop before the Lease is
//     released;
//   - while a rollout is active or puts nodes back (plan.Result.Finalized
//     is false) it holds plan.Finalizer, added before the status that
//     needs it is written: deleting it reverts them before the object
//     goes; a rollout that ended drops it, and its deletion makes no
//     request (its claims stay, stale, until a rollout takes the nodes);
//   - a Node event plans only the rollouts that select the Node (before or
//     after the event), whose claim it carries, or whose older records
//     name it;
//   - the only requests per node are the assignment patch and, when
//     needed, one to record its failure and one to revert it; nodes,
//     rollouts and ConfigMaps are read from informers;
//   - the health gates of spec.analysis (analysis.go) run only on the
//     nodes a plan watches (in trial or soak): their Node conditions from
//     the informer at each plan, their pods listed by spec.nodeName
//     (rate-limited; the baseline before the assignment patch), Prometheus
//     and webhook checks over HTTP with timeouts, an error inconclusive
//     until consecutiveErrorLimit. What must survive a new leader is in
//     the claim (nodeapi.GateMemory): the pod baseline, in the assignment
//     patch, and the soak start of a node that promotes outright (one
//     claim-only patch); the last verdicts and error counts are in memory.
//
// What it does not do: it does not validate more than the API server's
// schema does (the planner refuses what it cannot run), it does not
// garbage-collect anything, and it keeps ConfigMap data out of memory (only
// the keys are cached).
package controller
