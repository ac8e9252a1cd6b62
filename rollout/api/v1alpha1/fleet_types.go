package v1alpha1

// MaintenanceWindow is a weekly stretch of time in which a rollout may
// assign new nodes (spec.windows), in the manner of kured's
// --reboot-days/--start-time/--end-time/--time-zone: on each of Days, from
// Start to End, wall-clock times in TimeZone.
//
// A window whose End is not after its Start ends on the next day (22:00 to
// 04:00 runs overnight, and belongs to the day it starts on); Start equal
// to End is a whole day. Times are wall-clock times of TimeZone, so a
// window keeps its local hours across a daylight saving change. On the
// day the clock springs forward, a start or end in the hour it skips is
// taken with the offset before the change, i.e. shifted later by the
// change (02:30 in Europe/Berlin is 03:30 CEST that day; a window of
// 02:00-02:45 runs 03:00-03:45 CEST, one of 02:00-03:00 does not open);
// on the day the clock falls back, a
// start or end in the hour the clock repeats is taken the second time
// the clock shows it.
type MaintenanceWindow struct {
	// Days are the days of the week the window starts on (Mon, Tue, Wed,
	// Thu, Fri, Sat, Sun). Empty or absent: every day.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`
	// Start is when the window opens, as HH:MM (24-hour clock) in
	// TimeZone.
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`
	// End is when the window closes, as HH:MM in TimeZone: not after
	// Start means the next day.
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	End string `json:"end"`
	// TimeZone is the IANA time zone of Start and End ("Europe/Berlin",
	// "America/New_York"). Default: UTC. An unknown zone keeps the
	// rollout Paused and says so.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// Weekday is a day of the week, by its three-letter English name.
//
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// The condition types of the fleet checks.
const (
	// ConditionComponentNotRunning is True while some selected nodes carry
	// no status of the rollout's component at all: they do not run it (a
	// wrong selector, a misspelt component). Such nodes are not assigned
	// and not counted as failures (status.notRunning counts them).
	ConditionComponentNotRunning = "ComponentNotRunning"
	// ConditionRefused is True while the rollout does not start because
	// of its ConfigMap: it is not immutable, or it is known bad (see the
	// message).
	ConditionRefused = "Refused"
)
