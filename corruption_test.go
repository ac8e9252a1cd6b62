package dynconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/damage"
	"github.com/dynconfig/dynconfig/source/sourcetest"
	"github.com/dynconfig/dynconfig/status"
)

// unreachable is a Remote whose assignment cannot be read, like an API
// server that is down during Bootstrap.
// unreachable is a Remote whose API server is down.
func unreachable() *sourcetest.Fake {
	f := sourcetest.NewFake("config")
	f.SetReadError(errors.New("connection refused"))
	return f
}

// stateFiles returns the state files of a node that runs b (current, in its
// trial) with a as last-known-good, a bad mark and some startups.
func prepareDamageNode(t *testing.T) (*node, map[string]string) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	n.configMap("b", "uid-b", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 2}`, nil)
	n.configMap("x", "uid-x", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`, nil)
	n.assign("x", "uid-x")
	n.start() // x fails validation: a bad mark
	n.assign("a", "uid-a")
	n.runTrial() // a promoted
	n.assign("b", "uid-b")
	n.start() // b current, in trial
	files := map[string]string{
		"current":         filepath.Join(n.stateDir, "meta", "current"),
		"last-known-good": filepath.Join(n.stateDir, "meta", "last-known-good"),
		"bad-configs":     filepath.Join(n.stateDir, "tracking", "v1.0.0", "bad-configs.json"),
		"startups":        filepath.Join(n.stateDir, "tracking", "v1.0.0", "startups.json"),
		"checkpoint of b": "",
		"checkpoint of a": "",
	}
	for name, uid := range map[string]string{"checkpoint of a": "uid-a", "checkpoint of b": "uid-b"} {
		matches, _ := filepath.Glob(filepath.Join(n.stateDir, "checkpoints", uid+"_*"))
		if len(matches) != 1 {
			t.Fatalf("%s: %v", name, matches)
		}
		files[name] = matches[0]
	}
	return n, files
}

// damages returns the ways a state file is broken: truncated at a sample of
// offsets (every offset below 64, then every 23rd; the checkpoint package's
// own tests cover every offset of every file), bit flips at a sample of
// offsets, garbage, empty, missing, an empty and a non-empty directory, a
// FIFO, a symlink to a valid file outside the state dir, a dangling
// symlink, a 100 MB file, and mode 000 (as root, still readable).
func damages(t *testing.T, valid []byte) map[string]func(path string) error {
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, valid, 0o600); err != nil {
		t.Fatal(err)
	}
	d := map[string]func(string) error{
		"garbage":   func(p string) error { return os.WriteFile(p, []byte("\x00\xffnot json{"), 0o600) },
		"empty":     func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"missing":   os.Remove,
		"directory": func(p string) error { _ = os.Remove(p); return os.Mkdir(p, 0o700) },
		"non-empty directory": func(p string) error {
			_ = os.Remove(p)
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "x"), valid, 0o600)
		},
		"fifo":             func(p string) error { _ = os.Remove(p); return syscall.Mkfifo(p, 0o600) },
		"symlink outside":  func(p string) error { _ = os.Remove(p); return os.Symlink(outside, p) },
		"dangling symlink": func(p string) error { _ = os.Remove(p); return os.Symlink(outside+"-gone", p) },
		"100 MB": func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(100 << 20) // sparse: instant, and still 100 MB to a reader
		},
		"mode 000": func(p string) error { return os.Chmod(p, 0) },
	}
	for i := 1; i < len(valid); i++ {
		if i >= 64 && i%23 != 0 {
			continue
		}
		n := i
		d[fmt.Sprintf("truncated at %d", n)] = func(p string) error { return os.WriteFile(p, valid[:n], 0o600) }
	}
	for i := 0; i < len(valid); i += 7 {
		n := i
		d[fmt.Sprintf("bit flip at %d", n)] = func(p string) error {
			b := append([]byte(nil), valid...)
			b[n] ^= 0x04
			return os.WriteFile(p, b, 0o600)
		}
	}
	return d
}

