package status

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// The fixed reasons of the proposal.
const (
	// ReasonAllChecksPassed: the current remote config is in use and OK.
	ReasonAllChecksPassed = "all checks passed"
	// ReasonLocalInit: no remote config is assigned and an init config was
	// provided.
	ReasonLocalInit = "current is set to the local default, and an init config was provided"
	// ReasonLocalDefault: no remote config is assigned and no init config
	// was provided.
	ReasonLocalDefault = "current is set to the local default, and no init config was provided"
)

// Local says what the local config is made of: an init file, or the built-in
// defaults (plus flags) only.
type Local int

const (
	// LocalDefault: built-in defaults and flags only.
	LocalDefault Local = iota
	// LocalInit: an init config file was provided.
	LocalInit
)

// String is "init" or "default", as the messages spell it.
func (l Local) String() string {
	if l == LocalInit {
		return "init"
	}
	return "default"
}

// Ref names a config in a message: a remote ConfigMap by UID, or the local
// config (UID empty).
type Ref struct {
	UID types.UID
}

// Remote reports whether r names a remote config.
func (r Ref) Remote() bool { return r.UID != "" }

// CurrentMessage is the message for running current: "using current (UID:
// <uid>)", or "using current (init)" / "using current (default)".
func CurrentMessage(r Ref, l Local) string {
	if r.Remote() {
		return fmt.Sprintf("using current (UID: %s)", r.UID)
	}
	return fmt.Sprintf("using current (%s)", l)
}

// LastKnownGoodMessage is the message for running the rollback target. The
// two spellings are the proposal's own: "using last known good: (UID:
// <uid>)" for a remote config and "using last-known-good (init)" /
// "using last-known-good (default)" for the local one.
func LastKnownGoodMessage(r Ref, l Local) string {
	if r.Remote() {
		return fmt.Sprintf("using last known good: (UID: %s)", r.UID)
	}
	return fmt.Sprintf("using last-known-good (%s)", l)
}

// SyncFailedReason: the desired config is unclear.
func SyncFailedReason(cause error) string {
	return fmt.Sprintf("failed to sync, desired config unclear, cause: %v", cause)
}

// LoadFailedReason: current's checkpoint is missing or corrupt.
func LoadFailedReason(current types.UID, cause error) string {
	return fmt.Sprintf("failed to load current (UID: %s), cause: %v", current, cause)
}

// DecodeFailedReason: current cannot be decoded. The reason names only the
// config (like the proposal's validation reason); the error goes to the log.
func DecodeFailedReason(current types.UID) string {
	return fmt.Sprintf("failed to decode current (UID: %s)", current)
}

// ValidateFailedReason: current fails validation.
func ValidateFailedReason(current types.UID) string {
	return fmt.Sprintf("failed to validate current (UID: %s)", current)
}

// CrashLoopReason: current crash-looped during its trial.
func CrashLoopReason(current types.UID) string {
	return fmt.Sprintf("crash loop detected with current (UID: %s)", current)
}

// DeadEndReason: the rollback target crash-loops too, after current was
// marked bad for markReason. After a crash-loop mark the crash is likely not
// the config's fault, so the advice is to repair the node and forget the
// mark; after a decode, validation or apply mark current is certainly bad,
// and forgetting the mark would only try it again.
func DeadEndReason(markReason string, crashLoopMark bool) string {
	if crashLoopMark {
		return fmt.Sprintf("dead end: still crash-looping after rolling back (%s); "+
			"the crash is likely not caused by config: repair the node, then forget the bad mark", markReason)
	}
	return fmt.Sprintf("dead end: still crash-looping after rolling back (%s); "+
		"the rollback target crashes too: repair the node or the component; current stays bad", markReason)
}

// ApplyFailedReason: the component could not apply current in process.
func ApplyFailedReason(current types.UID) string {
	return fmt.Sprintf("failed to apply current (UID: %s)", current)
}

// NotConfirmedReason: current was not confirmed healthy within its
// confirmation deadline (dynconfig.Options.ConfirmWithin); cause says
// which deadline.
func NotConfirmedReason(current types.UID, cause error) string {
	return fmt.Sprintf("failed to confirm current (UID: %s) healthy, cause: %v", current, cause)
}

// LocalInvalidReason: the local config (the component's own files and
// flags) does not validate, so the component has nothing to fall back to.
// The cause is cut to 1 KiB: a condition is not a log.
func LocalInvalidReason(cause error) string {
	msg := cause.Error()
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	return "failed to validate the local config, cause: " + msg
}

// LocalInvalidMessage is the message beside LocalInvalidReason: no config
// of the lifecycle runs until the local files are repaired.
const LocalInvalidMessage = "not running a config: the local config is invalid"

// StateUnreadableReason: the state dir could not be read, so whether current
// may run is unclear.
func StateUnreadableReason(cause error) string {
	return fmt.Sprintf("failed to read the state dir, desired config unclear, cause: %v", cause)
}

// WithUnusableLastKnownGood extends reason when the remote last-known-good
// could not be used and the local config runs instead.
func WithUnusableLastKnownGood(reason string, lkg types.UID, cause error) string {
	return fmt.Sprintf("%s; last-known-good (UID: %s) is unusable, using local config, cause: %v", reason, lkg, cause)
}

// Report is the content of a ConfigOK condition, and the nodeapi.ConfigStatus
// published with it.
type Report struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
	// Config, when not nil, is published next to the condition
	// (NodeReporter writes it in the component's config-status annotation,
	// in the same request).
	Config *nodeapi.ConfigStatus
}

// Equal reports whether r and o publish the same thing.
func (r Report) Equal(o Report) bool {
	return r.Status == o.Status && r.Reason == o.Reason && r.Message == o.Message && r.Config.Equal(o.Config)
}

// ConfigOK returns the condition for r at now, given the condition last
// reported (nil if none). lastHeartbeatTime is always now;
// lastTransitionTime stays as in prev unless status, reason or message
// change (or prev has none).
func ConfigOK(prev *corev1.NodeCondition, r Report, now metav1.Time) corev1.NodeCondition {
	return Condition(nodeapi.ConditionType, prev, r, now)
}

// Condition is ConfigOK for a condition of type t (nodeapi.ConditionTypeFor).
func Condition(t corev1.NodeConditionType, prev *corev1.NodeCondition, r Report, now metav1.Time) corev1.NodeCondition {
	c := corev1.NodeCondition{
		Type:               t,
		Status:             r.Status,
		Reason:             r.Reason,
		Message:            r.Message,
		LastHeartbeatTime:  now,
		LastTransitionTime: now,
	}
	if prev != nil && prev.Type == t && prev.Status == r.Status &&
		prev.Reason == r.Reason && prev.Message == r.Message && !prev.LastTransitionTime.IsZero() {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// Find returns the ConfigOK condition in conditions, or nil.
func Find(conditions []corev1.NodeCondition) *corev1.NodeCondition {
	return FindType(conditions, nodeapi.ConditionType)
}

// FindType returns the condition of type t in conditions, or nil.
func FindType(conditions []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}
