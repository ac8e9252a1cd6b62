package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// TestConfirmation: the record belongs to one run of current (config and
// first run); a reassignment or forget-bad's fresh trial leaves a record
// that no longer counts; a record is never written for a run that is not
// current's.
func TestConfirmation(t *testing.T) {
	dir := t.TempDir()
	s, clk := openStore(t, dir)
	cmA, cmB := newConfigMap("uid-a", "1"), newConfigMap("uid-b", "1")
	mustSave(t, s, cmA)
	mustSave(t, s, cmB)
	if c, err := s.Confirmation(); err != nil || c != (checkpoint.Confirmation{}) {
		t.Fatalf("no record: %+v, %v", c, err)
	}
	if err := s.SetCurrent(sourceFor(cmA)); err != nil {
		t.Fatal(err)
	}
	notRun, _ := s.Current()
	if _, err := s.ConfirmCurrent(notRun, clk.Now()); err == nil {
		t.Fatal("confirmed a config that never ran")
	}
	runA, err := s.RecordFirstRun()
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	anchored, err := s.AnchorCurrent(runA, clk.Now())
	if err != nil || !anchored.For(runA) || !anchored.Anchor.Equal(clk.Now()) || !anchored.Confirmed.IsZero() {
		t.Fatalf("AnchorCurrent = %+v, %v", anchored, err)
	}
	clk.Step(time.Minute)
	confirmedAt := clk.Now()
	c, err := s.ConfirmCurrent(runA, confirmedAt)
	if err != nil || !c.For(runA) || !c.Confirmed.Equal(confirmedAt) || !c.Anchor.Equal(anchored.Anchor) {
		t.Fatalf("ConfirmCurrent = %+v, %v; want the anchor kept and confirmed at %v", c, err, confirmedAt)
	}
	// A second confirmation keeps the first time.
	clk.Step(time.Minute)
	if c2, err := s.ConfirmCurrent(runA, clk.Now()); err != nil || !c2.Confirmed.Equal(confirmedAt) {
		t.Fatalf("second ConfirmCurrent = %+v, %v", c2, err)
	}
	// Durable: another Store reads it.
	s.Close()
	s, clk = openStore(t, dir)
	clk.SetTime(confirmedAt.Add(time.Minute))
	if got, err := s.Confirmation(); err != nil || !got.For(runA) || !got.Confirmed.Equal(confirmedAt) {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
	if got, err := checkpoint.InspectConfirmation(dir); err != nil || !got.For(runA) {
		t.Fatalf("InspectConfirmation: %+v, %v", got, err)
	}
	// forget-bad clears the first run: the next run has no confirmation.
	if err := s.MarkBad(sourceFor(cmA), checkpoint.BadMark{Reason: "crash loop detected", Problem: checkpoint.CrashLoopProblem}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetBad(checkpoint.MarkKey(sourceFor(cmA))); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour) // the start after the repair
	fresh, _ := s.RecordFirstRun()
	if got, _ := s.Confirmation(); got.For(fresh) {
		t.Fatalf("the run after forget-bad inherits the confirmation %+v", got)
	}
	// A stale run cannot be confirmed; current's run can.
	if _, err := s.ConfirmCurrent(runA, clk.Now()); err == nil {
		t.Fatal("confirmed a run that is not current's any more")
	}
	// Reassigned: the record of a's run is no record of b's.
	if err := s.SetCurrent(sourceFor(cmB)); err != nil {
		t.Fatal(err)
	}
	runB, _ := s.RecordFirstRun()
	if got, _ := s.Confirmation(); got.For(runB) {
		t.Fatalf("b inherits a's record %+v", got)
	}
}

// TestConfirmationDamage: a corrupt record is quarantined and reads as
// none; a record of a newer format is left in place and said; an
// unreadable one is an error, never "repaired".
func TestConfirmationDamage(t *testing.T) {
	dir := t.TempDir()
	s, clk := openStore(t, dir)
	defer s.Close()
	cm := newConfigMap("uid-a", "1")
	mustSave(t, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	run, _ := s.RecordFirstRun()
	path := filepath.Join(dir, "meta", checkpoint.ConfirmationFile)

	for _, bad := range []string{"", "{\"torn", `{"config":"uid-a/1/kubelet","firstRun":"2026-01-01T00:00:00Z"}`,
		string(envelopeOf("dynconfig.io/confirmation/v1", "confirmation", `{"config":"../x/1","firstRun":"2026-01-01T00:00:00Z"}`)),
		string(envelopeOf("dynconfig.io/confirmation/v1", "confirmation", `{"config":"uid-a/1"}`))} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := s.Confirmation()
		if !errors.Is(err, checkpoint.ErrCorrupt) || c != (checkpoint.Confirmation{}) {
			t.Fatalf("%q: %+v, %v; want none and ErrCorrupt", bad, c, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%q: the corrupt record is still in place (%v)", bad, err)
		}
	}
	// Damage found while recording: moved aside, the record written.
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ConfirmCurrent(run, clk.Now()); err != nil || !c.For(run) {
		t.Fatalf("ConfirmCurrent over a corrupt record: %+v, %v", c, err)
	}

	newer := envelopeOf("dynconfig.io/confirmation/v2", "confirmation", `{"whatever":1}`)
	if err := os.WriteFile(path, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Confirmation(); !errors.Is(err, checkpoint.ErrNewerFormat) || errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("newer format: %v, want ErrNewerFormat", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a record of a newer format was moved: %v", err)
	}

	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Confirmation(); err == nil || errors.Is(err, checkpoint.ErrCorrupt) {
			t.Fatalf("unreadable record: %v, want an error that is not damage", err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("an unreadable record was moved: %v", err)
		}
	}
}

// FuzzDecodeConfirmation: any bytes read as a record, or as damage; never a
// panic, and a record read has a valid key and a first run.
func FuzzDecodeConfirmation(f *testing.F) {
	f.Add([]byte(`{"config":"uid-a/1/kubelet","firstRun":"2026-01-01T00:00:00Z","confirmed":"2026-01-01T00:01:00Z"}`))
	f.Add([]byte(`{"config":"uid-a/1","firstRun":"2026-01-01T00:00:00Z","anchor":"2025-01-01T00:00:00Z","extra":[1]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"config":"","firstRun":"0001-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "meta"), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, in := range [][]byte{data, envelopeOf("dynconfig.io/confirmation/v1", "confirmation", string(data))} {
			if err := os.WriteFile(filepath.Join(dir, "meta", checkpoint.ConfirmationFile), in, 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := checkpoint.InspectConfirmation(dir)
			if err != nil {
				if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrNewerFormat) {
					t.Fatalf("error that is neither damage nor a newer format: %v", err)
				}
				continue
			}
			if c.Config == "" || c.FirstRun.IsZero() {
				t.Fatalf("read a record without a config or a first run: %+v", c)
			}
		}
	})
}
