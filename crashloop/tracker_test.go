package crashloop

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

func newTracker(t testing.TB, c *testingclock.FakeClock) *Tracker {
	t.Helper()
	tr, err := New(Options{Dir: filepath.Join(t.TempDir(), "tracking", "v1"), Clock: c})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tr
}

// op is one step of a timeline.
type op int

const (
	opSetCurrent op = iota // the running process sets a new current config
	opStartup              // the component starts and records it
	opCheck                // the verdict for the current config
)

// row is one step of a timeline: step the fake clock, then do op. For
// opCheck, want is the expected verdict.
type row struct {
	step time.Duration
	op   op
	want bool
}

type timeline struct {
	name      string
	threshold int
	trial     time.Duration
	rows      []row
}

// thresholdTimeline sets current, then records n+1 startups one second
// apart, checking after each: n tolerated, the (n+1)th trips.
func thresholdTimeline(n int) timeline {
	tl := timeline{name: fmt.Sprintf("threshold %d: %d startups tolerated, %d trip", n, n, n+1), threshold: n, trial: time.Hour}
	tl.rows = append(tl.rows, row{op: opSetCurrent}, row{op: opCheck, want: false})
	for i := 1; i <= n+1; i++ {
		tl.rows = append(tl.rows, row{step: time.Second, op: opStartup}, row{op: opCheck, want: i > n})
	}
	return tl
}

func TestTimeline(t *testing.T) {
	timelines := []timeline{
		thresholdTimeline(0),
		thresholdTimeline(1),
		thresholdTimeline(3),
		thresholdTimeline(MaxThreshold),
		{
			name: "crash loop inside the trial is not one once the trial ended", threshold: 2, trial: 10 * time.Minute,
			rows: []row{
				{op: opSetCurrent},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: true},
				{step: 10*time.Minute - 3*time.Second, op: opCheck, want: true}, // exactly the trial
				{step: time.Nanosecond, op: opCheck, want: false},
			},
		},
		{
			name: "the same startups after the trial ended", threshold: 2, trial: 10 * time.Minute,
			rows: []row{
				{op: opSetCurrent},
				{step: 11 * time.Minute, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: false},
			},
		},
		{
			name: "startups before current was set do not count", threshold: 1, trial: time.Hour,
			rows: []row{
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opSetCurrent},
				{op: opCheck, want: false},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: false},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: true},
			},
		},
		{
			name: "setting a new current starts a new count", threshold: 1, trial: time.Hour,
			rows: []row{
				{op: opSetCurrent},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: true},
				{step: time.Second, op: opSetCurrent},
				{op: opCheck, want: false},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: false},
			},
		},
		{
			name: "startups stamped before a backward clock step still count", threshold: 1, trial: 10 * time.Minute,
			rows: []row{
				{op: opSetCurrent},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: -time.Hour, op: opCheck, want: true},
			},
		},
		{
			name: "startups stamped after a backward clock step, before the set time, do not count", threshold: 1, trial: 10 * time.Minute,
			rows: []row{
				{op: opSetCurrent},
				{step: -time.Hour, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: false},
			},
		},
		{
			name: "many restarts long before, a quiet adoption now", threshold: 3, trial: 10 * time.Minute,
			rows: []row{
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Second, op: opStartup},
				{step: time.Hour, op: opSetCurrent},
				{step: time.Second, op: opStartup},
				{op: opCheck, want: false},
			},
		},
	}
	for _, tl := range timelines {
		t.Run(tl.name, func(t *testing.T) {
			c := testingclock.NewFakeClock(t0)
			tr := newTracker(t, c)
			var setTime time.Time
			for i, r := range tl.rows {
				c.Step(r.step)
				switch r.op {
				case opSetCurrent:
					setTime = c.Now()
				case opStartup:
					if err := tr.RecordStartup(tl.threshold); err != nil {
						t.Fatalf("row %d: RecordStartup: %v", i, err)
					}
				case opCheck:
					got, err := tr.CrashLooping(setTime, tl.trial, tl.threshold)
					if err != nil {
						t.Fatalf("row %d: CrashLooping: %v", i, err)
					}
					if got != r.want {
						n, _ := tr.StartupsSince(setTime)
						t.Errorf("row %d at %v: CrashLooping = %v, want %v (set at %v, %d startups since)",
							i, c.Now().Sub(t0), got, r.want, setTime.Sub(t0), n)
					}
				}
			}
		})
	}
}

