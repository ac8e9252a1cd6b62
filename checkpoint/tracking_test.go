package checkpoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
)

func trackingFile(s *checkpoint.Store, name string) string {
	return filepath.Join(s.TrackingDir(), name)
}

func TestBadMarksRoundTripAndIdentity(t *testing.T) {
	s, clk := openStore(t, t.TempDir())
	a := sourceFor(newConfigMap("uid-a", "1"))
	other := sourceFor(newConfigMap("uid-a", "1"))
	other.ConfigMap.KubeletConfigKey = "other"
	if err := s.MarkBad(a, checkpoint.BadMark{Reason: "failed to validate current (UID: uid-a)", Problem: "ValidateFailed"}); err != nil {
		t.Fatal(err)
	}
	m, err := s.BadMarks()
	if err != nil {
		t.Fatal(err)
	}
	key, mark, ok := m.Lookup(a)
	if !ok || key != "uid-a/1/kubelet" || !mark.Time.Equal(clk.Now()) || mark.Problem != "ValidateFailed" {
		t.Fatalf("Lookup = %q %+v %v", key, mark, ok)
	}
	if _, _, ok := m.Lookup(other); ok {
		t.Fatal("another payload key of the same ConfigMap is marked too")
	}
	if _, _, ok := m.Lookup(nil); ok {
		t.Fatal("the local config is marked")
	}
	if err := s.MarkBad(nil, checkpoint.BadMark{Reason: "x"}); err == nil {
		t.Fatal("marking the local config bad: want an error")
	}
	// The file is a checksummed envelope.
	data, err := os.ReadFile(trackingFile(s, checkpoint.BadConfigsFile))
	if err != nil || !strings.HasPrefix(string(data), `{"version":"dynconfig.io/bad-configs/v1","sha256":"`) {
		t.Fatalf("file = %q, %v", data, err)
	}
}

// Old marks ("<uid>/<rv>", no checksum) in a tracking dir an older version
// wrote are read once, at Open, match every payload key of their
// ConfigMap, and are rewritten in the current format.
func TestLegacyTrackingFilesAreMigrated(t *testing.T) {
	dir := t.TempDir()
	tracking := filepath.Join(dir, "tracking", "v1.37.2")
	if err := os.MkdirAll(tracking, 0o700); err != nil {
		t.Fatal(err)
	}
	legacyMarks := `{"uid-a/1": {"time": "2026-01-02T03:04:05Z", "reason": "crash loop detected with current (UID: uid-a)"}}`
	legacyStartups := `["2026-01-02T03:04:05Z","2026-01-02T03:04:06.5Z"]`
	if err := os.WriteFile(filepath.Join(tracking, checkpoint.BadConfigsFile), []byte(legacyMarks), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tracking, checkpoint.StartupsFile), []byte(legacyStartups), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := openStore(t, dir)
	m, err := s.BadMarks()
	if err != nil {
		t.Fatal(err)
	}
	for _, pk := range []string{"kubelet", "other"} {
		src := sourceFor(newConfigMap("uid-a", "1"))
		src.ConfigMap.KubeletConfigKey = pk
		if key, _, ok := m.Lookup(src); !ok || key != "uid-a/1" {
			t.Errorf("payload key %s: legacy mark found %v under %q", pk, ok, key)
		}
	}
	data, _ := os.ReadFile(trackingFile(s, checkpoint.BadConfigsFile))
	if !strings.Contains(string(data), `"version":"dynconfig.io/bad-configs/v1"`) {
		t.Errorf("marks not rewritten in the current format: %s", data)
	}
	ts, err := s.RecordStartup()
	if err != nil || len(ts) != 3 || !ts[1].Equal(time.Date(2026, 1, 2, 3, 4, 6, 5e8, time.UTC)) {
		t.Fatalf("RecordStartup over a legacy file = %v, %v", ts, err)
	}
	data, _ = os.ReadFile(trackingFile(s, checkpoint.StartupsFile))
	if !strings.Contains(string(data), `"version":"dynconfig.io/startups/v1"`) {
		t.Errorf("startups not written in the current format: %s", data)
	}
}

