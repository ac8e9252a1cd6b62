package crashloop

import (
	"fmt"
	"time"
)

// MaxThreshold is the largest crash-loop threshold a config may ask for.
const MaxThreshold = 10

// ValidateThreshold returns an error unless n is a valid crash-loop threshold,
// between 0 and MaxThreshold inclusive.
func ValidateThreshold(n int) error {
	if n < 0 || n > MaxThreshold {
		return fmt.Errorf("crash-loop threshold %d is out of range: must be between 0 and %d inclusive", n, MaxThreshold)
	}
	return nil
}

// Input holds everything the crash-loop verdict depends on.
type Input struct {
	// Startups are the recorded startup times in the order they were
	// recorded (package checkpoint appends each start), which is the order
	// they happened whatever the clock said. They include the startup of
	// the process asking.
	Startups []time.Time
	// Since is when the config being judged first ran (for a rollback
	// target: when the config it replaced was marked bad). When a start
	// adopted the config, Since is that start's own recorded time, which
	// pins the adopting start in Startups (see the package documentation);
	// it is not counted. The zero time means the config has not run yet,
	// and the verdict is then false.
	Since time.Time
	// Now is the time of the verdict.
	Now time.Time
	// Trial is the trial period of the config being judged: only startups
	// within one trial before Now count.
	Trial time.Duration
	// Threshold is the config's crash-loop threshold: how many crash
	// restarts are tolerated. Values outside 0..MaxThreshold are clamped
	// into that range.
	Threshold int
}

// CrashLooping reports whether the config described by in is crash-looping:
// the startups recorded after the adopting one (the crash restarts) and
// stamped within one Trial before Now exceed Threshold; when the config was
// adopted in the present (Since not after Now), startups stamped later
// than Now are no crashes of it. It does no I/O.
func CrashLooping(in Input) bool {
	if in.Since.IsZero() {
		return false
	}
	threshold := min(max(in.Threshold, 0), MaxThreshold)
	windowStart := in.Now.Add(-in.Trial)
	// A run adopted in the present (Since not after Now) has no startup
	// stamped later than now: such a stamp is a clock that ran ahead (an
	// RTC at boot, corrected since), not a crash of this run.
	presentRun := !in.Since.After(in.Now)
	n := 0
	for _, s := range in.Startups[adopting(in.Startups, in.Since, in.Now)+1:] {
		if presentRun && s.After(in.Now) {
			continue
		}
		if s.After(windowStart) {
			n++
		}
	}
	return n > threshold
}

// CrashRestarts returns how many of startups (in the order recorded) were
// recorded after the start that adopted a config first run at since: the
// crash restarts of that config, with no trial window.
func CrashRestarts(startups []time.Time, since time.Time) int {
	return len(startups) - 1 - adopting(startups, since, time.Time{})
}

// adopting returns the index in startups (in the order recorded) of the
// start that adopted the config first run at since, or -1 when it is not
// among them (every startup then came after it). See the package
// documentation for the rule; now is the zero time when unknown.
func adopting(startups []time.Time, since, now time.Time) int {
	// The start whose own time is since: the pin.
	for i := len(startups) - 1; i >= 0; i-- {
		if startups[i].Equal(since) {
			return i
		}
	}
	// No pin (a config adopted in process by a reload, a mark's time, a
	// first run older versions recorded): the last start stamped no later
	// than since. When since is in the future of now, the clock was stepped
	// back after the first run: the start that adopted it is among those
	// stamped before the step, which are later than now.
	last, lastBeforeStep := -1, -1
	for i, s := range startups {
		if s.After(since) {
			continue
		}
		last = i
		if !now.IsZero() && s.After(now) {
			lastBeforeStep = i
		}
	}
	if lastBeforeStep >= 0 {
		return lastBeforeStep
	}
	return last
}
