package checkpoint_test

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

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOpenOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    checkpoint.Options
		wantErr string // substring; "" means success
	}{
		{name: "valid", opts: checkpoint.Options{Dir: "state", ComponentVersion: "v1.37.2"}},
		{name: "no dir", opts: checkpoint.Options{ComponentVersion: "v1"}, wantErr: "Options.Dir is required"},
		{name: "no component version", opts: checkpoint.Options{Dir: "state"}, wantErr: "Options.ComponentVersion is required"},
		{name: "component version ..", opts: checkpoint.Options{Dir: "state", ComponentVersion: ".."}, wantErr: "Options.ComponentVersion"},
		{name: "component version with slash", opts: checkpoint.Options{Dir: "state", ComponentVersion: "a/b"}, wantErr: "Options.ComponentVersion"},
		{name: "component version temp prefix", opts: checkpoint.Options{Dir: "state", ComponentVersion: atomicfile.TempPrefix + "v1"}, wantErr: "Options.ComponentVersion"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			tt.opts.Dir = relTo(parent, tt.opts.Dir)
			tt.opts.Logger = testLogger(t, nil)
			s, err := checkpoint.Open(tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
				if !filepath.IsAbs(s.Dir()) {
					t.Errorf("Dir() = %q, want an absolute path", s.Dir())
				}
				if want := filepath.Join(s.Dir(), "tracking", tt.opts.ComponentVersion); s.TrackingDir() != want {
					t.Errorf("TrackingDir() = %q, want %q", s.TrackingDir(), want)
				}
				if fi, err := os.Stat(s.TrackingDir()); err != nil || !fi.IsDir() {
					t.Errorf("tracking dir not created: %v", err)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Open error %q does not contain %q", err, tt.wantErr)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("Open failed validation but created %v", entries)
			}
		})
	}
}

// relTo joins dir to parent unless it is empty (a missing option).
func relTo(parent, dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(parent, dir)
}

func TestSaveLoadRoundTrip(t *testing.T) {
	long := newConfigMap(types.UID(strings.Repeat("u", checkpoint.MaxUIDLen)), strings.Repeat("9", checkpoint.MaxRVLen))
	weird := newConfigMap("uid with spaces ünïcode", "rv.with.dots")
	weird.Data = map[string]string{"html": "<a href=\"x\">&amp;</a>", "ctl": "\x00\x01\u2028", "bad-utf8": "\xff"}
	empty := newConfigMap("uid-empty", "1")
	empty.Data, empty.BinaryData, empty.Labels, empty.Annotations = nil, nil, nil, nil
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
	}{
		{"typical", newConfigMap("0b5a9a8e-8c40-4a35-9d1f-3b1f1a2f2c11", "12345")},
		{"longest uid and resourceVersion", long},
		{"characters that JSON escapes", weird},
		{"no data", empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t, t.TempDir())
			orig := tt.cm.DeepCopy()
			k := mustSave(t, s, tt.cm)
			if want := checkpoint.KeyOf(tt.cm); k != want {
				t.Errorf("Save returned key %v, want %v", k, want)
			}
			if diff := cmp.Diff(orig, tt.cm); diff != "" {
				t.Errorf("Save modified its argument (-before +after):\n%s", diff)
			}
			got, err := s.Load(k)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := tt.cm.DeepCopy()
			want.Kind, want.APIVersion = "ConfigMap", "v1"
			if bad, ok := want.Data["bad-utf8"]; ok && bad == "\xff" {
				want.Data["bad-utf8"] = "\ufffd" // JSON has no invalid UTF-8
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Load after Save (-want +got):\n%s", diff)
			}
			if ok, err := s.Exists(k); err != nil || !ok {
				t.Errorf("Exists = %v, %v; want true, nil", ok, err)
			}
			// Saving the same key again replaces the checkpoint.
			tt.cm.Data = map[string]string{"kubelet": "replaced"}
			mustSave(t, s, tt.cm)
			if got, err := s.Load(k); err != nil || got.Data["kubelet"] != "replaced" {
				t.Errorf("Load after second Save = %v, %v; want the replaced data", got.Data, err)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	mustSave(t, s, newConfigMap("uid-a", "1"))
	for _, k := range []checkpoint.Key{{UID: "uid-a", ResourceVersion: "2"}, {UID: "uid-b", ResourceVersion: "1"}} {
		if _, err := s.Load(k); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("Load(%v) error = %v, want ErrNotFound", k, err)
		}
		if ok, err := s.Exists(k); ok || err != nil {
			t.Errorf("Exists(%v) = %v, %v; want false, nil", k, ok, err)
		}
	}
}

