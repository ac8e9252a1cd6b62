package checkpoint_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	statedamage "github.com/dynconfig/dynconfig/internal/damage"
)

// bothLayouts saves cm in the flat layout and copies it to the nested
// layout of older versions, and returns both paths.
func bothLayouts(t *testing.T, dir string, s *checkpoint.Store) (flat, nested string) {
	t.Helper()
	cm := newConfigMap("uid-both", "7")
	mustSave(t, s, cm)
	flat = checkpointFile(dir, "uid-both", "7")
	data, err := os.ReadFile(flat)
	if err != nil {
		t.Fatal(err)
	}
	nested = filepath.Join(dir, "checkpoints", "uid-both", "7")
	if err := os.MkdirAll(filepath.Dir(nested), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nested, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return flat, nested
}

// Issue 21, defect 7: a checkpoint on disk in both layouts (an older
// version wrote the nested copy) whose flat copy is damaged in any way is
// loaded from the intact nested copy on the same start, and the damaged
// flat copy is moved to the quarantine; Inspect shows the checkpoint as
// usable, from the nested path, and names the damaged flat copy.
func TestDamagedFlatCopyDoesNotHideNestedCopy(t *testing.T) {
	probe := t.TempDir()
	ps, _ := openStore(t, probe)
	pflat, _ := bothLayouts(t, probe, ps)
	valid, err := os.ReadFile(pflat)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range statedamage.File(t, valid, statedamage.SampleOffsets(len(valid), 3)) {
		if d.Name == "missing" || (d.Name == "mode 000" && os.Geteuid() == 0) {
			continue // not damage: the older layout only; root reads it anyway
		}
		t.Run(d.Name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			s, _ := openStore(t, dir)
			flat, nested := bothLayouts(t, dir, s)
			if err := d.Apply(flat); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(flat, 0o600) })
			k := checkpoint.Key{UID: "uid-both", ResourceVersion: "7"}

			snap, err := checkpoint.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			c, ok := snap.Checkpoint(k)
			if !ok || c.Err != nil || c.Path != nested {
				t.Errorf("Inspect: checkpoint %+v; want it usable from %s", c, nested)
			}
			if !problemNames(snap, flat) {
				t.Errorf("Inspect does not name the damaged flat copy %s; problems %v", flat, snap.Problems)
			}

			cm, err := s.Load(k)
			if err != nil || checkpoint.KeyOf(cm) != k {
				t.Fatalf("Load = %v; want the intact nested copy", err)
			}
			if _, err := os.Lstat(nested); err != nil {
				t.Errorf("the nested copy: %v", err)
			}
			if _, err := os.Lstat(flat); !errors.Is(err, fs.ErrNotExist) && d.Name != "mode 000" {
				t.Errorf("the damaged flat copy is still in place (%v); want it in the quarantine", err)
			}
		})
	}
}

// Issue 21, defect 7: Inspect shows a damaged copy in the nested layout of
// a checkpoint whose flat copy is intact (it used to skip the nested copy),
// and both when both are damaged.
func TestInspectShowsDamagedNestedCopy(t *testing.T) {
	for _, both := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "state")
		s, _ := openStore(t, dir)
		flat, nested := bothLayouts(t, dir, s)
		if err := os.WriteFile(nested, []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		if both {
			if err := os.WriteFile(flat, []byte("garbage too"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := checkpoint.Inspect(dir)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := snap.Checkpoint(checkpoint.Key{UID: "uid-both", ResourceVersion: "7"})
		if (c.Err != nil) != both || c.Path != flat {
			t.Errorf("both damaged %v: Inspect: checkpoint %+v", both, c)
		}
		if !problemNames(snap, nested) {
			t.Errorf("both damaged %v: Inspect does not name the damaged nested copy %s; problems %v", both, nested, snap.Problems)
		}
		if both {
			// Load fails on the flat copy and moves both aside.
			if _, err := s.Load(checkpoint.Key{UID: "uid-both", ResourceVersion: "7"}); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("Load = %v; want corrupt", err)
			}
			for _, p := range []string{flat, nested} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s still in place (%v); want it in the quarantine", p, err)
				}
			}
		}
	}
}

// A damaged nested copy of a checkpoint whose flat copy is intact is never
// read by Load; GC moves it to the quarantine (for a checkpoint it keeps),
// so that it does not stay a problem for ever. An intact second copy is
// kept as a spare.
func TestGCQuarantinesDamagedSecondCopy(t *testing.T) {
	for _, damaged := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "state")
		s, _ := openStore(t, dir)
		flat, nested := bothLayouts(t, dir, s)
		if damaged {
			if err := os.WriteFile(nested, []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetCurrent(sourceFor(newConfigMap("uid-both", "7"))); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GC(); err != nil {
			t.Fatal(err)
		}
		_, err := os.Lstat(nested)
		if gone := errors.Is(err, fs.ErrNotExist); gone != damaged {
			t.Errorf("damaged %v: nested copy gone %v (%v)", damaged, gone, err)
		}
		if _, err := os.Lstat(flat); err != nil {
			t.Errorf("damaged %v: flat copy: %v", damaged, err)
		}
		snap, err := checkpoint.Inspect(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Problems) > 0 || (damaged && len(snap.Quarantine) != 1) {
			t.Errorf("damaged %v: after GC, problems %v, quarantine %v", damaged, snap.Problems, snap.Quarantine)
		}
	}
}

// problemNames reports whether one of snap's problems names path.
func problemNames(snap *checkpoint.Snapshot, path string) bool {
	for _, p := range snap.Problems {
		if strings.Contains(p.Error(), path) {
			return true
		}
	}
	return false
}

