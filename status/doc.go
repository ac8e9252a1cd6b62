// Package status builds the ConfigOK NodeCondition that tells an operator
// which config a node runs and why.
//
// The wording follows the Dynamic Kubelet Configuration proposal: the
// message is the effect (which config is in use) and the reason is the cause.
// Status is True when the current config is in use and OK, False when the
// current config is known to be bad and the last-known-good config is in use,
// and Unknown when the desired config could not be determined.
//
// ConfigOK applies the heartbeat rules: lastHeartbeatTime moves on every
// report, lastTransitionTime only when status, reason or message change.
//
// This package is pure: it does not talk to the API server and has no clock;
// times are arguments.
//
// The reporters are the package's I/O edge; the rest above stays pure.
// NodeReporter reads the Node and sends a strategic merge patch of the
// status subresource holding only the ConfigOK condition, so the kubelet's
// conditions are never overwritten; it retries conflicts and transient API
// errors within a bounded backoff and the caller's context, and it does not
// retry a missing Node (report again later). EventReporter records
// ConfigChanged and ConfigRolledBack Events on the Node, best effort: one
// Create per call, no aggregation or rate limiting. Metrics registers info
// gauges (assigned, active, last-known-good config; one series each) and
// error and rollback counters on a caller-given Registerer; a nil *Metrics
// does nothing. None of them imports another dynconfig package.
package status
