package lkg

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The rules a running component follows after its startup decision: when
// to promote, when to restart or reload, and what a failed reload means.
// Like Decide they are pure; the caller does the I/O.

// Running is the config a process runs now.
type Running struct {
	// Source is the config (nil = local).
	Source *corev1.NodeConfigSource
	// Since is when this process started running it (Bootstrap returned it,
	// or a Reload of it succeeded). Time before, down, or on another config
	// never counts toward its trial.
	Since time.Time
	// Healthy is true once the component called MarkHealthy while running
	// this config.
	Healthy bool
}

// PromotionInput is what Promotion looks at.
type PromotionInput struct {
	// Current and LastKnownGood are the pointers.
	Current, LastKnownGood *corev1.NodeConfigSource
	// Running is the config this process runs.
	Running Running
	// Trial is current's trial duration.
	Trial time.Duration
	// RequireHealthy: promotion also needs MarkHealthy for this config.
	RequireHealthy bool
	// Now is the time of the verdict.
	Now time.Time
}

// PromotionVerdict says whether to promote current now and, if not, what to
// wait for. With neither Promote, After nor WaitHealthy, no promotion is
// pending: the caller waits for nothing.
type PromotionVerdict struct {
	// Promote: set last-known-good to current now.
	Promote bool
	// After is how long until the trial is over (a timer), when it is not
	// over yet.
	After time.Duration
	// WaitHealthy: the promotion waits for MarkHealthy (a channel, never a
	// timer: waiting costs nothing).
	WaitHealthy bool
}

// Promotion decides whether current becomes last-known-good: only when this
// process runs current (not a rollback target), it is remote and not
// already last-known-good, it has run for a full Trial (Now - Since >=
// Trial), and, with RequireHealthy, MarkHealthy was called for it.
func Promotion(in PromotionInput) PromotionVerdict {
	if !remote(in.Current) || !Same(in.Running.Source, in.Current) || Same(in.LastKnownGood, in.Current) {
		return PromotionVerdict{}
	}
	waitHealthy := in.RequireHealthy && !in.Running.Healthy
	if left := in.Trial - in.Now.Sub(in.Running.Since); left > 0 {
		return PromotionVerdict{After: left, WaitHealthy: waitHealthy}
	}
	if waitHealthy {
		return PromotionVerdict{WaitHealthy: true}
	}
	return PromotionVerdict{Promote: true}
}

// Action is how a running component moves to the config a decision chose.
type Action int

const (
	// ActionNone: the decision's config already runs.
	ActionNone Action = iota
	// ActionReload: apply it in process.
	ActionReload
	// ActionRestart: exit, for the process manager to start the component
	// on it.
	ActionRestart
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "None"
	case ActionReload:
		return "Reload"
	case ActionRestart:
		return "Restart"
	}
	return "Action(?)"
}

// NextAction returns how to move from the running config to the one d
// chose: nothing when they are the same config, else a reload when the
// component can reload, else a restart.
func NextAction(running *corev1.NodeConfigSource, d Decision, canReload bool) Action {
	switch {
	case Same(running, d.Run):
		return ActionNone
	case canReload:
		return ActionReload
	}
	return ActionRestart
}

// ReloadFailure is what to do after Reload returned an error.
type ReloadFailure struct {
	// MarkBad: mark current bad (ProblemApplyFailed), decide again, and
	// reload the rollback target.
	MarkBad bool
	// Restart: nothing in process can recover; exit for the process manager
	// to start the component again.
	Restart bool
}

// AfterReloadFailure decides what follows a failed Reload of target. A
// failure to apply current means the component cannot run it: current is
// marked bad and the rollback target is reloaded. A failure to apply the
// rollback target (the last-known-good or the local config) leaves the
// process on a config it did not mean to run: restart, and let the startup
// decision run the rollback target from scratch.
func AfterReloadFailure(target, current *corev1.NodeConfigSource) ReloadFailure {
	if remote(target) && Same(target, current) {
		return ReloadFailure{MarkBad: true}
	}
	return ReloadFailure{Restart: true}
}
