package crashloop

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// BenchmarkRecordStartup measures one durable append to a full file (the
// steady state with the largest threshold): read, decode, trim, encode, and
// an atomic write with two fsyncs.
func BenchmarkRecordStartup(b *testing.B) {
	c := testingclock.NewFakeClock(t0)
	tr := newTracker(b, c)
	for range MaxThreshold + 1 {
		c.Step(time.Second)
		if err := tr.RecordStartup(MaxThreshold); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Step(time.Second)
		if err := tr.RecordStartup(MaxThreshold); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCrashLooping measures the pure verdict over a full file's worth of
// startups.
func BenchmarkCrashLooping(b *testing.B) {
	in := Input{CurrentSetTime: t0, Now: at(time.Minute), Trial: 10 * time.Minute, Threshold: MaxThreshold}
	for i := range MaxThreshold + 1 {
		in.Startups = append(in.Startups, at(time.Duration(i+1)*time.Second))
	}
	b.ReportAllocs()
	for b.Loop() {
		if !CrashLooping(in) {
			b.Fatal("want a crash loop")
		}
	}
}

// BenchmarkTrackerCrashLooping measures the verdict including reading and
// decoding a full file.
func BenchmarkTrackerCrashLooping(b *testing.B) {
	c := testingclock.NewFakeClock(t0)
	tr := newTracker(b, c)
	for range MaxThreshold + 1 {
		c.Step(time.Second)
		if err := tr.RecordStartup(MaxThreshold); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		loop, err := tr.CrashLooping(t0, 10*time.Minute, MaxThreshold)
		if err != nil || !loop {
			b.Fatal(loop, err)
		}
	}
}
