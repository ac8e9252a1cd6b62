package checkpoint_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// problemNames reports whether one of snap's problems names path.
func problemNames(snap *checkpoint.Snapshot, path string) bool {
	for _, p := range snap.Problems {
		if strings.Contains(p.Error(), path) {
			return true
		}
	}
	return false
}
