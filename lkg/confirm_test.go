package lkg

import (
	"errors"
	"testing"
	"time"
)

func TestConfirmDeadline(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	cur, lkg := src("cur", "1"), src("lkg", "7")
	const within = 5 * time.Minute
	base := func(mod func(*ConfirmInput)) ConfirmInput {
		in := ConfirmInput{Current: cur, LastKnownGood: lkg, ConfirmWithin: within, FirstRun: t0, Now: t0.Add(time.Minute)}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	for _, tc := range []struct {
		name string
		in   ConfirmInput
		want ConfirmVerdict
	}{
		{"no deadline configured", base(func(in *ConfirmInput) { in.ConfirmWithin = 0 }), ConfirmVerdict{}},
		{"local current", base(func(in *ConfirmInput) { in.Current = nil }), ConfirmVerdict{}},
		{"current is last-known-good", base(func(in *ConfirmInput) { in.LastKnownGood = cur; in.Now = t0.Add(time.Hour) }), ConfirmVerdict{}},
		{"never ran", base(func(in *ConfirmInput) { in.FirstRun = time.Time{}; in.Now = t0.Add(time.Hour) }), ConfirmVerdict{}},
		{"confirmed, long past the deadline", base(func(in *ConfirmInput) { in.Confirmed = true; in.Now = t0.Add(time.Hour) }), ConfirmVerdict{}},
		{"pending: the rest of the deadline", base(nil), ConfirmVerdict{Pending: true, After: 4 * time.Minute}},
		{"at the deadline: expired", base(func(in *ConfirmInput) { in.Now = t0.Add(within) }), ConfirmVerdict{Expired: true}},
		{"time down counts (a process started after the deadline)", base(func(in *ConfirmInput) {
			in.Now = t0.Add(time.Hour)
			in.Running = Running{Source: cur, Since: in.Now}
		}), ConfirmVerdict{Expired: true}},
		{"an anchor replaces the first run", base(func(in *ConfirmInput) { in.Anchor = t0.Add(-time.Hour); in.Now = t0.Add(time.Minute) }),
			ConfirmVerdict{Expired: true}},
		{"clock stepped back before the first run: re-anchor now, the whole deadline from now",
			base(func(in *ConfirmInput) { in.Now = t0.Add(-24 * time.Hour) }),
			ConfirmVerdict{Pending: true, After: within, Anchor: t0.Add(-24 * time.Hour)}},
		{"clock stepped back before the anchor: re-anchor again",
			base(func(in *ConfirmInput) { in.Anchor = t0.Add(-time.Hour); in.Now = t0.Add(-2 * time.Hour) }),
			ConfirmVerdict{Pending: true, After: within, Anchor: t0.Add(-2 * time.Hour)}},
		{"clock stepped back while running: this process's uptime still counts",
			base(func(in *ConfirmInput) {
				in.Running = Running{Source: cur, Since: t0.Add(time.Hour)} // read before the step
				in.Now = t0.Add(-time.Hour)
			}),
			// With a wall clock alone (no monotonic reading, as here), the
			// step makes the uptime negative: re-anchored, never expired at
			// once, never waiting for the clock to catch up.
			ConfirmVerdict{Pending: true, After: within, Anchor: t0.Add(-time.Hour)}},
		{"uptime in this process says more than the wall clock", base(func(in *ConfirmInput) {
			in.Running = Running{Source: cur, Since: t0.Add(-10 * time.Minute)}
		}), ConfirmVerdict{Expired: true}},
		{"uptime on another config does not count", base(func(in *ConfirmInput) {
			in.Running = Running{Source: lkg, Since: t0.Add(-10 * time.Minute)}
		}), ConfirmVerdict{Pending: true, After: 4 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConfirmDeadline(tc.in); got != tc.want {
				t.Errorf("ConfirmDeadline = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestConfirmDeadlineMonotonic: with the real clock, a process's uptime is
// measured on the monotonic clock, so a wall-clock step back while it runs
// does not postpone the deadline.
func TestConfirmDeadlineMonotonic(t *testing.T) {
	cur := src("cur", "1")
	since := time.Now()
	// The first run was recorded an hour "later" by the wall clock than
	// this process's start (the clock was stepped back an hour since): the
	// wall clock says the deadline has not even started, the process's
	// uptime (6 minutes, monotonic: both readings carry one) says it
	// passed.
	v := ConfirmDeadline(ConfirmInput{Current: cur, ConfirmWithin: 5 * time.Minute, FirstRun: since.Round(0).Add(time.Hour),
		Running: Running{Source: cur, Since: since}, Now: since.Add(6 * time.Minute)})
	if !v.Expired {
		t.Fatalf("verdict %+v, want Expired after 6m of uptime", v)
	}
}

func TestDecideNotConfirmed(t *testing.T) {
	cur, lkg := src("cur", "1"), src("lkg", "7")
	late := errors.New("no health confirmation within 5m0s of its first run")
	d, err := Decide(Input{Current: cur, LastKnownGood: lkg, NotConfirmed: late,
		LoadCurrent: okLoader, LoadLastKnownGood: okLoader})
	if err != nil {
		t.Fatal(err)
	}
	if d.Problem != ProblemNotConfirmed || !d.MarkBad || !Same(d.Run, lkg) || !d.UsingLastKnownGood || !errors.Is(d.Cause, late) {
		t.Errorf("Decide = %+v, want NotConfirmed, marked bad, running last-known-good", d)
	}
	// A last-known-good current has no deadline to miss.
	d, _ = Decide(Input{Current: cur, LastKnownGood: cur, NotConfirmed: late, LoadCurrent: okLoader, LoadLastKnownGood: okLoader})
	if d.Problem != ProblemNone || !Same(d.Run, cur) {
		t.Errorf("Decide with current last-known-good = %+v, want current", d)
	}
	// A decode failure is the more certain verdict.
	d, _ = Decide(Input{Current: cur, LastKnownGood: lkg, NotConfirmed: late,
		LoadCurrent: func() error { return &ConfigError{Stage: StageDecode, Err: errors.New("x")} }, LoadLastKnownGood: okLoader})
	if d.Problem != ProblemDecodeFailed {
		t.Errorf("Decide = %+v, want DecodeFailed first", d)
	}
	if ProblemNotConfirmed.String() != "NotConfirmed" {
		t.Errorf("String = %q", ProblemNotConfirmed.String())
	}
}

func okLoader() error { return nil }