func TestListAndRemove(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	// Saved out of order; List sorts by UID, then resourceVersion.
	for _, k := range []checkpoint.Key{{"uid-b", "2"}, {"uid-a", "9"}, {"uid-b", "10"}, {"uid-a", "1"}} {
		mustSave(t, s, newConfigMap(k.UID, k.ResourceVersion))
	}
	steps := []struct {
		remove checkpoint.Key
		want   []checkpoint.Key
		uidDir types.UID // with rv: a checkpoint file whose existence is checked
		rv     string
		exists bool
	}{
		{remove: checkpoint.Key{}, want: []checkpoint.Key{{"uid-a", "1"}, {"uid-a", "9"}, {"uid-b", "10"}, {"uid-b", "2"}}},
		{remove: checkpoint.Key{UID: "uid-a", ResourceVersion: "1"}, want: []checkpoint.Key{{"uid-a", "9"}, {"uid-b", "10"}, {"uid-b", "2"}}, uidDir: "uid-a", rv: "9", exists: true},
		{remove: checkpoint.Key{UID: "uid-a", ResourceVersion: "9"}, want: []checkpoint.Key{{"uid-b", "10"}, {"uid-b", "2"}}, uidDir: "uid-a", rv: "9", exists: false},
		// Removing what is not there is not an error.
		{remove: checkpoint.Key{UID: "uid-a", ResourceVersion: "9"}, want: []checkpoint.Key{{"uid-b", "10"}, {"uid-b", "2"}}},
		{remove: checkpoint.Key{UID: "uid-b", ResourceVersion: "10"}, want: []checkpoint.Key{{"uid-b", "2"}}, uidDir: "uid-b", rv: "2", exists: true},
		{remove: checkpoint.Key{UID: "uid-b", ResourceVersion: "2"}, want: nil, uidDir: "uid-b", rv: "2", exists: false},
	}
	for i, st := range steps {
		if st.remove != (checkpoint.Key{}) {
			if err := s.Remove(st.remove); err != nil {
				t.Fatalf("step %d: Remove(%v): %v", i, st.remove, err)
			}
			if ok, _ := s.Exists(st.remove); ok {
				t.Errorf("step %d: %v still exists after Remove", i, st.remove)
			}
		}
		got, err := s.List()
		if err != nil {
			t.Fatalf("step %d: List: %v", i, err)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("step %d: List (-want +got):\n%s", i, diff)
		}
		if st.uidDir != "" {
			_, err := os.Stat(checkpointFile(s.Dir(), st.uidDir, st.rv))
			if exists := err == nil; exists != st.exists {
				t.Errorf("step %d: file of %s/%s exists = %v, want %v", i, st.uidDir, st.rv, exists, st.exists)
			}
		}
	}
}

func TestListSkipsAndReportsInvalidEntries(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	mustSave(t, s, newConfigMap("uid-a", "1"))
	cp := filepath.Join(dir, "checkpoints")
	// A nested UID directory of an older version, with strays in it.
	if err := os.Mkdir(filepath.Join(cp, "uid-a"), 0o700); err != nil {
		t.Fatal(err)
	}
	strays := map[string]func(p string) error{
		"stray-file":                    func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"uid-x_":                        func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"uid-a_fifo":                    func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"bad\x01uid":                    func(p string) error { return os.Mkdir(p, 0o700) },
		"uid-a/sub-dir":                 func(p string) error { return os.Mkdir(p, 0o700) },
		"uid-a/bad\nrv":                 func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"uid-a/link":                    func(p string) error { return os.Symlink("1", p) },
		atomicfile.TempPrefix + "1-123": func(p string) error { return os.WriteFile(p, nil, 0o600) },
	}
	for name, create := range strays {
		if err := create(filepath.Join(cp, name)); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	s.Close()
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: testLogger(t, &logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]checkpoint.Key{{"uid-a", "1"}}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	for _, name := range []string{"stray-file", "bad\\x01uid", "sub-dir", "uid-a/bad", "link", "uid-x_", "uid-a_fifo"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("the log does not report %q:\n%s", name, logs.String())
		}
	}
	// Reported, not fixed: everything is still there (a stale temporary
	// file in checkpoints/, which older versions left, goes at the next GC).
	for name := range strays {
		_, err := os.Lstat(filepath.Join(cp, name))
		if gone := errors.Is(err, fs.ErrNotExist); gone {
			t.Errorf("%s removed by Open", name)
		}
	}
}

