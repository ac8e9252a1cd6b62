package dynconfig

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// uidOf returns the ConfigMap UID of a remote source, or "" for local.
func uidOf(src *corev1.NodeConfigSource) types.UID {
	if src == nil || src.ConfigMap == nil {
		return ""
	}
	return src.ConfigMap.UID
}

// problemReason is the reason for d.Problem alone: the text recorded with a
// bad mark and reported in the condition.
func problemReason(d lkg.Decision, current *corev1.NodeConfigSource) string {
	uid := uidOf(current)
	switch d.Problem {
	case lkg.ProblemSyncFailed:
		return status.SyncFailedReason(d.Cause)
	case lkg.ProblemLoadFailed:
		return status.LoadFailedReason(uid, d.Cause)
	case lkg.ProblemDecodeFailed:
		return status.DecodeFailedReason(uid)
	case lkg.ProblemValidateFailed:
		return status.ValidateFailedReason(uid)
	case lkg.ProblemCrashLoop:
		return status.CrashLoopReason(uid)
	case lkg.ProblemApplyFailed:
		var ce *lkg.ConfigError
		if errors.As(d.Cause, &ce) && ce.Stage == lkg.StageValidate {
			// Refused before it was tried (External.BeforeRestart): a
			// validation failure on this node, naming why.
			return status.ValidateFailedReason(uid) + ": " + ce.Err.Error()
		}
		return status.ApplyFailedReason(uid)
	case lkg.ProblemNotConfirmed:
		return status.NotConfirmedReason(uid, d.Cause)
	case lkg.ProblemStateUnreadable:
		return status.StateUnreadableReason(d.Cause)
	case lkg.ProblemCrashCountUnknown:
		return crashCountUnknownReason(uid, d.Cause)
	case lkg.ProblemMarkedBad:
		if d.DeadEnd {
			return status.DeadEndReason(d.Cause.Error(), d.DeadEndAfterCrashLoop)
		}
		return d.Cause.Error()
	}
	return status.ReasonAllChecksPassed
}

// reportFor words the ConfigOK condition for a startup decision.
func reportFor(d lkg.Decision, current, lastKnownGood *corev1.NodeConfigSource, local status.Local) status.Report {
	if d.Problem == lkg.ProblemNone && !d.UsingLastKnownGood {
		if d.Run == nil {
			reason := status.ReasonLocalDefault
			if local == status.LocalInit {
				reason = status.ReasonLocalInit
			}
			return status.Report{Status: corev1.ConditionTrue, Reason: reason, Message: status.CurrentMessage(status.Ref{}, local)}
		}
		return status.Report{
			Status:  corev1.ConditionTrue,
			Reason:  status.ReasonAllChecksPassed,
			Message: status.CurrentMessage(status.Ref{UID: uidOf(d.Run)}, local),
		}
	}
	r := status.Report{
		Status:  corev1.ConditionFalse,
		Reason:  problemReason(d, current),
		Message: status.LastKnownGoodMessage(status.Ref{UID: uidOf(d.Run)}, local),
	}
	if d.Problem == lkg.ProblemSyncFailed || d.Problem == lkg.ProblemStateUnreadable || d.Problem == lkg.ProblemCrashCountUnknown {
		r.Status = corev1.ConditionUnknown
	}
	if d.LastKnownGoodUnusable != nil {
		r.Reason = withUnusableLastKnownGood(r.Reason, lastKnownGood, d.LastKnownGoodUnusable)
	}
	return r
}

// syncFailedReport is the condition while a live sync fails: Unknown, the
// cause in the reason, and the running config's message unchanged, since
// nothing changes. When the running decision could not use the remote
// last-known-good, the reason keeps saying so: the node still runs its local
// config for that reason.
func syncFailedReport(s state, cause error) status.Report {
	reason := status.SyncFailedReason(cause)
	if u := s.decision.LastKnownGoodUnusable; u != nil {
		reason = withUnusableLastKnownGood(reason, s.lastKnownGood, u)
	}
	return status.Report{Status: corev1.ConditionUnknown, Reason: reason, Message: s.report.Message}
}