func TestRecordStartupKeepsNewest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		thresholds []int // one RecordStartup per entry, one second apart
		wantLen    int
	}{
		{name: "threshold 0 keeps 1", thresholds: repeat(0, 5), wantLen: 1},
		{name: "threshold 1 keeps 2", thresholds: repeat(1, 5), wantLen: 2},
		{name: "threshold 3 keeps 4", thresholds: repeat(3, 15), wantLen: 4},
		{name: "threshold 10 keeps 11", thresholds: repeat(MaxThreshold, 15), wantLen: 11},
		{name: "fewer startups than the bound are all kept", thresholds: repeat(MaxThreshold, 3), wantLen: 3},
		{name: "a smaller threshold shrinks the file", thresholds: append(repeat(MaxThreshold, 11), 2), wantLen: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testingclock.NewFakeClock(t0)
			tr := newTracker(t, c)
			var all []time.Time
			for i, th := range tc.thresholds {
				c.Step(time.Second)
				all = append(all, c.Now())
				if err := tr.RecordStartup(th); err != nil {
					t.Fatalf("RecordStartup #%d(%d): %v", i, th, err)
				}
			}
			got, err := tr.Startups()
			if err != nil {
				t.Fatalf("Startups: %v", err)
			}
			if diff := cmp.Diff(all[len(all)-tc.wantLen:], got); diff != "" {
				t.Errorf("Startups (-want +got):\n%s", diff)
			}
		})
	}
}

func repeat(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}

func TestRecordStartupTrimsByRecordingOrder(t *testing.T) {
	// After the clock steps back, the newest entry has the smallest
	// timestamp; it must be the one kept.
	c := testingclock.NewFakeClock(t0)
	tr := newTracker(t, c)
	var recorded []time.Time
	for _, step := range []time.Duration{time.Second, time.Second, -time.Hour, time.Second} {
		c.Step(step)
		recorded = append(recorded, c.Now())
		if err := tr.RecordStartup(1); err != nil {
			t.Fatalf("RecordStartup: %v", err)
		}
	}
	got, err := tr.Startups()
	if err != nil {
		t.Fatalf("Startups: %v", err)
	}
	if diff := cmp.Diff(recorded[2:], got); diff != "" {
		t.Errorf("Startups (-want +got):\n%s", diff)
	}
}

func TestInvalidThreshold(t *testing.T) {
	for _, th := range []int{-1, MaxThreshold + 1} {
		t.Run(fmt.Sprint(th), func(t *testing.T) {
			c := testingclock.NewFakeClock(t0)
			tr := newTracker(t, c)
			if err := tr.RecordStartup(1); err != nil {
				t.Fatalf("RecordStartup(1): %v", err)
			}
			before, err := os.ReadFile(tr.Path())
			if err != nil {
				t.Fatal(err)
			}
			c.Step(time.Second)
			err = tr.RecordStartup(th)
			var ce *CorruptError
			if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), tr.Path()) {
				t.Errorf("RecordStartup(%d) = %v, want a non-corrupt error naming %s", th, err, tr.Path())
			}
			after, err := os.ReadFile(tr.Path())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(before), string(after)); diff != "" {
				t.Errorf("file changed by a rejected RecordStartup (-before +after):\n%s", diff)
			}
			if _, err := tr.CrashLooping(t0, time.Hour, th); err == nil {
				t.Errorf("CrashLooping with threshold %d: no error", th)
			}
		})
	}
}

func TestFileFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		now  time.Time
		want string
	}{
		{name: "nanoseconds kept", now: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), want: `["2026-01-02T03:04:05.000000006Z"]` + "\n"},
		{name: "written in UTC", now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -90*60)), want: `["2026-01-02T04:34:05Z"]` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, testingclock.NewFakeClock(tc.now))
			if err := tr.RecordStartup(0); err != nil {
				t.Fatalf("RecordStartup: %v", err)
			}
			got, err := os.ReadFile(tr.Path())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("file content (-want +got):\n%s", diff)
			}
			fi, err := os.Stat(tr.Path())
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o600 {
				t.Errorf("file mode = %v, want 0600", fi.Mode())
			}
			di, err := os.Stat(filepath.Dir(tr.Path()))
			if err != nil {
				t.Fatal(err)
			}
			if di.Mode().Perm() != 0o700 {
				t.Errorf("created dir mode = %v, want 0700", di.Mode().Perm())
			}
		})
	}
}