// Issue 21, defect 7: Inspect shows a damaged quarantine: anything that is
// not a directory in its place, and a quarantine the component (the owner
// of the state dir) cannot use, one a tool run as root created 0700, or
// with a mode that keeps its owner out. A missing or emptied quarantine,
// and a foreign entry in it, are not damage.
func TestInspectShowsDamagedQuarantine(t *testing.T) {
	damages := statedamage.Dir(t)
	damages = append(damages,
		statedamage.Damage{Name: "owned by root", Apply: func(p string) error { return os.Chown(p, 0, 0) }},
		statedamage.Damage{Name: "mode 0500", Apply: func(p string) error { return os.Chmod(p, 0o500) }},
	)
	for _, d := range damages {
		t.Run(d.Name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			s, _ := openStore(t, dir)
			// Something in the quarantine, as a component leaves it.
			if err := os.WriteFile(filepath.Join(dir, "meta", "current"), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Current(); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("Current = %v", err)
			}
			s.Close()
			if os.Geteuid() == 0 {
				// The state dir belongs to the component's user, as on a
				// node where it does not run as root.
				if err := os.Chown(dir, statedamage.Nobody, statedamage.Nobody); err != nil {
					t.Fatal(err)
				}
				statedamage.ChownTree(t, dir, statedamage.Nobody)
			}
			q := filepath.Join(dir, checkpoint.QuarantineDir)
			if err := d.Apply(q); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(q, 0o700) })
			snap, err := checkpoint.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := true
			switch d.Name {
			case "missing", "emptied", "foreign entry":
				want = false
			case "owned by root":
				want = os.Geteuid() == 0
			}
			if got := problemNames(snap, q); got != want {
				t.Errorf("Inspect names the quarantine %s: %v, want %v; problems %v", q, got, want, snap.Problems)
			}
			for _, p := range snap.Problems {
				if !strings.Contains(p.Error(), q) {
					t.Errorf("a problem that is not the quarantine: %v", p)
				}
			}
		})
	}
}

// Issue 21, defect 8: after the one-time migration of a tracking dir, a
// plain `{}` or `[]` in place of a checksummed tracking file (a foreign or
// torn file that happens to parse) is damage: it is reported and moved to
// the quarantine, never read silently as "no marks" or "no startups".
// Before the migration (a tracking dir an older version wrote) the plain
// form is still read, and migrated.
func TestPlainTrackingFileAfterMigrationIsDamage(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "state")
		s, _ := openStore(t, dir)
		if err := s.MarkBad(sourceFor(newConfigMap("uid-a", "1")), checkpoint.BadMark{Reason: "r", Problem: "CrashLoop"}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := s.RecordStartup(); err != nil {
				t.Fatal(err)
			}
		}
		marks, startups := trackingFile(s, checkpoint.BadConfigsFile), trackingFile(s, checkpoint.StartupsFile)
		if err := os.WriteFile(marks, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(startups, []byte("[]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if reopen {
			s.Close()
			s, _ = openStore(t, dir)
		}
		snap, err := checkpoint.Inspect(dir)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := snap.Version("v1.37.2")
		if !errors.Is(v.BadMarksErr, checkpoint.ErrCorrupt) || !errors.Is(v.StartupsErr, checkpoint.ErrCorrupt) {
			t.Errorf("reopen %v: Inspect: marks %v, startups %v; want both corrupt", reopen, v.BadMarksErr, v.StartupsErr)
		}
		var ce *checkpoint.CorruptError
		if _, err := s.BadMarks(); !errors.As(err, &ce) || ce.MovedTo == "" {
			t.Errorf("reopen %v: BadMarks over a plain {} = %v; want a corrupt file moved to the quarantine", reopen, err)
		}
		if _, err := s.RecordStartup(); !errors.As(err, &ce) || ce.MovedTo == "" {
			t.Errorf("reopen %v: RecordStartup over a plain [] = %v; want a corrupt file moved to the quarantine", reopen, err)
		}
	}
}

// Issue 21, defect 9: a state dir on a read-only mount opens read-only:
// everything reads as usual, Inspect too, and every write fails with EROFS
// without touching anything.
func TestOpenReadOnlyMount(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	s, _ := openStore(t, dir)
	cm := newConfigMap("uid-a", "1")
	mustSave(t, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordStartup(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	statedamage.ReadOnlyMount(t, parent)
	ro, _ := openStore(t, dir)
	if !ro.ReadOnly() {
		t.Fatal("ReadOnly() = false on a read-only mount")
	}
	if cur, err := ro.Current(); err != nil || cur.Source == nil {
		t.Fatalf("Current = %+v, %v", cur, err)
	}
	if _, err := ro.Load(checkpoint.KeyOf(cm)); err != nil {
		t.Fatal(err)
	}
	ts, err := ro.RecordStartup()
	if len(ts) != 2 || !errors.Is(err, syscall.EROFS) {
		t.Errorf("RecordStartup = %v, %v; want the one on disk and this one, and EROFS", ts, err)
	}
	if _, err := ro.Save(newConfigMap("uid-b", "1")); !errors.Is(err, syscall.EROFS) {
		t.Errorf("Save = %v; want EROFS", err)
	}
	// A second Open is still excluded by the lock of the directory.
	if _, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.2"}); !errors.Is(err, checkpoint.ErrLocked) {
		t.Errorf("a second Open = %v; want ErrLocked", err)
	}
	if snap, err := checkpoint.Inspect(dir); err != nil || len(snap.Problems) > 0 {
		t.Errorf("Inspect = %v, %v", snap, err)
	}
}
