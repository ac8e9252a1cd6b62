package lkg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newTracker(t *testing.T, max int) (*Tracker, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(t0)
	tr, err := NewTracker(TrackerOptions{Dir: filepath.Join(t.TempDir(), "tracking", "v1"), Clock: clk, MaxEntries: max})
	if err != nil {
		t.Fatal(err)
	}
	return tr, clk
}

func TestTrackerRoundTrip(t *testing.T) {
	tr, clk := newTracker(t, 0)
	if m, err := tr.Entries(); err != nil || len(m) != 0 {
		t.Fatalf("fresh tracker: %v, %v", m, err)
	}
	if err := tr.MarkBad("uid-a/1", "failed to validate current (UID: uid-a)"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(t0.Add(time.Minute))
	if err := tr.MarkBad("uid-b/9", "crash loop detected with current (UID: uid-b)"); err != nil {
		t.Fatal(err)
	}
	want := map[string]Entry{
		"uid-a/1": {Time: t0, Reason: "failed to validate current (UID: uid-a)"},
		"uid-b/9": {Time: t0.Add(time.Minute), Reason: "crash loop detected with current (UID: uid-b)"},
	}
	got, err := tr.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
	e, ok, err := tr.Entry("uid-b/9")
	if err != nil || !ok || e.Reason != want["uid-b/9"].Reason {
		t.Fatalf("Entry = %v %v %v", e, ok, err)
	}
	if _, ok, _ := tr.Entry("uid-b/10"); ok {
		t.Fatal("another resourceVersion of a bad UID must not be bad")
	}
	if err := tr.Forget("uid-a/1"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Forget("never-marked/1"); err != nil {
		t.Fatalf("Forget of an unmarked key: %v", err)
	}
	if _, ok, _ := tr.Entry("uid-a/1"); ok {
		t.Fatal("forgotten mark still there")
	}
	fi, err := os.Stat(tr.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// The file is the documented format, readable by humans and tools.
	data, _ := os.ReadFile(tr.Path())
	wantFile := "{\n  \"uid-b/9\": {\n    \"time\": \"2026-11-22T10:01:00Z\",\n    \"reason\": \"crash loop detected with current (UID: uid-b)\"\n  }\n}\n"
	if string(data) != wantFile {
		t.Errorf("file:\n%s\nwant:\n%s", data, wantFile)
	}
}

func TestTrackerBounded(t *testing.T) {
	tr, clk := newTracker(t, 3)
	for i := 0; i < 5; i++ {
		clk.SetTime(t0.Add(time.Duration(i) * time.Second))
		if err := tr.MarkBad(fmt.Sprintf("u%d/1", i), "r"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := tr.Entries()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	want := map[string]bool{"u2/1": true, "u3/1": true, "u4/1": true}
	if len(got) != 3 {
		t.Fatalf("kept %v, want the newest 3", keys)
	}
	for k := range got {
		if !want[k] {
			t.Errorf("kept %s, want the newest 3 (%v)", k, keys)
		}
	}
}

func TestTrackerRejectsBadKeys(t *testing.T) {
	tr, _ := newTracker(t, 0)
	for _, k := range []string{"", "uid", "/1", "uid/", "a/b/c"} {
		if err := tr.MarkBad(k, "r"); err == nil {
			t.Errorf("MarkBad(%q): want error", k)
		}
	}
}

func TestTrackerOptions(t *testing.T) {
	if _, err := NewTracker(TrackerOptions{}); err == nil {
		t.Error("empty Dir: want error")
	}
	if _, err := NewTracker(TrackerOptions{Dir: t.TempDir(), MaxEntries: -1}); err == nil {
		t.Error("negative MaxEntries: want error")
	}
}

// TestTrackerCorruption: a damaged file never panics, reads as empty with a
// *CorruptError naming the file, and the next MarkBad leaves a valid file.
func TestTrackerCorruption(t *testing.T) {
	good, err := EncodeBadConfigs(map[string]Entry{
		"uid-a/1": {Time: t0, Reason: "failed to validate current (UID: uid-a)"},
		"uid-b/2": {Time: t0, Reason: "r"},
	})
	if err != nil {
		t.Fatal(err)
	}
	type damage struct {
		name string
		make func(path string) error
	}
	var cases []damage
	for i := 0; i < len(good)-1; i++ { // every strict prefix; the last byte is a newline
		n := i
		cases = append(cases, damage{fmt.Sprintf("truncated at %d", n), func(p string) error { return os.WriteFile(p, good[:n], 0o600) }})
	}
	for _, c := range []struct{ name, content string }{
		{"garbage", "\x00\xff\x13garbage"},
		{"list", `["uid-a/1"]`},
		{"null", "null"},
		{"entry without time", `{"uid-a/1": {"reason": "x"}}`},
		{"bad key", `{"nokey": {"time": "2026-11-22T10:00:00Z", "reason": "x"}}`},
		{"unknown field", `{"uid-a/1": {"time": "2026-11-22T10:00:00Z", "reason": "x", "extra": 1}}`},
		{"trailing data", string(good) + "}"},
		{"bad time", `{"uid-a/1": {"time": "yesterday", "reason": "x"}}`},
	} {
		content := c.content
		cases = append(cases, damage{c.name, func(p string) error { return os.WriteFile(p, []byte(content), 0o600) }})
	}
	cases = append(cases, damage{"directory", func(p string) error { return os.Mkdir(p, 0o700) }})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := newTracker(t, 0)
			if err := tc.make(tr.Path()); err != nil {
				t.Fatal(err)
			}
			m, err := tr.Entries()
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != tr.Path() {
				t.Fatalf("Entries error = %v, want *CorruptError for %s", err, tr.Path())
			}
			if len(m) != 0 {
				t.Fatalf("corrupt file read as %v, want empty", m)
			}
			if tc.name == "directory" {
				if err := tr.MarkBad("uid-c/3", "r"); err == nil {
					t.Fatal("MarkBad over a directory: want error")
				}
				return
			}
			err = tr.MarkBad("uid-c/3", "r")
			if !errors.As(err, &ce) {
				t.Fatalf("MarkBad over a corrupt file = %v, want the *CorruptError reported", err)
			}
			m, err = tr.Entries()
			if err != nil || len(m) != 1 {
				t.Fatalf("after MarkBad: %v, %v; want one valid mark", m, err)
			}
		})
	}
}

// TestTimeline walks a component through restarts: the tracker persists the
// marks between Decide calls the way Bootstrap uses them.
func TestTimeline(t *testing.T) {
	tr, clk := newTracker(t, 0)
	cur, lkg := src("c", "1"), src("l", "1")
	validateErr := &ConfigError{Stage: StageValidate, Err: errors.New("bad")}
	type step struct {
		advance     time.Duration
		forget      bool
		curErr      error
		crashLoop   bool
		lkgLoop     bool
		wantProblem Problem
		wantRunLKG  bool
		wantDeadEnd bool
	}
	steps := []step{
		{curErr: validateErr, wantProblem: ProblemValidateFailed, wantRunLKG: true},
		{advance: time.Minute, wantProblem: ProblemMarkedBad, wantRunLKG: true},
		{advance: time.Minute, forget: true, wantProblem: ProblemNone},
		{advance: time.Minute, crashLoop: true, wantProblem: ProblemCrashLoop, wantRunLKG: true},
		{advance: time.Minute, lkgLoop: true, wantProblem: ProblemMarkedBad, wantRunLKG: true, wantDeadEnd: true},
		{advance: time.Minute, forget: true, wantProblem: ProblemNone},
	}
	for i, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		if s.forget {
			if err := tr.Forget(Key(cur)); err != nil {
				t.Fatal(err)
			}
		}
		in := Input{
			Current: cur, LastKnownGood: lkg,
			LoadCurrent:               func() error { return s.curErr },
			LoadLastKnownGood:         func() error { return nil },
			CurrentCrashLooping:       s.crashLoop,
			LastKnownGoodCrashLooping: s.lkgLoop,
		}
		if e, ok, err := tr.Entry(Key(cur)); err != nil {
			t.Fatal(err)
		} else if ok {
			in.CurrentBad = &e
		}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if d.Problem != s.wantProblem || (d.Run == lkg) != s.wantRunLKG || d.DeadEnd != s.wantDeadEnd {
			t.Fatalf("step %d: problem %v run-lkg %v dead-end %v; want %v %v %v",
				i, d.Problem, d.Run == lkg, d.DeadEnd, s.wantProblem, s.wantRunLKG, s.wantDeadEnd)
		}
		if d.MarkBad {
			if err := tr.MarkBad(Key(cur), d.Problem.String()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func FuzzDecodeBadConfigs(f *testing.F) {
	good, _ := EncodeBadConfigs(map[string]Entry{"u/1": {Time: t0, Reason: "r"}})
	for _, s := range []string{string(good), "{}", "null", "[]", `{"u/1":null}`, `{"u/1":{"time":"2026-11-22T10:00:00Z"}}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeBadConfigs(data)
		if err != nil {
			return
		}
		again, err := EncodeBadConfigs(m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		m2, err := DecodeBadConfigs(again)
		if err != nil {
			t.Fatalf("decode of re-encoded: %v", err)
		}
		if diff := cmp.Diff(m, m2); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
