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
	// Startups are the recorded startup times, in any order. They include the
	// startup of the process asking.
	Startups []time.Time
	// Since is when the config being judged first ran (for a rollback
	// target: when the config it replaced was marked bad). The start that
	// adopted the config recorded its startup before that, so it is not
	// counted. The zero time means the config has not run yet, and the
	// verdict is then false.
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
// the startups strictly after Since (the crash restarts) and within one
// Trial before Now exceed Threshold. Startups after Now are counted (see
// the package documentation on clock steps). It does no I/O.
func CrashLooping(in Input) bool {
	if in.Since.IsZero() {
		return false
	}
	since := in.Since
	if windowStart := in.Now.Add(-in.Trial); windowStart.After(since) {
		since = windowStart
	}
	threshold := min(max(in.Threshold, 0), MaxThreshold)
	return CrashRestarts(in.Startups, since) > threshold
}

// CrashRestarts returns how many of startups are strictly after since.
func CrashRestarts(startups []time.Time, since time.Time) int {
	n := 0
	for _, s := range startups {
		if s.After(since) {
			n++
		}
	}
	return n
}