// Every single-byte change of a tracking file is detected: none is read as
// other valid content (the old format accepted 16 of 36 flips in the marks
// and 5 in the startups).
func TestTrackingFilesDetectEveryByteFlip(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	if err := s.MarkBad(sourceFor(newConfigMap("uid-a", "1")), checkpoint.BadMark{Reason: "r", Problem: "CrashLoop"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.RecordStartup(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		file   string
		decode func([]byte) error
	}{
		{checkpoint.BadConfigsFile, func(b []byte) error { _, _, err := checkpoint.DecodeBadMarks(b); return err }},
		{checkpoint.StartupsFile, func(b []byte) error { _, _, err := checkpoint.DecodeStartups(b); return err }},
	} {
		valid, err := os.ReadFile(trackingFile(s, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.decode(valid); err != nil {
			t.Fatalf("%s: valid file: %v", tc.file, err)
		}
		accepted := 0
		for i := range valid {
			for _, bit := range []byte{0x01, 0x04, 0x20} {
				b := append([]byte(nil), valid...)
				b[i] ^= bit
				if tc.decode(b) == nil {
					accepted++
					t.Errorf("%s: flip %#x at byte %d accepted: %q", tc.file, bit, i, b)
				}
			}
		}
		t.Logf("%s: %d bytes x 3 flips, %d accepted", tc.file, len(valid), accepted)
	}
}

func TestCorruptTrackingFilesAreQuarantinedNotLost(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	marks := trackingFile(s, checkpoint.BadConfigsFile)
	if err := os.WriteFile(marks, []byte(`{"torn`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.BadMarks()
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) || ce.Path != marks || ce.MovedTo == "" {
		t.Fatalf("BadMarks over a torn file: %v", err)
	}
	if got, _ := os.ReadFile(ce.MovedTo); string(got) != `{"torn` {
		t.Fatalf("quarantined copy = %q", got)
	}
	// A FIFO in place of the startups file: never blocks, moved aside, the
	// startup is recorded.
	startups := trackingFile(s, checkpoint.StartupsFile)
	if err := mkfifo(startups); err != nil {
		t.Fatal(err)
	}
	ts, err := s.RecordStartup()
	if !errors.Is(err, checkpoint.ErrCorrupt) || len(ts) != 1 {
		t.Fatalf("RecordStartup over a FIFO = %v, %v", ts, err)
	}
	if fi, err := os.Lstat(startups); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("startups file after the repair: %v, %v", fi, err)
	}
}

// The quarantine keeps the newest MaxQuarantined entries.
func TestQuarantineIsBounded(t *testing.T) {
	s, clk := openStore(t, t.TempDir())
	marks := trackingFile(s, checkpoint.BadConfigsFile)
	for i := 0; i < checkpoint.MaxQuarantined+5; i++ {
		clk.Step(time.Second)
		if err := os.WriteFile(marks, []byte(fmt.Sprintf("garbage %d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BadMarks(); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir(), checkpoint.QuarantineDir))
	if err != nil || len(entries) != checkpoint.MaxQuarantined {
		t.Fatalf("quarantine holds %d entries (%v), want %d", len(entries), err, checkpoint.MaxQuarantined)
	}
	newest, _ := os.ReadFile(filepath.Join(s.Dir(), checkpoint.QuarantineDir, entries[len(entries)-1].Name()))
	if want := fmt.Sprintf("garbage %d", checkpoint.MaxQuarantined+4); string(newest) != want {
		t.Fatalf("newest quarantined = %q, want %q", newest, want)
	}
}

// Marks of configs still on the node are never evicted; only marks of
// ConfigMaps that are gone are, oldest first, beyond the bound.
func TestBadMarkEvictionKeepsReferencedConfigs(t *testing.T) {
	s, clk := openStore(t, t.TempDir())
	kept := newConfigMap("uid-kept", "1")
	mustSave(t, s, kept)
	if err := s.SetCurrent(sourceFor(kept)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBad(sourceFor(kept), checkpoint.BadMark{Reason: "crash loop", Problem: "CrashLoop"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < checkpoint.MaxUnreferencedBadMarks+20; i++ {
		clk.Step(time.Second)
		gone := sourceFor(newConfigMap(types.UID(fmt.Sprintf("uid-gone-%03d", i)), "1"))
		if err := s.MarkBad(gone, checkpoint.BadMark{Reason: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := s.BadMarks()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := m.Lookup(sourceFor(kept)); !ok {
		t.Fatal("the mark of the current config was evicted")
	}
	if len(m) != checkpoint.MaxUnreferencedBadMarks+1 {
		t.Fatalf("%d marks, want %d unreferenced + 1 referenced", len(m), checkpoint.MaxUnreferencedBadMarks)
	}
	if _, _, ok := m.Lookup(sourceFor(newConfigMap("uid-gone-000", "1"))); ok {
		t.Fatal("the oldest unreferenced mark was kept")
	}
}

// ForgetBad removes matching marks and gives current a fresh trial.
func TestForgetBadClearsFirstRun(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	cm := newConfigMap("uid-a", "1")
	mustSave(t, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	if p, err := s.RecordFirstRun(); err != nil || p.FirstRun.IsZero() {
		t.Fatalf("RecordFirstRun = %+v, %v", p, err)
	}
	if err := s.MarkBad(sourceFor(cm), checkpoint.BadMark{Reason: "crash loop", Problem: "CrashLoop"}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBad(sourceFor(newConfigMap("uid-b", "1")), checkpoint.BadMark{Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	forgotten, err := s.ForgetBad("uid-a")
	if err != nil || !cmp.Equal(forgotten, []string{"uid-a/1/kubelet"}) {
		t.Fatalf("ForgetBad = %v, %v", forgotten, err)
	}
	p, err := s.Current()
	if err != nil || !p.FirstRun.IsZero() {
		t.Fatalf("current after forget-bad = %+v, %v; want no first run", p, err)
	}
	m, _ := s.BadMarks()
	if len(m) != 1 {
		t.Fatalf("marks left: %v", m)
	}
	if f, err := s.ForgetBad("uid-zzz"); err != nil || len(f) != 0 {
		t.Fatalf("forgetting nothing = %v, %v", f, err)
	}
}

// The lock cannot be stolen by deleting the lock file.
func TestLockSurvivesDeletedLockFile(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	if err := os.Remove(filepath.Join(dir, "lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.2"}); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("second Open after the lock file was deleted: %v, want ErrLocked", err)
	}
	s.Close()
	s2, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.2"})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

// Deleted sub-directories are recreated on every Open.
func TestOpenRecreatesMissingDirectories(t *testing.T) {
	for _, sub := range []string{"checkpoints", "meta", "tracking/v1.37.2", "tracking"} {
		t.Run(sub, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := openStore(t, dir)
			s.Close()
			if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
				t.Fatal(err)
			}
			s, _ = openStore(t, dir)
			defer s.Close()
			if _, err := s.Save(newConfigMap("uid-a", "1")); err != nil {
				t.Fatalf("Save after %s was deleted: %v", sub, err)
			}
			if _, err := s.RecordStartup(); err != nil {
				t.Fatalf("RecordStartup after %s was deleted: %v", sub, err)
			}
			if err := s.SetLastKnownGood(sourceFor(newConfigMap("uid-a", "1"))); err != nil {
				t.Fatalf("SetLastKnownGood after %s was deleted: %v", sub, err)
			}
		})
	}
}

func TestInspectReadsEverythingWithoutTheLock(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	cm := newConfigMap("uid-a", "1")
	mustSave(t, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordFirstRun(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordStartup(); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBad(sourceFor(newConfigMap("uid-b", "2")), checkpoint.BadMark{Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	// The Store stays open (locked): Inspect needs no lock.
	snap, err := checkpoint.Inspect(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Current.Err != nil || snap.Current.Pointer.FirstRun.IsZero() || snap.Current.Pointer.Source == nil {
		t.Fatalf("current = %+v", snap.Current)
	}
	c, ok := snap.Checkpoint(checkpoint.KeyOf(cm))
	if !ok || c.Err != nil || c.ConfigMap == nil {
		t.Fatalf("checkpoint = %+v, %v", c, ok)
	}
	tr, ok := snap.Version("v1.37.2")
	if !ok || len(tr.Startups) != 1 || len(tr.BadMarks) != 1 || tr.BadMarksErr != nil || tr.StartupsErr != nil {
		t.Fatalf("tracking = %+v, %v", tr, ok)
	}
	// Damage is reported per file, never followed or waited on.
	if err := mkfifoReplacing(filepath.Join(s.Dir(), "meta", "current")); err != nil {
		t.Fatal(err)
	}
	if err := mkfifoReplacing(trackingFile(s, checkpoint.BadConfigsFile)); err != nil {
		t.Fatal(err)
	}
	snap, err = checkpoint.Inspect(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(snap.Current.Err, checkpoint.ErrCorrupt) || !strings.Contains(snap.Current.Err.Error(), "meta/current") {
		t.Fatalf("current over a FIFO: %v", snap.Current.Err)
	}
	tr, _ = snap.Version("v1.37.2")
	if !errors.Is(tr.BadMarksErr, checkpoint.ErrCorrupt) {
		t.Fatalf("marks over a FIFO: %v", tr.BadMarksErr)
	}
	var _ = corev1.ConfigMap{}
}
