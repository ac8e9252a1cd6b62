// Package controller runs ConfigRollouts: the I/O around rollout/plan. It
// watches ConfigRollouts (through a dynamic client), Nodes and ConfigMaps
// with client-go informers, queues the rollouts to plan on every relevant
// change, and for each plan writes the status first (an update with the
// rollout's resourceVersion), then the Node annotation patches, then the
// Events; it exports Prometheus metrics and, when configured, runs only
// while it holds a Lease.
//
// What it guarantees:
//   - a Node is patched only after the status that records it (and its
//     previous source) is stored; a plan made on an old status is dropped
//     (the update conflicts) and planned again;
//   - its own patches are seen by the next plan (a mutation cache over the
//     Node informer), so a slow watch does not make it patch twice;
//   - with leader election, informers start only once the Lease is held,
//     so a new leader plans on a fresh list and the records its
//     predecessor stored; on shutdown the workers stop before the Lease is
//     released;
//   - while nodes depend on a rollout's records (plan.Finalized is false)
//     the rollout holds plan.Finalizer, added before the status that needs
//     it is written: deleting it reverts them before the object goes;
//   - the only requests per node are the assignment patch and, when
//     needed, the revert patch; nodes, rollouts and ConfigMaps are read
//     from informers.
//
// What it does not do: it does not validate more than the API server's
// schema does (the planner refuses what it cannot run), it does not
// garbage-collect anything, and it keeps ConfigMap data out of memory (only
// the keys are cached).
package controller
