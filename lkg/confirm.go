package lkg

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Confirm or revert: with a confirmation deadline (the Controller's
// Options.ConfirmWithin), a config that is not confirmed healthy within
// that time after it first ran is marked bad (ProblemNotConfirmed) and
// rolled back by the node itself, with or without the API server.
//
// The deadline's clock is the wall clock, read against records that
// survive restarts and reboots: the first run of current (kept in its
// pointer) and, after a clock step, the time the deadline was re-anchored
// (kept in the confirmation record), so that a config that crash-restarts
// slowly gets no fresh window at each start, and time spent down counts.
// A confirmation is recorded too, so that a restart never loses one.
//
// Clock steps, the rule:
//
//   - A clock found behind the deadline's start (stepped back past the
//     first run) re-anchors the start at the clock's now, and the caller
//     records it: the deadline fires ConfirmWithin after that reading at
//     the latest, never at once and never "after the clock catches up".
//   - A process also counts its own uptime on current by the monotonic
//     clock (Running.Since carries a monotonic reading when the clock is
//     the real one): a step back while it runs delays nothing, so the
//     deadline fires no later than ConfirmWithin of uptime in one process.
//   - A step back that stays after the start delays the deadline by at
//     most the step, and only across a restart; a step forward is time
//     that passed.

// ConfirmInput is what ConfirmDeadline looks at.
type ConfirmInput struct {
	// Current and LastKnownGood are the pointers.
	Current, LastKnownGood *corev1.NodeConfigSource
	// ConfirmWithin is the confirmation deadline; zero or less: none.
	ConfirmWithin time.Duration
	// FirstRun is when current first ran (its pointer's record); zero:
	// it has not run yet, and no deadline runs.
	FirstRun time.Time
	// Anchor, when not zero, replaces FirstRun as the deadline's start: a
	// start recorded after the clock was found stepped back before it.
	Anchor time.Time
	// Confirmed: a confirmation of this run of current is recorded, or the
	// component confirmed current in this process.
	Confirmed bool
	// Running is what this process runs; when it is current, its uptime on
	// it counts too (see the clock-step rule).
	Running Running
	// Now is the time of the verdict.
	Now time.Time
}

// ConfirmVerdict says whether current missed its confirmation deadline
// and, if not, what to wait for. The zero value: no deadline runs.
type ConfirmVerdict struct {
	// Expired: current was not confirmed within ConfirmWithin of its first
	// run; it is marked bad (Input.NotConfirmed) and rolled back.
	Expired bool
	// Pending: a deadline runs; a confirmation ends it.
	Pending bool
	// After is how long until the deadline, while Pending.
	After time.Duration
	// Anchor, when not zero, is the deadline's new start, for the caller to
	// record: the clock was found behind the start (stepped back).
	Anchor time.Time
}

// ConfirmDeadline applies the confirmation deadline to current: none when
// there is no deadline, current is local or last-known-good (a promoted
// config passed its trial), has not run yet, or was confirmed; else it is
// pending until ConfirmWithin has passed since its first run (or the later
// anchor), by the wall clock or by this process's uptime on it, whichever
// says more, and expired after. It does no I/O.
func ConfirmDeadline(in ConfirmInput) ConfirmVerdict {
	if in.ConfirmWithin <= 0 || !remote(in.Current) || Same(in.Current, in.LastKnownGood) ||
		in.FirstRun.IsZero() || in.Confirmed {
		return ConfirmVerdict{}
	}
	var v ConfirmVerdict
	start := in.FirstRun
	if !in.Anchor.IsZero() {
		start = in.Anchor
	}
	elapsed := in.Now.Sub(start)
	if elapsed < 0 {
		// The clock is behind the start: stepped back.
		v.Anchor = in.Now
		elapsed = 0
	}
	if Same(in.Running.Source, in.Current) && !in.Running.Since.IsZero() {
		elapsed = max(elapsed, in.Now.Sub(in.Running.Since))
	}
	if elapsed >= in.ConfirmWithin {
		v.Expired = true
		return v
	}
	v.Pending, v.After = true, in.ConfirmWithin-elapsed
	return v
}
