package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/internal/testenv"
)

// Issue 21, defect 7: inspect shows a damaged copy of a checkpoint in the
// older nested layout (it used to read the flat copy only), the copy it
// uses when the flat one is damaged, and a quarantine the component cannot
// use (owned by another user, as when a tool run as root created it, or a
// mode that keeps its owner out): each is listed under Problems, naming
// its path, in the text and the JSON report.
func TestInspectShowsDamagedNestedCopyAndQuarantine(t *testing.T) {
	cm := newConfigMap("kube-system", "kubelet-a", "uid-a", "1", map[string]string{"kubelet": "kind: KubeletConfiguration\n"})
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir, flat, nested string) string // returns the path inspect must name
		// wantOK is whether checkpoint uid-a/1 must still show as ok.
		wantOK bool
	}{
		{"nested copy damaged", func(t *testing.T, dir, flat, nested string) string {
			writeTestFile(t, nested, "garbage")
			return nested
		}, true},
		{"flat copy damaged, nested intact", func(t *testing.T, dir, flat, nested string) string {
			writeTestFile(t, flat, "garbage")
			return flat
		}, true},
		{"both copies damaged", func(t *testing.T, dir, flat, nested string) string {
			writeTestFile(t, flat, "garbage")
			writeTestFile(t, nested, "garbage too")
			return nested
		}, false},
		{"quarantine with mode 0500", func(t *testing.T, dir, flat, nested string) string {
			q := filepath.Join(dir, "quarantine")
			if err := os.Mkdir(q, 0o500); err != nil {
				t.Fatal(err)
			}
			return q
		}, true},
		{"quarantine owned by another user", func(t *testing.T, dir, flat, nested string) string {
			testenv.Root(t, "to chown")
			q := filepath.Join(dir, "quarantine")
			if err := os.Mkdir(q, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(q, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return q
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			s := openStore(t, dir, "v1", nil)
			if _, err := s.Save(cm); err != nil {
				t.Fatal(err)
			}
			if err := s.SetCurrent(sourceOf(cm)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			flat := filepath.Join(dir, "checkpoints", "uid-a_1")
			nested := filepath.Join(dir, "checkpoints", "uid-a", "1")
			data, err := os.ReadFile(flat)
			if err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, nested, string(data))
			named := tc.damage(t, dir, flat, nested)

			code, out, errOut := runWithin(t, []string{"inspect", "-o", "json", dir}, testDeps(t, nil))
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var rep inspectReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(rep.Problems, "\n"), named) {
				t.Errorf("problems %q do not name %s", rep.Problems, named)
			}
			if len(rep.Checkpoints) != 1 || (rep.Checkpoints[0].Status == statusOK) != tc.wantOK {
				t.Errorf("checkpoints %+v; want uid-a/1 ok=%v", rep.Checkpoints, tc.wantOK)
			}
			_, text, _ := runWithin(t, []string{"inspect", dir}, testDeps(t, nil))
			if !strings.Contains(text, "Problems (") || !strings.Contains(text, named) {
				t.Errorf("the text report does not list the problem with %s:\n%s", named, text)
			}
		})
	}
}
