package lkg

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Key is the identity of a config: "<uid>/<resourceVersion>/<payload key>"
// of a remote source, so that an in-place edit or another payload key of the
// same ConfigMap is another config. It is empty for a local (nil or empty)
// source. Two sources are the same config exactly when their Keys are equal.
func Key(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return ""
	}
	return string(src.ConfigMap.UID) + "/" + src.ConfigMap.ResourceVersion + "/" + src.ConfigMap.KubeletConfigKey
}

// Same reports whether a and b are the same config (both local, or the same
// Key).
func Same(a, b *corev1.NodeConfigSource) bool { return Key(a) == Key(b) }

// Entry is a bad mark, as Decide needs it.
type Entry struct {
	// Time is when the config was marked bad.
	Time time.Time
	// Reason is the condition reason reported when it was marked.
	Reason string
	// CrashLoop is true when the mark is for a crash loop (the imperfect
	// signal, the only kind that forget-bad can fix by repairing the node).
	CrashLoop bool
}

// Stage says how far a config got before it failed.
type Stage int

const (
	// StageLoad: the checkpoint is missing or corrupt on disk. This is not
	// the config's fault and never marks it bad.
	StageLoad Stage = iota + 1
	// StageDecode: the payload could not be decoded (a perfect signal).
	StageDecode
	// StageValidate: the decoded config failed validation (a perfect signal).
	StageValidate
)

