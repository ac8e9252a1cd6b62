package checkpoint_test

import (
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