func TestReadAcceptsRFC3339(t *testing.T) {
	tr := newTracker(t, testingclock.NewFakeClock(t0))
	content := `[ "2026-03-01T12:00:01Z", "2026-03-01T13:00:02+01:00",` + "\n" +
		`"2026-03-01T12:00:03.5-00:00", "2026-03-01T12:00:04.123456789Z" ]`
	if err := os.WriteFile(tr.Path(), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []time.Time{at(1 * time.Second), at(2 * time.Second), at(3500 * time.Millisecond), at(4*time.Second + 123456789)}
	got, err := tr.Startups()
	if err != nil {
		t.Fatalf("Startups: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Startups (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		since time.Time
		want  int
	}{
		{since: t0, want: 4},
		{since: at(time.Second), want: 3},
		{since: at(3500 * time.Millisecond), want: 1},
		{since: at(5 * time.Second), want: 0},
	} {
		n, err := tr.StartupsSince(tc.since)
		if err != nil || n != tc.want {
			t.Errorf("StartupsSince(t0+%v) = %d, %v; want %d, nil", tc.since.Sub(t0), n, err, tc.want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Run("Dir is required", func(t *testing.T) {
		_, err := New(Options{})
		if err == nil || !strings.Contains(err.Error(), "Options.Dir") {
			t.Errorf("New(Options{}) = %v, want an error naming Options.Dir", err)
		}
	})
	t.Run("Dir is a file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := New(Options{Dir: p})
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("New with a file as Dir = %v, want an error naming %s", err, p)
		}
	})
	t.Run("removes only its own stale temporary files", func(t *testing.T) {
		dir := t.TempDir()
		own := atomicfile.TempPrefix + FileName + "-123"
		others := []string{atomicfile.TempPrefix + "bad-configs.json-456", "bad-configs.json", FileName}
		for _, name := range append([]string{own}, others...) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("[]"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tr, err := New(Options{Dir: dir})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if tr.Path() != filepath.Join(dir, FileName) {
			t.Errorf("Path() = %s, want %s", tr.Path(), filepath.Join(dir, FileName))
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		want := []string{atomicfile.TempPrefix + "bad-configs.json-456", "bad-configs.json", FileName}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("dir entries after New (-want +got):\n%s", diff)
		}
	})
	t.Run("default clock is the real clock", func(t *testing.T) {
		tr, err := New(Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		before := time.Now()
		if err := tr.RecordStartup(0); err != nil {
			t.Fatalf("RecordStartup: %v", err)
		}
		after := time.Now()
		got, err := tr.Startups()
		if err != nil || len(got) != 1 || got[0].Before(before.Round(0)) || got[0].After(after.Round(0)) {
			t.Errorf("Startups = %v, %v; want one time within [%v, %v]", got, err, before, after)
		}
	})
}

// realFile returns the content of a full startups file written by a Tracker.
func realFile(t *testing.T) []byte {
	t.Helper()
	c := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC))
	tr := newTracker(t, c)
	for range MaxThreshold + 1 {
		c.Step(1500 * time.Millisecond)
		if err := tr.RecordStartup(MaxThreshold); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(tr.Path())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeContent(content []byte) func(string) error {
	return func(p string) error { return os.WriteFile(p, content, 0o600) }
}

func TestCorruptFile(t *testing.T) {
	type corruptCase struct {
		name  string
		setup func(path string) error
	}
	cases := []corruptCase{
		{name: "garbage", setup: writeContent([]byte("\x00\xffnot json at all"))},
		{name: "empty", setup: writeContent(nil)},
		{name: "whitespace", setup: writeContent([]byte(" \n\t"))},
		{name: "object", setup: writeContent([]byte("{}"))},
		{name: "numbers", setup: writeContent([]byte("[1,2]"))},
		{name: "null", setup: writeContent([]byte("null"))},
		{name: "string", setup: writeContent([]byte(`"2026-03-01T12:00:01Z"`))},
		{name: "bad timestamp", setup: writeContent([]byte(`["2026-03-01T12:00:01Z","yesterday"]`))},
		{name: "date only", setup: writeContent([]byte(`["2026-03-01"]`))},
		{name: "trailing comma", setup: writeContent([]byte(`["2026-03-01T12:00:01Z",]`))},
		{name: "trailing data", setup: writeContent([]byte(`["2026-03-01T12:00:01Z"] []`))},
		{name: "too large", setup: writeContent([]byte("[" + strings.Repeat(`"2026-03-01T12:00:01Z",`, maxFileSize/20) + `"2026-03-01T12:00:01Z"]`))},
		{name: "empty directory", setup: func(p string) error { return os.Mkdir(p, 0o700) }},
		{name: "fifo", setup: func(p string) error { return syscall.Mkfifo(p, 0o600) }},
	}
	real := realFile(t)
	valid := bytes.TrimRight(real, "\n")
	if _, err := decodeStartups(valid); err != nil {
		t.Fatalf("the untruncated file does not decode: %v", err)
	}
	for i := range len(valid) {
		cases = append(cases, corruptCase{name: fmt.Sprintf("truncated at %d", i), setup: writeContent(valid[:i])})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testingclock.NewFakeClock(t0)
			tr := newTracker(t, c)
			if err := tc.setup(tr.Path()); err != nil {
				t.Fatal(err)
			}
			checkCorrupt := func(what string, err error) {
				t.Helper()
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("%s: error %v, want a *CorruptError", what, err)
				}
				if ce.Path != tr.Path() || !strings.Contains(err.Error(), tr.Path()) {
					t.Errorf("%s: error %q does not name %s", what, err, tr.Path())
				}
			}

			got, err := tr.Startups()
			checkCorrupt("Startups", err)
			if got != nil {
				t.Errorf("Startups = %v, want none", got)
			}
			n, err := tr.StartupsSince(time.Time{})
			checkCorrupt("StartupsSince", err)
			if n != 0 {
				t.Errorf("StartupsSince = %d, want 0", n)
			}
			loop, err := tr.CrashLooping(at(-time.Second), time.Hour, 0)
			checkCorrupt("CrashLooping", err)
			if loop {
				t.Errorf("CrashLooping = true on a corrupt file")
			}

			c.Step(time.Second)
			checkCorrupt("RecordStartup", tr.RecordStartup(MaxThreshold))
			got, err = tr.Startups()
			if err != nil {
				t.Fatalf("Startups after RecordStartup: %v", err)
			}
			if diff := cmp.Diff([]time.Time{c.Now()}, got); diff != "" {
				t.Errorf("Startups after RecordStartup (-want +got):\n%s", diff)
			}
			fi, err := os.Lstat(tr.Path())
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("after RecordStartup: %v, %v; want a regular file", fi, err)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	c := testingclock.NewFakeClock(t0)
	tr := newTracker(t, c)
	if got, err := tr.Startups(); err != nil || got != nil {
		t.Errorf("Startups = %v, %v; want none, nil", got, err)
	}
	if n, err := tr.StartupsSince(time.Time{}); err != nil || n != 0 {
		t.Errorf("StartupsSince = %d, %v; want 0, nil", n, err)
	}
	if loop, err := tr.CrashLooping(at(-time.Second), time.Hour, 0); err != nil || loop {
		t.Errorf("CrashLooping = %v, %v; want false, nil", loop, err)
	}
	if err := tr.RecordStartup(0); err != nil {
		t.Errorf("RecordStartup: %v", err)
	}
	if got, err := tr.Startups(); err != nil || len(got) != 1 {
		t.Errorf("Startups after RecordStartup = %v, %v; want one", got, err)
	}
}

func TestNonEmptyDirectoryInPlace(t *testing.T) {
	c := testingclock.NewFakeClock(t0)
	tr := newTracker(t, c)
	keep := filepath.Join(tr.Path(), "keep")
	if err := os.MkdirAll(tr.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := tr.RecordStartup(0)
	var ce *CorruptError
	if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), tr.Path()) {
		t.Errorf("RecordStartup = %v, want a non-corrupt error naming %s (nothing recorded)", err, tr.Path())
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("content of the directory was touched: %v", err)
	}
}

func TestRecordStartupConcurrent(t *testing.T) {
	const goroutines = 8
	c := testingclock.NewFakeClock(t0)
	tr := newTracker(t, c)
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	for i := range goroutines {
		wg.Go(func() { errs[i] = tr.RecordStartup(MaxThreshold) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("RecordStartup: %v", err)
	}
	got, err := tr.Startups()
	if err != nil || len(got) != goroutines {
		t.Errorf("Startups = %d entries, %v; want %d (no lost update)", len(got), err, goroutines)
	}
}

func TestCorruptErrorUnwraps(t *testing.T) {
	tr := newTracker(t, testingclock.NewFakeClock(t0))
	if err := os.WriteFile(tr.Path(), []byte(`["x"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := tr.Startups()
	var pe *time.ParseError
	if !errors.As(err, &pe) {
		t.Errorf("Startups error %v does not unwrap to the *time.ParseError", err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Startups error %v claims the file does not exist", err)
	}
}
