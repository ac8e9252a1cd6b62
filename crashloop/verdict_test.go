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
			name: "order of startups is irrelevant",
			in:   Input{Startups: stamps(4*s, -1*s, 2*s, 1*s), Since: t0, Now: at(5 * s), Trial: trial, Threshold: 2},
			want: true,
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
			name: "startups in the future of now are counted",
			in:   Input{Startups: stamps(2*time.Minute, 3*time.Minute), Since: t0, Now: at(1 * s), Trial: trial, Threshold: 1},
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
