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
package status
