package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// unreachable is a Remote whose assignment cannot be read, like an API
// server that is down during Bootstrap.
type unreachable struct{}

func (unreachable) Assigned(context.Context) (source.Assignment, error) {
	return source.Assignment{}, errors.New("connection refused")
}
func (unreachable) Run(ctx context.Context, _ func()) error { <-ctx.Done(); return nil }

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
	n.start()
	n.clock.Step(2 * time.Minute)
	n.start() // a promoted
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
		matches, _ := filepath.Glob(filepath.Join(n.stateDir, "checkpoints", uid, "*"))
		if len(matches) != 1 {
			t.Fatalf("%s: %v", name, matches)
		}
		files[name] = matches[0]
	}
	return n, files
}

// damages returns the ways a file is broken: truncated at a sample of
// offsets (every offset below 64, then every 23rd; the packages' own tests
// cover every offset of every file), garbage, empty, missing, a directory.
func damages(valid []byte) map[string]func(path string) error {
	d := map[string]func(string) error{
		"garbage":   func(p string) error { return os.WriteFile(p, []byte("\x00\xffnot json{"), 0o600) },
		"empty":     func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"missing":   os.Remove,
		"directory": func(p string) error { _ = os.Remove(p); return os.Mkdir(p, 0o700) },
	}
	for i := 1; i < len(valid); i++ {
		if i >= 64 && i%23 != 0 {
			continue
		}
		n := i
		d[fmt.Sprintf("truncated at %d", n)] = func(p string) error { return os.WriteFile(p, valid[:n], 0o600) }
	}
	return d
}

// TestCorruptionMatrix damages each state file in many ways and checks
// that Bootstrap never fails or panics and makes the right fallback
// decision: with the source reachable, state is repaired from it and b
// runs (a directory squatting on a file's path cannot be repaired: the
// desired config is then unclear and the last-known-good runs); with the source unreachable, the last-known-good runs, or the
// local config when the last-known-good itself is damaged.
func TestCorruptionMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hundreds of Bootstraps")
	}
	base, files := prepareDamageNode(t)
	snapshot := copyTree(t, base.stateDir)
	for fileName, path := range files {
		valid, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(base.stateDir, path)
		for damageName, damage := range damages(valid) {
			for _, reachable := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/reachable=%v", fileName, damageName, reachable)
				restoreTree(t, snapshot, base.stateDir)
				if err := damage(filepath.Join(base.stateDir, rel)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				c := base.controller(func(o *Options[testConfig]) {
					if !reachable {
						o.Remote = unreachable{}
					}
				})
				cfg, err := c.Bootstrap(context.Background())
				c.Close()
				if err != nil {
					t.Errorf("%s: Bootstrap: %v", name, err)
					continue
				}
				r := base.reporter.last()
				want := wantAfterDamage(fileName, damageName, reachable)
				if cfg.Value != want.value || string(r.Status) != want.status || r.Message != want.message {
					t.Errorf("%s: ran value %d with %+v; want value %d, %s %q", name, cfg.Value, r, want.value, want.status, want.message)
				}
			}
		}
	}
}

type outcome struct {
	value   int
	status  string
	message string
}

func wantAfterDamage(file, damage string, reachable bool) outcome {
	if reachable {
		if damage == "directory" && (file == "current" || file == "checkpoint of b") {
			// The repair write cannot replace a directory: the desired
			// config cannot be made current, so it is unclear.
			return outcome{1, "Unknown", "using last known good: (UID: uid-a)"}
		}
		return outcome{2, "True", "using current (UID: uid-b)"}
	}
	// Unreachable: the last-known-good runs, unless it is what was damaged.
	lkgGone := file == "checkpoint of a" || (file == "last-known-good" && damage != "empty" && damage != "missing")
	if file == "last-known-good" && (damage == "empty" || damage == "missing") {
		lkgGone = true // an empty or missing pointer means local
	}
	if lkgGone {
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