// configStatus is the ConfigStatus published with r: the sources of the
// running state and its phase.
func configStatus(s state, r status.Report) *nodeapi.ConfigStatus {
	cs := &nodeapi.ConfigStatus{
		Assigned:      s.current.Source,
		Active:        s.running.Source,
		LastKnownGood: s.lastKnownGood,
	}
	if r.Status != corev1.ConditionTrue {
		cs.Error = r.Reason
	}
	switch {
	case s.decision.DeadEnd:
		cs.Phase = nodeapi.PhaseDeadEnd
	case s.notApplied != nil && r.Status == corev1.ConditionFalse:
		// Runs what it ran before; the assignment was not applied here.
		cs.Assigned, cs.Phase = s.notApplied, nodeapi.PhaseNotApplied
	case s.current.Source == nil:
		cs.Phase = nodeapi.PhaseLocal
	case !lkg.Same(s.running.Source, s.current.Source) && s.decision.Problem == lkg.ProblemSyncFailed:
		// Not a verdict on current: what to run could not be found out.
		cs.Phase = nodeapi.PhaseSyncFailed
	case !lkg.Same(s.running.Source, s.current.Source):
		cs.Phase = nodeapi.PhaseRolledBack
	case lkg.Same(s.current.Source, s.lastKnownGood):
		cs.Phase = nodeapi.PhasePromoted
	default:
		cs.Phase = nodeapi.PhaseTrial
		if !s.running.Since.IsZero() {
			end := metav1.NewTime(s.running.Since.Add(s.trial.Duration))
			cs.TrialEnds = &end
		}
	}
	return cs
}

// crashCountUnknownReason: current is on trial and its crash restarts
// cannot be counted, so it does not run. (Condition wording belongs to
// package status; this one waits there for its owner.)
func crashCountUnknownReason(current types.UID, cause error) string {
	return fmt.Sprintf("crash restarts of current (UID: %s) cannot be counted, a crash loop would go unnoticed, cause: %v", current, cause)
}

// withUnusableLastKnownGood extends reason with why the last-known-good
// could not be used: status.WithUnusableLastKnownGood for a remote one; for
// one whose pointer could not even be read (no UID to name), the same words
// without the UID.
func withUnusableLastKnownGood(reason string, lastKnownGood *corev1.NodeConfigSource, cause error) string {
	if uid := uidOf(lastKnownGood); uid != "" {
		return status.WithUnusableLastKnownGood(reason, uid, cause)
	}
	return fmt.Sprintf("%s; last-known-good is unusable, using local config, cause: %v", reason, cause)
}

// rollbackCheckSep starts what withRollbackCheck appends to a message.
const rollbackCheckSep = "; "

// rollbackCheckMessage says that the rollback target could not be used.
func rollbackCheckMessage(lastKnownGood *corev1.NodeConfigSource, cause error) string {
	return fmt.Sprintf("last-known-good (UID: %s) is unusable, a rollback would use the local config, cause: %v", uidOf(lastKnownGood), cause)
}

// withRollbackCheck appends to the message of a report that runs current
// (status True) that its rollback target is unusable, when the check of
// checked (the last-known-good when it was checked) found so and it is
// still the last-known-good.
func withRollbackCheck(r status.Report, lastKnownGood, checked *corev1.NodeConfigSource, check error) status.Report {
	if check == nil || r.Status != corev1.ConditionTrue || uidOf(lastKnownGood) == "" || !lkg.Same(lastKnownGood, checked) {
		return r
	}
	r.Message += rollbackCheckSep + rollbackCheckMessage(lastKnownGood, check)
	return r
}

// stripRollbackCheck removes what withRollbackCheck appended.
func stripRollbackCheck(r status.Report) status.Report {
	if i := strings.Index(r.Message, rollbackCheckSep+"last-known-good (UID: "); i >= 0 {
		r.Message = r.Message[:i]
	}
	return r
}
