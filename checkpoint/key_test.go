package checkpoint_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// hostile are names that must never become a path component.
var hostile = []struct {
	name, value, why string
}{
	{"empty", "", "must not be empty"},
	{"dot", ".", `must not be "."`},
	{"dot-dot", "..", `must not be ".."`},
	{"parent escape", "../x", `must not contain '/'`},
	{"deep escape", "../../../../tmp/pwned", `must not contain '/'`},
	{"absolute", "/etc/passwd", `must not contain '/'`},
	{"slash", "a/b", `must not contain '/'`},
	{"trailing slash", "a/", `must not contain '/'`},
	{"backslash", `a\b`, `must not contain '\\'`},
	{"backslash escape", `..\..\x`, `must not contain '\\'`},
	{"NUL", "a\x00b", "must not contain NUL"},
	{"newline", "a\nb", "control character U+000A"},
	{"tab", "\t", "control character U+0009"},
	{"DEL", "a\x7f", "control character U+007F"},
	{"C1 control", "a\u0085", "control character U+0085"},
	{"invalid UTF-8", "a\xffb", "valid UTF-8"},
	{"254 bytes", strings.Repeat("a", 254), "at most"},
	{"temp prefix", atomicfile.TempPrefix + "1", "temporary-file prefix"},
	{"bare temp prefix", atomicfile.TempPrefix, "temporary-file prefix"},
}

func TestValidateKey(t *testing.T) {
	valid := []checkpoint.Key{
		{UID: "0b5a9a8e-8c40-4a35-9d1f-3b1f1a2f2c11", ResourceVersion: "12345"},
		{UID: "a", ResourceVersion: "1"},
		{UID: "...", ResourceVersion: ".hidden"},
		{UID: ".tmp", ResourceVersion: "tmp-1"},
		{UID: "ünïcode", ResourceVersion: "v 1"},
		{UID: types.UID(strings.Repeat("u", checkpoint.MaxUIDLen)), ResourceVersion: strings.Repeat("9", checkpoint.MaxRVLen)},
	}
	for _, k := range valid {
		if err := checkpoint.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	type tc struct {
		name    string
		key     checkpoint.Key
		wantErr []string
	}
	var tests []tc
	for _, h := range hostile {
		tests = append(tests,
			tc{"uid " + h.name, checkpoint.Key{UID: types.UID(h.value), ResourceVersion: "1"}, []string{"uid:", h.why}},
			tc{"resourceVersion " + h.name, checkpoint.Key{UID: "uid-a", ResourceVersion: h.value}, []string{"resourceVersion:", h.why}})
	}
	// A resourceVersion is a file name and must leave room for the name of
	// its temporary file; a UID is a directory name.
	tests = append(tests, tc{"resourceVersion one byte too long", checkpoint.Key{UID: "uid-a", ResourceVersion: strings.Repeat("9", checkpoint.MaxRVLen+1)}, []string{"resourceVersion:", "at most 239 bytes"}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkpoint.ValidateKey(tt.key)
			if err == nil {
				t.Fatalf("ValidateKey(%q) = nil, want an error", tt.key)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidateKey(%q) = %q, want it to contain %q", tt.key, err, want)
				}
			}
		})
	}
}

func TestKeyOfAndFromSource(t *testing.T) {
	cm := newConfigMap("uid-a", "42")
	want := checkpoint.Key{UID: "uid-a", ResourceVersion: "42"}
	if got := checkpoint.KeyOf(cm); got != want {
		t.Errorf("KeyOf = %v, want %v", got, want)
	}
	if got := want.String(); got != "uid-a/42" {
		t.Errorf("String() = %q", got)
	}
	tests := []struct {
		name   string
		src    *corev1.NodeConfigSource
		want   checkpoint.Key
		wantOK bool
	}{
		{"nil", nil, checkpoint.Key{}, false},
		{"empty", &corev1.NodeConfigSource{}, checkpoint.Key{}, false},
		{"configMap", sourceFor(cm), want, true},
	}
	for _, tt := range tests {
		got, ok := checkpoint.KeyFromSource(tt.src)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: KeyFromSource = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestHostileKeysTouchNothing calls every API that takes a key, a ConfigMap
// or a source with hostile UIDs and resourceVersions, and checks that each
// is rejected and that nothing changed on disk, inside or outside the state
// dir.
func TestHostileKeysTouchNothing(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	s, _ := openStore(t, dir)
	good := newConfigMap("uid-a", "1")
	mustSave(t, s, good)
	if err := s.SetCurrent(sourceFor(good)); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, parent)

	var keys []checkpoint.Key
	for _, h := range hostile {
		keys = append(keys,
			checkpoint.Key{UID: types.UID(h.value), ResourceVersion: "1"},
			checkpoint.Key{UID: "uid-a", ResourceVersion: h.value},
			checkpoint.Key{UID: types.UID(h.value), ResourceVersion: h.value})
	}
	for _, k := range keys {
		cm := newConfigMap(k.UID, k.ResourceVersion)
		calls := map[string]func() error{
			"Save":             func() error { _, err := s.Save(cm); return err },
			"Load":             func() error { _, err := s.Load(k); return err },
			"Exists":           func() error { _, err := s.Exists(k); return err },
			"Remove":           func() error { return s.Remove(k) },
			"SetCurrent":       func() error { return s.SetCurrent(sourceFor(cm)) },
			"SetLastKnownGood": func() error { return s.SetLastKnownGood(sourceFor(cm)) },
		}
		for name, call := range calls {
			err := call()
			if err == nil {
				t.Errorf("%s(%q) succeeded", name, k)
				continue
			}
			if !strings.Contains(err.Error(), "invalid checkpoint key") || errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("%s(%q) = %v, want a key validation error", name, k, err)
			}
		}
	}
	for _, h := range hostile {
		if h.value == "" {
			continue // a missing option, tested in TestOpenOptions
		}
		other := filepath.Join(parent, "other")
		if s2, err := checkpoint.Open(checkpoint.Options{Dir: other, ComponentVersion: h.value}); err == nil {
			s2.Close()
			t.Errorf("Open with ComponentVersion %q succeeded", h.value)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, parent)); diff != "" {
		t.Errorf("the file tree changed (-before +after):\n%s", diff)
	}
	// The valid data is intact.
	if _, err := s.Load(checkpoint.KeyOf(good)); err != nil {
		t.Errorf("Load of the valid checkpoint: %v", err)
	}
	if p, err := s.Current(); err != nil || p.Source == nil {
		t.Errorf("Current = %+v, %v; want the valid source", p, err)
	}
}

// snapshot maps every path under root to its mode, size and content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		m[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