// String names the stage.
func (s Stage) String() string {
	switch s {
	case StageLoad:
		return "load"
	case StageDecode:
		return "decode"
	case StageValidate:
		return "validate"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// ConfigError is what a Loader returns when a config cannot be used.
type ConfigError struct {
	Stage Stage
	Err   error
}

// Error names the stage and the cause.
func (e *ConfigError) Error() string { return fmt.Sprintf("failed to %s: %v", e.Stage, e.Err) }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Loader loads, decodes, defaults and validates a remote config. It returns
// nil when the config is usable and a *ConfigError otherwise (any other
// error counts as StageLoad). Decide calls a Loader at most once, and only
// when the answer matters.
type Loader func() error

// Problem is why the current config is not the one running (or None).
type Problem int

const (
	// ProblemNone: current is running.
	ProblemNone Problem = iota
	// ProblemSyncFailed: the desired config is unclear (an invalid
	// assignment, or the assignment could not be read) during startup.
	ProblemSyncFailed
	// ProblemLoadFailed: current's checkpoint is missing or corrupt.
	ProblemLoadFailed
	// ProblemDecodeFailed: current cannot be decoded; marked bad.
	ProblemDecodeFailed
	// ProblemValidateFailed: current fails validation; marked bad.
	ProblemValidateFailed
	// ProblemCrashLoop: startups during current's trial exceed its
	// threshold; marked bad.
	ProblemCrashLoop
	// ProblemMarkedBad: current was marked bad before (Cause has the
	// recorded reason).
	ProblemMarkedBad
	// ProblemApplyFailed: the component could not apply current in process
	// (its Reload returned an error); marked bad.
	ProblemApplyFailed
	// ProblemStateUnreadable: the bad marks could not be read (an I/O error,
	// not corruption), so whether current is bad is unclear.
	ProblemStateUnreadable
	// ProblemCrashCountUnknown: current is on trial and its crash restarts
	// cannot be counted (the startups could not be read, or this start
	// could not be recorded: a full disk, an unreadable file), so a crash
	// loop could not be stopped; the rollback target runs instead, status
	// Unknown. Nothing is marked bad: the next start that can count tries
	// current again.
	ProblemCrashCountUnknown
	// ProblemNotConfirmed: current was not confirmed healthy within its
	// confirmation deadline after it first ran (ConfirmDeadline); marked
	// bad.
	ProblemNotConfirmed
)

// String names the problem.
func (p Problem) String() string {
	switch p {
	case ProblemNone:
		return "None"
	case ProblemSyncFailed:
		return "SyncFailed"
	case ProblemLoadFailed:
		return "LoadFailed"
	case ProblemDecodeFailed:
		return "DecodeFailed"
	case ProblemValidateFailed:
		return "ValidateFailed"
	case ProblemCrashLoop:
		return "CrashLoop"
	case ProblemMarkedBad:
		return "MarkedBad"
	case ProblemApplyFailed:
		return "ApplyFailed"
	case ProblemStateUnreadable:
		return "StateUnreadable"
	case ProblemCrashCountUnknown:
		return "CrashCountUnknown"
	case ProblemNotConfirmed:
		return "NotConfirmed"
	}
	return fmt.Sprintf("Problem(%d)", int(p))
}

// Input is everything Decide looks at. Time-based facts (the crash-loop
// verdicts) are computed by the caller, so Decide itself has no clock and no
// I/O. Promotion is not decided here: a config is promoted only after it ran
// for a full trial in one process (Promotion), never at a startup.
type Input struct {
	// SyncError is non-nil when, during startup, the desired config could
	// not be determined: the assignment is invalid, or could not be read.
	// The seed then defers to the last-known-good config and reports
	// Unknown. A live component never calls Decide for a sync failure: it
	// reports it and changes nothing.
	SyncError error

	// Current is the config the node was last told to run (nil = local).
	Current *corev1.NodeConfigSource
	// LastKnownGood is the rollback target (nil = local).
	LastKnownGood *corev1.NodeConfigSource

	// MarksError is non-nil when the bad marks could not be read (an I/O
	// error; a corrupt file reads as no marks). Current might be marked bad,
	// so it is not run.
	MarksError error
	// CurrentBad is current's bad mark, if it has one.
	CurrentBad *Entry
	// ApplyError is non-nil when the running component refused to apply
	// current in process (its Reload returned this error): current is
	// marked bad (ProblemApplyFailed) and the rollback target runs, with
	// the same effects as any other config found bad.
	ApplyError error
	// LoadCurrent loads, decodes and validates current. Required when
	// Current is remote.
	LoadCurrent Loader
	// CurrentCrashLooping: current is still in its trial window and the
	// startups since it first ran exceed its threshold.
	CurrentCrashLooping bool
	// CrashCountError is non-nil when the startups could not be read or
	// this start could not be recorded, so CurrentCrashLooping may be false
	// only for want of evidence. A current on trial (not last-known-good)
	// is then not run: a crash loop would go unnoticed.
	CrashCountError error

	// NotConfirmed is non-nil when current missed its confirmation
	// deadline (ConfirmDeadline's Expired; it says which): current is
	// marked bad (ProblemNotConfirmed) and the rollback target runs.
	NotConfirmed error

	// LastKnownGoodError is non-nil when the last-known-good pointer could
	// not be read (damaged, unreadable): the rollback target is then the
	// local config, and a rollback says why (LastKnownGoodUnusable).
	// LastKnownGood must be nil.
	LastKnownGoodError error
	// LoadLastKnownGood loads, decodes and validates the last-known-good
	// config. Required when LastKnownGood is remote.
	LoadLastKnownGood Loader
	// LastKnownGoodCrashLooping: the component keeps crashing after it
	// rolled back from a bad current (startups since the bad mark exceed the
	// threshold within the trial window). Together with a bad current this
	// is a dead end: the crash is not the config's fault.
	LastKnownGoodCrashLooping bool
}

// Decision is what Decide chose, and everything the caller must do and
// report about it.
type Decision struct {
	// Run is the config to run (nil = local).
	Run *corev1.NodeConfigSource
	// UsingLastKnownGood is true when Run is the rollback target rather
	// than current (it may still be local).
	UsingLastKnownGood bool
	// Problem is why current is not running, or ProblemNone.
	Problem Problem
	// Cause explains Problem: the sync, load, decode or validation error,
	// or the reason recorded with an earlier bad mark.
	Cause error
	// MarkBad: record current as bad, with the reason that the ConfigOK
	// condition reports for Problem.
	MarkBad bool
	// ResetLastKnownGood: set last-known-good to local (current is local).
	ResetLastKnownGood bool
	// DeadEnd: the rollback target crash-loops too. Keep the evidence and
	// report; the node needs an out-of-band repair.
	DeadEnd bool
	// DeadEndAfterCrashLoop: with DeadEnd, current's mark is for a crash
	// loop, so repairing the node and forgetting the mark can help. A
	// decode, validation or apply mark is certain: forgetting it cannot.
	DeadEndAfterCrashLoop bool
	// LastKnownGoodUnusable is non-nil when the last-known-good could not
	// be used (its pointer unreadable, its checkpoint missing or corrupt, a
	// decode or validation failure, or it is the rejected current itself),
	// so Run is local.
	LastKnownGoodUnusable error
}

// Input errors.
var (
	errNoLoadCurrent = errors.New("lkg: Input.LoadCurrent is required when Current is remote")
	errNoLoadLKG     = errors.New("lkg: Input.LoadLastKnownGood is required when LastKnownGood is remote")
	errLKGIsCurrent  = errors.New("last-known-good is the rejected current config")
)

// Decide chooses the config to run at startup, following the Dynamic
// Kubelet Configuration rules:
//
//   - a sync failure defers to last-known-good (status Unknown);
//   - an empty current means local config, and resets last-known-good;
//   - a current marked bad is never rolled forward to;
//   - a current that fails to decode or validate is marked bad (perfect
//     signal); a current that crash-loops within its trial is marked bad
//     (imperfect signal); both roll back to last-known-good;
//   - a missing or corrupt checkpoint of current rolls back without a mark;
//   - unreadable bad marks roll back (current might be marked), status
//     Unknown;
//   - a current on trial whose crash restarts cannot be counted (startups
//     unreadable, or this start unrecorded) rolls back without a mark,
//     status Unknown, unless what could be counted already shows a crash
//     loop;
//   - a current not confirmed healthy within its confirmation deadline
//     (ConfirmDeadline) is marked bad and rolls back;
//   - a last-known-good that cannot be used falls back to local, and says so;
//   - a rollback target that crash-loops too is a dead end.
//
// It returns an error only for an Input that breaks its contract.
func Decide(in Input) (Decision, error) {
	if remote(in.Current) && in.LoadCurrent == nil {
		return Decision{}, errNoLoadCurrent
	}
	if remote(in.LastKnownGood) && in.LoadLastKnownGood == nil {
		return Decision{}, errNoLoadLKG
	}

	if in.SyncError != nil {
		return rollBack(in, Decision{Problem: ProblemSyncFailed, Cause: in.SyncError}), nil
	}
	if !remote(in.Current) {
		// A damaged last-known-good pointer is rewritten too: with a local
		// current, the rollback target is local.
		return Decision{ResetLastKnownGood: remote(in.LastKnownGood) || in.LastKnownGoodError != nil}, nil
	}
	if in.MarksError != nil {
		return rollBack(in, Decision{Problem: ProblemStateUnreadable, Cause: in.MarksError}), nil
	}
	if in.CurrentBad != nil {
		d := Decision{Problem: ProblemMarkedBad, Cause: errors.New(in.CurrentBad.Reason)}
		d.DeadEnd = in.LastKnownGoodCrashLooping
		d.DeadEndAfterCrashLoop = d.DeadEnd && in.CurrentBad.CrashLoop
		return rollBack(in, d), nil
	}
	if in.ApplyError != nil {
		return rollBack(in, Decision{Problem: ProblemApplyFailed, MarkBad: true, Cause: in.ApplyError}), nil
	}
	if err := in.LoadCurrent(); err != nil {
		d := Decision{Problem: ProblemLoadFailed, Cause: err}
		var ce *ConfigError
		if errors.As(err, &ce) {
			switch ce.Stage {
			case StageDecode:
				d.Problem, d.MarkBad = ProblemDecodeFailed, true
			case StageValidate:
				d.Problem, d.MarkBad = ProblemValidateFailed, true
			}
		}
		return rollBack(in, d), nil
	}
	if in.CurrentCrashLooping {
		return rollBack(in, Decision{Problem: ProblemCrashLoop, MarkBad: true}), nil
	}
	if in.NotConfirmed != nil && !Same(in.Current, in.LastKnownGood) {
		return rollBack(in, Decision{Problem: ProblemNotConfirmed, MarkBad: true, Cause: in.NotConfirmed}), nil
	}
	if in.CrashCountError != nil && !Same(in.Current, in.LastKnownGood) {
		return rollBack(in, Decision{Problem: ProblemCrashCountUnknown, Cause: in.CrashCountError}), nil
	}
	return Decision{Run: in.Current}, nil
}

// rollBack completes d to run the last-known-good config, or local when the
// last-known-good cannot be used.
func rollBack(in Input, d Decision) Decision {
	d.UsingLastKnownGood = true
	if in.LastKnownGoodError != nil {
		d.LastKnownGoodUnusable = in.LastKnownGoodError
		return d
	}
	if !remote(in.LastKnownGood) {
		return d
	}
	if d.Problem != ProblemSyncFailed && d.Problem != ProblemStateUnreadable && Key(in.LastKnownGood) == Key(in.Current) {
		d.LastKnownGoodUnusable = errLKGIsCurrent
		return d
	}
	if err := in.LoadLastKnownGood(); err != nil {
		d.LastKnownGoodUnusable = err
		return d
	}
	d.Run = in.LastKnownGood
	return d
}

func remote(src *corev1.NodeConfigSource) bool { return Key(src) != "" }