// TestCorruptionMatrix damages each state file and each state directory in
// many ways and checks that Bootstrap never fails, hangs or panics, and makes
// the right fallback decision: with the source reachable, state is repaired
// from it and b runs; with the source unreachable, the last-known-good runs,
// or the local config when the last-known-good itself is damaged. Anything
// moved aside is in the quarantine.
func TestCorruptionMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hundreds of Bootstraps")
	}
	base, files := prepareDamageNode(t)
	snapshot := copyTree(t, base.stateDir)
	type damageCase struct {
		file, damage string
		apply        func(string) error
		path         string
	}
	// undo, when an apply sets it, is run after the Bootstrap: a damage
	// restoreTree does not undo (a mount, the clock).
	var undo func()
	var cases []damageCase
	for fileName, path := range files {
		valid, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for damageName, damage := range damages(t, valid) {
			cases = append(cases, damageCase{file: fileName, damage: damageName, apply: damage, path: path})
		}
	}
	for _, dir := range []string{"checkpoints", "meta", "tracking/v1.0.0", "tracking"} {
		path := filepath.Join(base.stateDir, dir)
		cases = append(cases,
			damageCase{file: dir + "/", damage: "deleted", apply: os.RemoveAll, path: path},
			damageCase{file: dir + "/", damage: "a file", apply: func(p string) error { _ = os.RemoveAll(p); return os.WriteFile(p, []byte("x"), 0o600) }, path: path},
		)
	}
	// Issue 21: a checkpoint on disk in both layouts at once (an older
	// version wrote the nested copy): damage to either copy of the
	// last-known-good's checkpoint never hides the other.
	aFlat := files["checkpoint of a"]
	aValid, err := os.ReadFile(aFlat)
	if err != nil {
		t.Fatal(err)
	}
	aNested := filepath.Join(base.stateDir, "checkpoints", "uid-a", strings.TrimPrefix(filepath.Base(aFlat), "uid-a_"))
	writeNested := func() error {
		if err := os.MkdirAll(filepath.Dir(aNested), 0o700); err != nil {
			return err
		}
		return os.WriteFile(aNested, aValid, 0o600)
	}
	for damageName, damage := range damages(t, aValid) {
		cases = append(cases,
			damageCase{file: bothLayouts, damage: "flat " + damageName, path: aFlat, apply: func(p string) error {
				if err := writeNested(); err != nil {
					return err
				}
				return damage(p)
			}},
			damageCase{file: bothLayouts, damage: "nested " + damageName, path: aNested, apply: func(p string) error {
				if err := writeNested(); err != nil {
					return err
				}
				return damage(p)
			}},
		)
	}
	// Issue 21: the whole state dir unwritable (a read-only mount, a real
	// EROFS), and the clock stepped back an hour (an RTC corrected by NTP).
	cases = append(cases,
		damageCase{file: unwritable, damage: "read-only mount", path: base.stateDir, apply: func(p string) error {
			undo = damage.ReadOnlyMount(t, p)
			return nil
		}},
		damageCase{file: clockStep, damage: "stepped back 1h", path: base.stateDir, apply: func(string) error {
			now := base.clock.Now()
			base.clock.SetTime(now.Add(-time.Hour))
			undo = func() { base.clock.SetTime(now) }
			return nil
		}},
	)
	for _, tc := range cases {
		for _, reachable := range []bool{true, false} {
			name := fmt.Sprintf("%s/%s/reachable=%v", tc.file, tc.damage, reachable)
			restoreTree(t, snapshot, base.stateDir)
			if err := tc.apply(tc.path); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cfg, err := bootstrapWithin(t, base, reachable, name)
			if undo != nil {
				undo()
				undo = nil
			}
			if err != nil {
				t.Errorf("%s: Bootstrap: %v", name, err)
				continue
			}
			r := base.reporter.last()
			want := wantAfterDamage(tc.file, tc.damage, reachable)
			if cfg.Value != want.value || string(r.Status) != want.status || r.Message != want.message {
				t.Errorf("%s: ran value %d with %+v; want value %d, %s %q", name, cfg.Value, r, want.value, want.status, want.message)
			}
		}
	}
}