// TestGCRemovesStaleTempFiles: the temporary files of interrupted writes
// survive a start (which lists no directory) and go at the next GC.
func TestGCRemovesStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	mustSave(t, s, newConfigMap("uid-a", "1"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := atomicfile.TempPrefix + "x-1"
	stale := []string{
		filepath.Join(dir, "meta", atomicfile.TempPrefix+"current-42"),
		filepath.Join(dir, "tmp", atomicfile.TempPrefix+"2-99"),
		filepath.Join(dir, "tracking", "v1.37.2", atomicfile.TempPrefix+"startups.json-7"),
	}
	// Older versions left the temporary files of checkpoints in
	// checkpoints/: no start lists that directory; GC removes them.
	legacy := filepath.Join(dir, "checkpoints", atomicfile.TempPrefix+"3-77")
	kept := []string{
		checkpointFile(dir, "uid-a", "1"),
		filepath.Join(dir, "tracking", "v1.37.2", "startups.json"),
		filepath.Join(dir, "tracking", "other-version", tmp), // not this Store's
		filepath.Join(dir, "unrelated", tmp),
	}
	for _, p := range append(append([]string{}, stale...), kept[1:]...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(legacy, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, _ := openStore(t, dir)
	// No start lists a directory: the stale files wait for GC.
	for _, p := range append(append([]string{}, stale...), legacy) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Open listed %s: %s removed (%v)", filepath.Dir(p), p, err)
		}
	}
	if err := s2.SetCurrent(sourceFor(newConfigMap("uid-a", "1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GC(); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(append([]string{}, stale...), legacy) {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("GC left the stale %s (stat: %v)", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o022) // the common default, whatever the test runner's
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "state")
	s, _ := openStore(t, dir)
	cm := newConfigMap("uid-a", "1")
	mustSave(t, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLastKnownGood(nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		".":                    fs.ModeDir | 0o700,
		"checkpoints":          fs.ModeDir | 0o700,
		"checkpoints/uid-a_1":  0o600,
		"meta":                 fs.ModeDir | 0o700,
		"meta/current":         0o600,
		"meta/last-known-good": 0o600,
		"tracking":             fs.ModeDir | 0o700,
		"tracking/v1.37.2":     fs.ModeDir | 0o700,
		"lock":                 0o600,
		"../":                  fs.ModeDir | 0o700, // a parent Open created
	}
	got := map[string]fs.FileMode{}
	for rel := range want {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		got[rel] = fi.Mode()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
}

func TestPointers(t *testing.T) {
	s, clk := openStore(t, t.TempDir())
	openedAt := clk.Now()
	cmA := newConfigMap("uid-a", "1")
	cmB := newConfigMap("uid-b", "7")
	mustSave(t, s, cmA)
	mustSave(t, s, cmB)
	type getter func() (checkpoint.Pointer, error)
	type setter func(*corev1.NodeConfigSource) error
	pointers := map[string]struct {
		get getter
		set setter
	}{
		"current":         {s.Current, s.SetCurrent},
		"last-known-good": {s.LastKnownGood, s.SetLastKnownGood},
	}
	for name, p := range pointers {
		t.Run(name, func(t *testing.T) {
			steps := []struct {
				set        *corev1.NodeConfigSource
				wantErr    error
				wantSource *corev1.NodeConfigSource
				wantTime   time.Time
			}{
				// A new state dir starts on the local config, set when it
				// was opened.
				{set: nil, wantErr: nil, wantSource: nil},
				{set: sourceFor(cmA), wantSource: sourceFor(cmA)},
				{set: sourceFor(cmB), wantSource: sourceFor(cmB)},
				// An empty source is the local config.
				{set: &corev1.NodeConfigSource{}, wantSource: nil},
				{set: sourceFor(cmA), wantSource: sourceFor(cmA)},
				{set: nil, wantSource: nil},
				// A checkpoint that was never saved cannot be pointed at;
				// the pointer keeps its value.
				{set: sourceFor(newConfigMap("uid-a", "2")), wantErr: checkpoint.ErrNotFound, wantSource: nil},
			}
			for i, st := range steps {
				clk.Step(time.Minute)
				setAt := clk.Now()
				if i > 0 {
					err := p.set(st.set)
					if !errors.Is(err, st.wantErr) || (err != nil) != (st.wantErr != nil) {
						t.Fatalf("step %d: set error = %v, want %v", i, err, st.wantErr)
					}
				}
				got, err := p.get()
				if err != nil {
					t.Fatalf("step %d: get: %v", i, err)
				}
				if diff := cmp.Diff(st.wantSource, got.Source); diff != "" {
					t.Errorf("step %d: source (-want +got):\n%s", i, diff)
				}
				switch {
				case i == 0 && !got.SetTime.Equal(openedAt):
					t.Errorf("step %d: SetTime = %v, want %v (when the state dir was created)", i, got.SetTime, openedAt)
				case i > 0 && st.wantErr == nil && !got.SetTime.Equal(setAt):
					t.Errorf("step %d: SetTime = %v, want %v", i, got.SetTime, setAt)
				case st.wantErr != nil && got.SetTime.Equal(setAt):
					t.Errorf("step %d: a failed set changed SetTime", i)
				}
			}
		})
	}
	// The set time survives a restart.
	if err := s.SetCurrent(sourceFor(cmB)); err != nil {
		t.Fatal(err)
	}
	setAt := clk.Now()
	dir := s.Dir()
	s.Close()
	s2, _ := openStore(t, dir)
	got, err := s2.Current()
	if err != nil || !got.SetTime.Equal(setAt) {
		t.Errorf("Current after reopening = %v, %v; want set at %v", got, err, setAt)
	}
}

// An empty pointer is corruption, and GC then removes nothing: the
// checkpoint the pointer named must survive until a valid pointer says
// otherwise.
func TestEmptyPointerFileIsCorruptAndKeepsCheckpoints(t *testing.T) {
	for _, name := range []string{"current", "last-known-good"} {
		t.Run(name, func(t *testing.T) {
			s, _ := openStore(t, t.TempDir())
			cm := newConfigMap("uid-a", "1")
			mustSave(t, s, cm)
			if err := s.SetLastKnownGood(sourceFor(cm)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(s.Dir(), "meta", name)
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			get := map[string]func() (checkpoint.Pointer, error){"current": s.Current, "last-known-good": s.LastKnownGood}[name]
			_, err := get()
			wantCorrupt(t, err, path)
			var ce *checkpoint.CorruptError
			if !errors.As(err, &ce) || ce.MovedTo == "" {
				t.Fatalf("error %v does not say where the file went", err)
			}
			if _, err := os.Stat(ce.MovedTo); err != nil {
				t.Fatalf("quarantined file: %v", err)
			}
			// Now missing: still corrupt, and GC keeps everything.
			if _, err := get(); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("second read: %v, want corrupt (missing)", err)
			}
			if removed, err := s.GC(); err == nil || len(removed) != 0 {
				t.Fatalf("GC with a damaged pointer removed %v (err %v)", removed, err)
			}
			if ok, _ := s.Exists(checkpoint.KeyOf(cm)); !ok {
				t.Fatal("checkpoint lost")
			}
		})
	}
}

func TestGC(t *testing.T) {
	a1, a2, b1, c1 := newConfigMap("uid-a", "1"), newConfigMap("uid-a", "2"), newConfigMap("uid-b", "1"), newConfigMap("uid-c", "1")
	all := []*corev1.ConfigMap{a1, a2, b1, c1}
	keys := func(cms ...*corev1.ConfigMap) []checkpoint.Key {
		var ks []checkpoint.Key
		for _, cm := range cms {
			ks = append(ks, checkpoint.KeyOf(cm))
		}
		return ks
	}
	tests := []struct {
		name        string
		current     *corev1.ConfigMap // nil: local
		lkg         *corev1.ConfigMap
		corrupt     string // a pointer file to corrupt before GC
		wantErr     bool
		wantRemoved []checkpoint.Key
		wantLeft    []checkpoint.Key
	}{
		{name: "both local", wantRemoved: keys(a1, a2, b1, c1)},
		{name: "current only", current: a2, wantRemoved: keys(a1, b1, c1), wantLeft: keys(a2)},
		{name: "current and LKG", current: a2, lkg: b1, wantRemoved: keys(a1, c1), wantLeft: keys(a2, b1)},
		{name: "same key", current: c1, lkg: c1, wantRemoved: keys(a1, a2, b1), wantLeft: keys(c1)},
		{name: "corrupt current removes nothing", current: a1, corrupt: "current", wantErr: true, wantLeft: keys(a1, a2, b1, c1)},
		{name: "corrupt LKG removes nothing", current: a1, corrupt: "last-known-good", wantErr: true, wantLeft: keys(a1, a2, b1, c1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t, t.TempDir())
			for _, cm := range all {
				mustSave(t, s, cm)
			}
			if tt.current != nil {
				if err := s.SetCurrent(sourceFor(tt.current)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.lkg != nil {
				if err := s.SetLastKnownGood(sourceFor(tt.lkg)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.corrupt != "" {
				if err := os.WriteFile(filepath.Join(s.Dir(), "meta", tt.corrupt), []byte("{garbage"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := s.GC()
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("GC error = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("GC error %v does not wrap ErrCorrupt", err)
			}
			if diff := cmp.Diff(tt.wantRemoved, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			left, err := s.List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantLeft, left); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
			for _, k := range left {
				if _, err := s.Load(k); err != nil {
					t.Errorf("Load(%v) after GC: %v", k, err)
				}
			}
			// No empty UID directories are left behind.
			uids, _ := os.ReadDir(filepath.Join(s.Dir(), "checkpoints"))
			for _, u := range uids {
				if !u.IsDir() {
					continue
				}
				if rvs, _ := os.ReadDir(filepath.Join(s.Dir(), "checkpoints", u.Name())); len(rvs) == 0 {
					t.Errorf("empty UID directory %s left after GC", u.Name())
				}
			}
		})
	}
}

func TestGCRemovesEmptyUIDDirs(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	empty := filepath.Join(s.Dir(), "checkpoints", "uid-empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("GC left the empty UID directory (stat: %v)", err)
	}
}

func TestClosedStore(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	cm := newConfigMap("uid-a", "1")
	k := mustSave(t, s, cm)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"Save":             func() error { _, err := s.Save(cm); return err },
		"Load":             func() error { _, err := s.Load(k); return err },
		"Exists":           func() error { _, err := s.Exists(k); return err },
		"List":             func() error { _, err := s.List(); return err },
		"Remove":           func() error { return s.Remove(k) },
		"Current":          func() error { _, err := s.Current(); return err },
		"LastKnownGood":    func() error { _, err := s.LastKnownGood(); return err },
		"SetCurrent":       func() error { return s.SetCurrent(nil) },
		"SetLastKnownGood": func() error { return s.SetLastKnownGood(nil) },
		"GC":               func() error { _, err := s.GC(); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, checkpoint.ErrClosed) {
			t.Errorf("%s on a closed Store: %v, want ErrClosed", name, err)
		}
	}
}

func TestSaveNil(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	if _, err := s.Save(nil); err == nil {
		t.Error("Save(nil) succeeded")
	}
}

// A UID "directory" that is a file (or a symlink, which would lead the read
// outside the state dir) is corruption of the layout, reported on the UID
// directory's path and moved to the quarantine; Save then carries on.
func TestUIDDirIsAFile(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	uidPath := filepath.Join(s.Dir(), "checkpoints", "uid-a")
	if err := os.WriteFile(uidPath, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	k := checkpoint.Key{UID: "uid-a", ResourceVersion: "1"}
	_, err := s.Load(k)
	wantCorrupt(t, err, uidPath)
	if ok, err := s.Exists(k); ok || err != nil {
		t.Fatalf("Exists after the quarantine = %v, %v", ok, err)
	}
	if _, err := s.Save(newConfigMap("uid-a", "1")); err != nil {
		t.Fatalf("Save into a UID that was a file: %v", err)
	}
	if q, _ := os.ReadDir(filepath.Join(s.Dir(), checkpoint.QuarantineDir)); len(q) != 1 || !strings.HasSuffix(q[0].Name(), "checkpoints_uid-a") {
		t.Fatalf("quarantine holds %v, want the file that was in the UID's place", q)
	}
}

// A symlink in place of a UID directory is never followed, even to a valid
// checkpoint outside the state dir.
func TestUIDDirSymlinkIsNotFollowed(t *testing.T) {
	outside := t.TempDir()
	o, _ := openStore(t, outside)
	mustSave(t, o, newConfigMap("uid-a", "1"))
	s, _ := openStore(t, t.TempDir())
	uidPath := filepath.Join(s.Dir(), "checkpoints", "uid-a")
	if err := os.Symlink(filepath.Join(outside, "checkpoints", "uid-a"), uidPath); err != nil {
		t.Fatal(err)
	}
	cm, err := s.Load(checkpoint.Key{UID: "uid-a", ResourceVersion: "1"})
	if err == nil {
		t.Fatalf("Load followed the symlink to %+v", cm.ObjectMeta)
	}
	wantCorrupt(t, err, uidPath)
}

// TestConcurrentUse runs writers, readers and GC at once; run it with -race.
// GC may remove a checkpoint between its Save and its Load (that is what GC
// is for), so a Load may be ErrNotFound, never anything else.
func TestConcurrentUse(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	pinned := newConfigMap("uid-pinned", "1")
	mustSave(t, s, pinned)
	if err := s.SetLastKnownGood(sourceFor(pinned)); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	var writers, gc sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := range 20 {
				cm := newConfigMap(types.UID(fmt.Sprintf("uid-%d", w)), fmt.Sprint(i))
				if _, err := s.Save(cm); err != nil {
					errs <- err
					return
				}
				if _, err := s.Load(checkpoint.KeyOf(cm)); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	gc.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.GC(); err != nil {
				errs <- err
				return
			}
			if _, err := s.List(); err != nil {
				errs <- err
				return
			}
			if p, err := s.LastKnownGood(); err != nil || p.Source == nil {
				errs <- fmt.Errorf("LastKnownGood = %+v, %v", p, err)
				return
			}
		}
	})
	writers.Wait()
	close(done)
	gc.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := s.Load(checkpoint.KeyOf(pinned)); err != nil {
		t.Errorf("the checkpoint LKG references: %v", err)
	}
}

// TestNestedLayoutOfOlderVersions: checkpoints that older versions wrote at
// checkpoints/<uid>/<rv> are found by Load, Exists, List, Inspect, Remove and
// GC; a key in both layouts is listed once; new checkpoints are flat.
func TestNestedLayoutOfOlderVersions(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	old := newConfigMap("uid-old", "1")
	mustSave(t, s, old)
	nested := toNested(t, dir, "uid-old", "1")
	both := newConfigMap("uid-both", "1")
	mustSave(t, s, both)
	mustSave(t, s, newConfigMap("uid-both", "1"))
	if err := os.MkdirAll(filepath.Join(dir, "checkpoints", "uid-both"), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(checkpointFile(dir, "uid-both", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoints", "uid-both", "1"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(checkpoint.KeyOf(old)); err != nil || got.UID != "uid-old" {
		t.Fatalf("Load of a nested checkpoint: %v, %v", got, err)
	}
	if ok, err := s.Exists(checkpoint.KeyOf(old)); !ok || err != nil {
		t.Fatalf("Exists of a nested checkpoint: %v, %v", ok, err)
	}
	keys, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]checkpoint.Key{{"uid-both", "1"}, {"uid-old", "1"}}, keys); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	snap, err := checkpoint.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Checkpoints) != 2 || snap.Checkpoints[0].Path != checkpointFile(dir, "uid-both", "1") || snap.Checkpoints[1].Path != nested {
		t.Fatalf("Inspect: %+v", snap.Checkpoints)
	}
	// Current keeps the nested one; GC removes both copies of the other.
	if err := s.SetCurrent(sourceFor(old)); err != nil {
		t.Fatal(err)
	}
	removed, err := s.GC()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]checkpoint.Key{{"uid-both", "1"}}, removed); diff != "" {
		t.Fatalf("GC removed (-want +got):\n%s", diff)
	}
	for _, p := range []string{checkpointFile(dir, "uid-both", "1"), filepath.Join(dir, "checkpoints", "uid-both")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("GC left %s (%v)", p, err)
		}
	}
	if err := s.Remove(checkpoint.KeyOf(old)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{nested, filepath.Dir(nested)} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Remove left %s (%v)", p, err)
		}
	}
}

// TestKeysWithoutAFlatName: a UID holding the separator, or a key too long
// for one file name, keeps the nested layout, and round-trips.
func TestKeysWithoutAFlatName(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	for _, k := range []checkpoint.Key{
		{UID: "uid_with_underscores", ResourceVersion: "1"},
		{UID: types.UID(strings.Repeat("u", 200)), ResourceVersion: strings.Repeat("9", 100)},
	} {
		mustSave(t, s, newConfigMap(k.UID, k.ResourceVersion))
		if _, err := os.Stat(filepath.Join(dir, "checkpoints", string(k.UID), k.ResourceVersion)); err != nil {
			t.Errorf("%s not in the nested layout: %v", k, err)
		}
		if got, err := s.Load(k); err != nil || checkpoint.KeyOf(got) != k {
			t.Errorf("Load(%s) = %v", k, err)
		}
	}
	keys, err := s.List()
	if err != nil || len(keys) != 2 {
		t.Fatalf("List = %v, %v", keys, err)
	}
}
