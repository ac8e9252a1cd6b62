// Package lkg decides which configuration a component runs — its current
// remote config, its last-known-good (LKG) config, or its local config — and
// remembers which configs are known to be bad.
//
// Decide is a pure function: it reads an Input (the current and LKG
// pointers, current's bad mark, loaders for the two configs, crash-loop
// verdicts and the trial status, all computed by the caller) and returns a
// Decision saying what to run, what to mark bad, whether to promote current
// to LKG or reset LKG to local, and what went wrong, for the ConfigOK
// condition. It has no clock and does no I/O beyond calling the loaders it
// is given, each at most once and only when the answer matters.
//
// Tracker keeps the bad marks in bad-configs.json, a JSON object keyed
// "<uid>/<resourceVersion>" with {"time": RFC3339, "reason": "..."} values,
// written atomically and durably, and bounded in size (oldest marks go
// first). A config is never rolled forward to while it has a mark; Forget
// removes one, which is the repair step after a dead end.
//
// What this package does not do: it does not read pointers or checkpoints
// (package checkpoint does), count startups (package crashloop does), or
// word the condition (package status does). A corrupt bad-config file is
// reported and read as empty: the marks are lost, and a bad config is found
// bad again when it is next tried — by its decode or validation failure at
// once, or by a new crash loop.
package lkg