// bootstrapWithin runs one Bootstrap of n, with its source unreachable
// unless reachable, and fails the test if it has not returned within 30 s.
func bootstrapWithin(t *testing.T, n *node, reachable bool, name string) (*testConfig, error) {
	t.Helper()
	c := n.controller(func(o *Options[testConfig]) {
		if !reachable {
			o.Remote = unreachable()
		}
	})
	done := make(chan struct{})
	var cfg *testConfig
	var err error
	go func() {
		defer close(done)
		cfg, err = c.Bootstrap(n.ctx())
		c.Close()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Bootstrap hangs", name)
	}
	return cfg, err
}

// Names of the matrix rows that damage no single file.
const (
	bothLayouts = "checkpoint of a, both layouts"
	unwritable  = "state dir"
	clockStep   = "clock"
)

type outcome struct {
	value   int
	status  string
	message string
}

// harmless damages leave a valid file behind (mode 000 as root) or one that
// nothing needs (bad marks, startups).
func wantAfterDamage(file, damage string, reachable bool) outcome {
	if file == unwritable {
		// Nothing can be recorded: b, on trial, is not run (its crash
		// restarts could not be counted); a runs, read-only, and says so.
		return outcome{1, "Unknown", "using last known good: (UID: uid-a)" + readOnlyNote}
	}
	if reachable {
		return outcome{2, "True", "using current (UID: uid-b)"}
	}
	if damage == "mode 000" {
		return outcome{1, "Unknown", "using last known good: (UID: uid-a)"}
	}
	// Unreachable: the last-known-good runs, unless it is what was damaged.
	switch file {
	case "checkpoint of a", "last-known-good", "checkpoints/", "meta/":
		return outcome{0, "Unknown", status.LastKnownGoodMessage(status.Ref{}, status.LocalDefault)}
	}
	return outcome{1, "Unknown", "using last known good: (UID: uid-a)"}
}

func copyTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.HasSuffix(p, "/lock") {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func restoreTree(t *testing.T, files map[string][]byte, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for rel, data := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedQuarantineMatrix damages quarantine/ itself in every way a
// layout directory is damaged (internal/damage.Dir: missing, emptied, a
// foreign entry, a file, a FIFO, a symlink to a copy outside, a dangling
// symlink, a 100 MB file, mode 000) while a corrupt checkpoint of current
// must be moved into it: Bootstrap never hangs or fails, runs what it runs
// with an intact quarantine, and the corrupt file ends up inside the state
// dir, in a real quarantine directory (issue 21).
func TestDamagedQuarantineMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dozens of Bootstraps")
	}
	base, files := prepareDamageNode(t)
	q := filepath.Join(base.stateDir, checkpoint.QuarantineDir)
	if err := os.MkdirAll(q, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q, "20260101T000000.000000000Z-earlier"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	snapshot := copyTree(t, base.stateDir)
	for _, d := range damage.Dir(t) {
		for _, reachable := range []bool{true, false} {
			name := fmt.Sprintf("%s/reachable=%v", d.Name, reachable)
			restoreTree(t, snapshot, base.stateDir)
			if err := d.Apply(q); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := os.WriteFile(files["checkpoint of b"], []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := bootstrapWithin(t, base, reachable, name)
			if err != nil {
				t.Errorf("%s: Bootstrap: %v", name, err)
				continue
			}
			r := base.reporter.last()
			want := wantAfterDamage("checkpoint of b", "garbage", reachable)
			if cfg.Value != want.value || string(r.Status) != want.status || r.Message != want.message {
				t.Errorf("%s: ran value %d with %+v; want value %d, %s %q", name, cfg.Value, r, want.value, want.status, want.message)
			}
			if fi, err := os.Lstat(q); err != nil || !fi.IsDir() {
				t.Errorf("%s: quarantine/ is %v, %v; want a real directory", name, fi, err)
				continue
			}
			moved, _ := filepath.Glob(filepath.Join(q, "*-checkpoints_uid-b_*"))
			if len(moved) != 1 {
				t.Errorf("%s: the corrupt checkpoint of b in the quarantine: %v; want it there", name, moved)
			}
		}
	}
}
