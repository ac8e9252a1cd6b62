package crashloop

import (
	"fmt"
	"time"
)

// MaxThreshold is the largest crash-loop threshold a config may ask for. It
// bounds the startups file to MaxThreshold+1 entries.
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
	// Startups are the recorded startup times, in any order. They include the
	// startup of the process asking.
	Startups []time.Time
	// CurrentSetTime is when the config being judged was set as current. The
	// zero time means unknown, and the verdict is then false.
	CurrentSetTime time.Time
	// Now is the time of the verdict.
	Now time.Time
	// Trial is the trial period of the config being judged.
	Trial time.Duration
	// Threshold is the config's crash-loop threshold. Values outside
	// 0..MaxThreshold are clamped into that range.
	Threshold int
}

// CrashLooping reports whether the config described by in is crash-looping:
// the time from in.CurrentSetTime to in.Now does not exceed in.Trial, and the
// number of in.Startups strictly after in.CurrentSetTime exceeds in.Threshold.
// Startups after in.Now are counted (see the package documentation on clock
// steps). It does no I/O.
func CrashLooping(in Input) bool {
	if in.CurrentSetTime.IsZero() {
		return false
	}
	if in.Now.Sub(in.CurrentSetTime) > in.Trial {
		return false
	}
	threshold := min(max(in.Threshold, 0), MaxThreshold)
	return countAfter(in.Startups, in.CurrentSetTime) > threshold
}

// countAfter returns how many of ts are strictly after t.
func countAfter(ts []time.Time, t time.Time) int {
	n := 0
	for _, s := range ts {
		if s.After(t) {
			n++
		}
	}
	return n
}
