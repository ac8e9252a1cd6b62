package checkpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// Issue 21, defect 3: a symlink at quarantine/ must not move state files
// out of the state dir, nor let the trimming of the quarantine delete files
// elsewhere. It is treated like every other layout directory: what is in
// its place is moved into a real quarantine directory.
func TestQuarantineSymlinkStaysInside(t *testing.T) {
	for _, when := range []string{"before Open", "after Open"} {
		t.Run(when, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			outside := t.TempDir()
			for i := range checkpoint.MaxQuarantined + 2 {
				if err := os.WriteFile(filepath.Join(outside, fmt.Sprintf("precious-%02d", i)), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, _ := openStore(t, dir)
			q := filepath.Join(dir, checkpoint.QuarantineDir)
			link := func() {
				if err := os.RemoveAll(q); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, q); err != nil {
					t.Fatal(err)
				}
			}
			if when == "before Open" {
				s.Close()
				link()
				s, _ = openStore(t, dir)
			} else {
				link()
			}
			cur := filepath.Join(dir, "meta", "current")
			if err := os.WriteFile(cur, []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Current()
			var ce *checkpoint.CorruptError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.MovedTo, q+string(filepath.Separator)) {
				t.Fatalf("Current: %v; want a corrupt file moved into %s", err, q)
			}
			fi, err := os.Lstat(q)
			if err != nil || !fi.IsDir() {
				t.Fatalf("quarantine: %v, %v; want a real directory", fi, err)
			}
			entries, err := os.ReadDir(outside)
			if err != nil || len(entries) != checkpoint.MaxQuarantined+2 {
				t.Fatalf("outside the state dir: %d entries, %v; want the %d files left alone", len(entries), err, checkpoint.MaxQuarantined+2)
			}
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), "precious-") {
					t.Errorf("written outside the state dir: %s", e.Name())
				}
			}
			// The symlink itself is kept as evidence, inside.
			names, _ := filepath.Glob(filepath.Join(q, "*-"+checkpoint.QuarantineDir))
			if len(names) != 1 {
				t.Errorf("the symlink that was in place of the quarantine: %v; want it moved into it", names)
			}
			snap, err := checkpoint.Inspect(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Quarantine) != 2 {
				t.Errorf("Inspect: quarantine %v; want the symlink and the pointer", snap.Quarantine)
			}
		})
	}
}

// Inspect reports a symlink at quarantine/ and lists nothing through it.
func TestInspectQuarantineSymlink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, _ := openStore(t, dir)
	s.Close()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "elsewhere"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, checkpoint.QuarantineDir)); err != nil {
		t.Fatal(err)
	}
	snap, err := checkpoint.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Quarantine) != 0 || len(snap.Problems) != 1 || !strings.Contains(snap.Problems[0].Error(), "quarantine") {
		t.Fatalf("Inspect: quarantine %v, problems %v; want the symlink reported and nothing listed", snap.Quarantine, snap.Problems)
	}
}

// Compatibility policy (doc.go): a pointer of this format version with a
// field this version does not know (a newer version added it) is read,
// the field ignored; a pointer or checkpoint of a newer format version is
// ErrNewerFormat, not damage: nothing is quarantined, GC removes nothing.
func TestNewerFormatIsNotDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, _ := openStore(t, dir)
	cm := newConfigMap("uid-a", "1")
	k := mustSave(t, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	cur := filepath.Join(dir, "meta", "current")
	src := `{"configMap":{"namespace":"` + cm.Namespace + `","name":"` + cm.Name + `","uid":"uid-a","resourceVersion":"1","kubeletConfigKey":"kubelet"}}`
	if err := os.WriteFile(cur, envelopeOf("dynconfig.io/pointer/v1", "pointer",
		`{"source":`+src+`,"setTime":"2025-01-01T00:00:00Z","addedLater":{"x":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := s.Current()
	if err != nil || p.Source == nil || p.Source.ConfigMap.UID != "uid-a" {
		t.Fatalf("Current with an added field: %+v, %v; want uid-a", p, err)
	}
	for name, path := range map[string]string{"pointer": cur, "checkpoint": filepath.Join(dir, "checkpoints", "uid-a_1")} {
		valid, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		newer := bytes.Replace(valid, []byte(`/v1"`), []byte(`/v2"`), 1)
		if err := os.WriteFile(path, newer, 0o600); err != nil {
			t.Fatal(err)
		}
		if name == "pointer" {
			_, err = s.Current()
		} else {
			_, err = s.Load(k)
		}
		if !errors.Is(err, checkpoint.ErrNewerFormat) || errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("%s of format v2: %v; want ErrNewerFormat, not corruption", name, err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, newer) {
			t.Errorf("%s of format v2 was moved or changed: %v", name, err)
		}
		if name == "pointer" {
			if removed, err := s.GC(); err == nil || len(removed) > 0 {
				t.Errorf("GC with a pointer of format v2: removed %v, %v; want nothing removed", removed, err)
			}
		}
		if err := os.WriteFile(path, valid, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, checkpoint.QuarantineDir)); err == nil {
		t.Errorf("something was quarantined")
	}
}
