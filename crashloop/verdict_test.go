package crashloop

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns t0+d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// stamps returns t0+d for each d.
func stamps(ds ...time.Duration) []time.Time {
	out := make([]time.Time, len(ds))
	for i, d := range ds {
		out[i] = at(d)
	}
	return out
}

func TestValidateThreshold(t *testing.T) {
	for _, tc := range []struct {
		n       int
		wantErr bool
	}{
		{n: -1, wantErr: true},
		{n: 0},
		{n: 1},
		{n: 3},
		{n: MaxThreshold},
		{n: MaxThreshold + 1, wantErr: true},
		{n: -1 << 31, wantErr: true},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			err := ValidateThreshold(tc.n)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ValidateThreshold(%d) = %v, want error: %v", tc.n, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "between 0 and 10") {
				t.Errorf("ValidateThreshold(%d) = %q, want the allowed range in the message", tc.n, err)
			}
		})
	}
}

func TestCrashLooping(t *testing.T) {
	const trial = 10 * time.Minute
	s := time.Second
	for _, tc := range []struct {
		name string
		in   Input
		want bool
	}{
		{
			name: "unknown set time never crash-loops",
			in:   Input{Startups: stamps(1*s, 2*s, 3*s, 4*s), Now: at(5 * s), Trial: trial, Threshold: 0},
		},
		{
			name: "no startups",
			in:   Input{Since: t0, Now: at(5 * s), Trial: trial, Threshold: 0},
		},
		{
			name: "count equal to threshold is tolerated",
			in:   Input{Startups: stamps(1*s, 2*s, 3*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 3},
		},
		{
			name: "count exceeding threshold trips",
			in:   Input{Startups: stamps(1*s, 2*s, 3*s, 4*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 3},
			want: true,
		},
		{
			name: "startup at the set time is not after it",
			in:   Input{Startups: stamps(0, 1*s, 2*s, 3*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 3},
		},
		{
			name: "startups before the set time do not count",
			in:   Input{Startups: stamps(-3*s, -2*s, -1*s, 1*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 1},
		},
		{
			name: "the order recorded counts, not the stamps: only what follows the last start before since",
			in:   Input{Startups: stamps(4*s, -1*s, 2*s, 1*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 1},
			want: true,
		},
		{
			name: "the order recorded counts, not the stamps: two after the adopting start do not exceed 2",
			in:   Input{Startups: stamps(4*s, -1*s, 2*s, 1*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 2},
		},
		{
			name: "elapsed equal to trial is still in the trial",
			in:   Input{Startups: stamps(1*s, 2*s), Since: t0, Now: at(trial), Trial: trial, Threshold: 1},
			want: true,
		},
		{
			name: "the window slides: both restarts still within one trial of now",
			in:   Input{Startups: stamps(1*s, 2*s), Since: t0, Now: at(trial + 1), Trial: trial, Threshold: 1},
			want: true,
		},
		{
			name: "one restart older than one trial before now no longer counts",
			in:   Input{Startups: stamps(1*s, 2*s), Since: t0, Now: at(trial + 1*s + 1), Trial: trial, Threshold: 1},
		},
		{
			name: "restarts long after the first run count within their trial window",
			in:   Input{Startups: stamps(time.Hour, time.Hour+s), Since: t0, Now: at(time.Hour + 2*s), Trial: trial, Threshold: 1},
			want: true,
		},
		{
			name: "set time in the future of now is within the trial",
			in:   Input{Startups: stamps(2*s, 3*s), Since: at(1 * s), Now: at(-time.Hour), Trial: trial, Threshold: 1},
			want: true,
		},
		{
			name: "zero trial after the set time",
			in:   Input{Startups: stamps(1*s, 2*s), Since: t0, Now: at(3 * s), Trial: 0, Threshold: 0},
		},
		{
			name: "negative threshold is clamped to 0",
			in:   Input{Startups: stamps(1 * s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: -5},
			want: true,
		},
		{
			name: "negative threshold clamped to 0 with no startups",
			in:   Input{Since: t0, Now: at(5 * s), Trial: trial, Threshold: -5},
		},
		{
			name: "threshold above the maximum is clamped to it",
			in: Input{
				Startups: stamps(1*s, 2*s, 3*s, 4*s, 5*s, 6*s, 7*s, 8*s, 9*s, 10*s, 11*s),
				Since:    t0, Now: at(20 * s), Trial: trial, Threshold: 50,
			},
			want: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CrashLooping(tc.in); got != tc.want {
				t.Errorf("CrashLooping(%+v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// A backward clock step must not make startups recorded before a config
// was adopted count as its crash restarts, however far in the future
// their stamps lie (issue 21, defect 4).
func TestClockStepBackDoesNotInventCrashes(t *testing.T) {
	const trial = 10 * time.Minute
	h, s := time.Hour, time.Second
	for _, tc := range []struct {
		name  string
		in    Input
		wantN int // CrashRestarts
	}{
		{
			name: "pinned: adopted at t0 after a step back from t0+1h",
			in: Input{Startups: stamps(h, h+s, h+2*s, 0), Since: t0, Now: at(0),
				Trial: trial, Threshold: 0},
		},
		{
			name: "pinned: one crash restart after the adoption",
			in: Input{Startups: stamps(h, h+s, h+2*s, 0, 5*s), Since: t0, Now: at(5 * s),
				Trial: trial, Threshold: 1},
			wantN: 1,
		},
		{
			name: "unpinned first run (older versions, reload): the last start before it adopted",
			in: Input{Startups: stamps(h, h+s, h+2*s, 0), Since: at(s / 10), Now: at(s),
				Trial: trial, Threshold: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if CrashLooping(tc.in) {
				t.Errorf("CrashLooping(%+v) = true: startups from before the adoption were counted", tc.in)
			}
			if n := CrashRestarts(tc.in.Startups, tc.in.Since); n != tc.wantN {
				t.Errorf("CrashRestarts = %d, want %d", n, tc.wantN)
			}
		})
	}
}

// A backward clock step must not hide the crash restarts of a config:
// those recorded after its adoption count whether they are stamped before
// or after the step (issue 21, defect 4).
func TestClockStepBackDoesNotHideCrashes(t *testing.T) {
	const trial = 10 * time.Minute
	h, s := time.Hour, time.Second
	for _, tc := range []struct {
		name string
		in   Input
	}{
		{
			name: "pinned: adopted at t0+1h, step back to t0, three crash restarts after the step",
			in:   Input{Startups: stamps(-s, h, s, 2*s, 3*s), Since: at(h), Now: at(3 * s), Trial: trial, Threshold: 2},
		},
		{
			name: "pinned: one crash restart before the step, two after",
			in:   Input{Startups: stamps(-s, h, h+s, s, 2*s), Since: at(h), Now: at(2 * s), Trial: trial, Threshold: 2},
		},
		{
			name: "unpinned (reload at t0+1h): the step is found where the stamps fall below now",
			in:   Input{Startups: stamps(-s, h-s, s, 2*s, 3*s), Since: at(h), Now: at(3 * s), Trial: trial, Threshold: 2},
		},
		{
			// make mutate: "the adopting start is not pinned" survived
			// every other case.
			name: "pinned: adopted at t0+1h, step back to t0, the clock has passed t0+1h again: the restarts stamped before it still count",
			in:   Input{Startups: stamps(-s, h, s, 2*s, 3*s), Since: at(h), Now: at(h + time.Minute), Trial: 2 * h, Threshold: 2},
		},
		{
			name: "a step back by a day: stamps before it are in the future of now, still in the window",
			in:   Input{Startups: stamps(0, s, 2*s, 3*s), Since: t0, Now: at(-24*h + s), Trial: trial, Threshold: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !CrashLooping(tc.in) {
				t.Errorf("CrashLooping(%+v) = false: crash restarts across the clock step were hidden", tc.in)
			}
		})
	}
}

// Startups stamped later than now are no crashes of a config adopted in the
// present: a real-time clock that ran ahead at boot and was corrected
// (issue 30). Six startups 100 years ahead once made a config on trial
// crash-looping at its first start.
func TestStartupsInTheFutureOfNow(t *testing.T) {
	const trial = 10 * time.Minute
	s := time.Second
	century := 100 * 365 * 24 * time.Hour
	ahead := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = century + time.Duration(i)*s
		}
		return out
	}
	join := func(parts ...[]time.Duration) []time.Time {
		var all []time.Duration
		for _, p := range parts {
			all = append(all, p...)
		}
		return stamps(all...)
	}
	for _, tc := range []struct {
		name string
		in   Input
		want bool
	}{
		{
			name: "pinned: adopted at t0, six boots 100 years ahead, one start after the correction",
			in:   Input{Startups: join([]time.Duration{0}, ahead(6), []time.Duration{5 * s}), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 2},
		},
		{
			name: "unpinned (a reload at t0): six boots 100 years ahead, one start after the correction",
			in:   Input{Startups: join([]time.Duration{-s}, ahead(6), []time.Duration{5 * s}), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 2},
		},
		{
			name: "a clock a few minutes ahead, corrected: no crashes either",
			in:   Input{Startups: stamps(2*time.Minute, 3*time.Minute), Since: t0, Now: at(1 * s), Trial: trial, Threshold: 1},
		},
		{
			name: "the crash restarts after the correction still count",
			in:   Input{Startups: join([]time.Duration{0}, ahead(6), []time.Duration{5 * s, 6 * s, 7 * s}), Since: t0, Now: at(7 * s), Trial: trial, Threshold: 2},
			want: true,
		},
		{
			name: "while the clock is still ahead, the restarts stamped then are crashes",
			in:   Input{Startups: join([]time.Duration{0}, ahead(3)), Since: t0, Now: at(century + 3*s), Trial: trial, Threshold: 2},
			want: true,
		},
		{
			name: "adopted while the clock was ahead: its restarts before the correction count",
			in:   Input{Startups: join([]time.Duration{-s}, ahead(4), []time.Duration{5 * s}), Since: at(century), Now: at(5 * s), Trial: trial, Threshold: 2},
			want: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CrashLooping(tc.in); got != tc.want {
				t.Errorf("CrashLooping(Startups: %v, Since: %v, Now: %v, Threshold: %d) = %v, want %v",
					tc.in.Startups, tc.in.Since, tc.in.Now, tc.in.Threshold, got, tc.want)
			}
		})
	}
}
