package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/internal/damage"
	"github.com/dynconfig/dynconfig/lkg"
)

// damageVersion is the component version of the damage fixture.
const damageVersion = "v1.0.0"

// inspectTimeout bounds one inspect: longer is a hang (a FIFO waited on).
const inspectTimeout = 20 * time.Second

// damageFixture is a state dir as a component leaves it, written with
// checkpoint.Store, kept in memory to be laid out afresh for each damage.
type damageFixture struct {
	dirs  []string          // relative to the state dir
	files map[string][]byte // relative to the state dir
	clock *testclock.FakePassiveClock
	// targets are the state files and directories, by name, relative to
	// the state dir (directories end in "/").
	targets map[string]string
}

// newDamageFixture follows the lifecycle that leaves every kind of state
// file behind, as the component does (see examples/kubelet-like's damage
// matrix):
//
//	uid-invalid/3 was assigned, failed validation and is marked bad;
//	uid-good/1 was assigned, ran its trial and is last-known-good;
//	uid-current/2 (trial 10m) is current, in its trial; three startups.
//
// The clean state dir has nothing for inspect to complain about.
func newDamageFixture(t *testing.T) *damageFixture {
	t.Helper()
	clk := testclock.NewFakePassiveClock(t0)
	dir := filepath.Join(t.TempDir(), "state")
	good := newConfigMap("kube-system", "kubelet-good", "uid-good", "1", map[string]string{"kubelet": "kind: KubeletConfiguration\nmaxPods: 42\n"})
	good.Annotations = map[string]string{components.TrialDurationAnnotation: "1m"}
	current := newConfigMap("kube-system", "kubelet-current", "uid-current", "2", map[string]string{"kubelet": "kind: KubeletConfiguration\nmaxPods: 77\n"})
	current.Annotations = map[string]string{components.TrialDurationAnnotation: "10m"}
	invalid := newConfigMap("kube-system", "kubelet-invalid", "uid-invalid", "3", map[string]string{"kubelet": "kind: KubeletConfiguration\nmaxPods: -1\n"})

	s := openStore(t, dir, damageVersion, clk)
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk.Now().Add(time.Second))
	}
	for _, cm := range []*corev1.ConfigMap{good, current, invalid} {
		_, err := s.Save(cm)
		step(err)
	}
	step(s.SetCurrent(sourceOf(invalid)))
	_, err := s.RecordStartup()
	step(err)
	step(s.MarkBad(sourceOf(invalid), checkpoint.BadMark{Reason: "failed to validate current (UID: uid-invalid)", Problem: lkg.ProblemValidateFailed.String()}))
	step(s.SetCurrent(sourceOf(good)))
	_, err = s.RecordStartup()
	step(err)
	_, err = s.RecordFirstRun()
	step(err)
	clk.SetTime(clk.Now().Add(time.Minute))
	step(s.SetLastKnownGood(sourceOf(good)))
	step(s.SetCurrent(sourceOf(current)))
	_, err = s.RecordStartup()
	step(err)
	_, err = s.RecordFirstRun()
	step(err)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The last-known-good was checkpointed by an older version, in the
	// nested layout (checkpoints/<uid>/<rv>); the others are flat.
	if err := os.Mkdir(filepath.Join(dir, "checkpoints", "uid-good"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "checkpoints", "uid-good_1"), filepath.Join(dir, "checkpoints", "uid-good", "1")); err != nil {
		t.Fatal(err)
	}

	f := &damageFixture{files: map[string][]byte{}, clock: clk}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			f.dirs = append(f.dirs, rel)
		case rel == "lock":
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			f.files[rel] = data
			return err
		default:
			return fmt.Errorf("%s: unexpected %v", p, d.Type())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.targets = map[string]string{
		"current":                         "meta/current",
		"last-known-good":                 "meta/last-known-good",
		"bad-configs":                     "tracking/" + damageVersion + "/" + checkpoint.BadConfigsFile,
		"startups":                        "tracking/" + damageVersion + "/" + checkpoint.StartupsFile,
		"checkpoint of good":              "checkpoints/uid-good/1",
		"checkpoint of current":           "checkpoints/uid-current_2",
		"checkpoint of invalid":           "checkpoints/uid-invalid_3",
		"checkpoints/":                    "checkpoints/",
		"checkpoints/uid-good/":           "checkpoints/uid-good/",
		"meta/":                           "meta/",
		"tracking/":                       "tracking/",
		"tracking/" + damageVersion + "/": "tracking/" + damageVersion + "/",
		"tmp/":                            "tmp/",
	}
	for name, rel := range f.targets {
		if _, ok := f.files[rel]; !ok && !strings.HasSuffix(rel, "/") {
			t.Fatalf("the fixture has no %s (%s)", name, rel)
		}
	}
	return f
}

// write lays the fixture out as a new state dir under a temporary dir.
func (f *damageFixture) write(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	for _, d := range f.dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for rel, data := range f.files {
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// damage is one way to break a state file or directory.

// entryState is what treeState records of an entry: anything inspect
// could change about it (ctime moves with every change, chmod and rename
// included).
type entryState struct {
	Mode   fs.FileMode
	Size   int64
	Ino    uint64
	MTime  time.Time
	CTime  time.Time
	Link   string   // a symlink's target
	SHA256 [32]byte // of a regular file of at most 8 MB that can be read
}

// treeState records every entry under dir without following symlinks or
// opening anything but regular files.
func treeState(t *testing.T, dir string) map[string]entryState {
	t.Helper()
	out := map[string]entryState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil // a mode 000 directory, as non-root: recorded, not listed
			}
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		e := entryState{Mode: fi.Mode(), Size: fi.Size(), Ino: st.Ino, MTime: fi.ModTime(),
			CTime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec)}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Link, _ = os.Readlink(p)
		case fi.Mode().IsRegular() && fi.Size() <= 8<<20:
			if data, err := os.ReadFile(p); err == nil {
				e.SHA256 = sha256.Sum256(data)
			}
		}
		out[strings.TrimPrefix(p, dir)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runWithin runs the command line args and fails the test if it does not
// finish within inspectTimeout (a FIFO must never block it). It returns the
// exit code, stdout and stderr.
func runWithin(t *testing.T, args []string, d deps) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut, d)
		done <- result{code, out.String(), errOut.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(inspectTimeout):
		// The goroutine stays blocked; the test binary ends anyway.
		t.Fatalf("dynconfigctl %s did not finish within %v", strings.Join(args, " "), inspectTimeout)
		return 0, "", ""
	}
}

// jsonStrings returns every string in a decoded JSON value (unescaped).
func jsonStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return nil
}

// damageFacts are what inspect reads from the fixture, keyed by what they
// depend on: a fact holds unless the damage is to one of its sources.
type damageFact struct {
	// sources are targets (names in damageFixture.targets) whose damage
	// may hide the fact.
	sources []string
	// json checks the fact in the JSON report, text in the text output.
	json func(*inspectReport) bool
	text *regexp.Regexp
}

func damageFacts() map[string]damageFact {
	ptr := func(p *pointerReport, uid, rv string) bool {
		return p.Error == "" && !p.Local && string(p.UID) == uid && p.ResourceVersion == rv
	}
	ckpt := func(key string) func(*inspectReport) bool {
		return func(rep *inspectReport) bool {
			for _, c := range rep.Checkpoints {
				if c.Key == key {
					return c.Status == statusOK
				}
			}
			return false
		}
	}
	version := func(rep *inspectReport) *trackingReport {
		for i := range rep.ComponentVersions {
			if rep.ComponentVersions[i].ComponentVersion == damageVersion {
				return &rep.ComponentVersions[i]
			}
		}
		return nil
	}
	tracking := []string{"tracking/", "tracking/" + damageVersion + "/"}
	return map[string]damageFact{
		"current pointer": {
			sources: []string{"current", "meta/"},
			json:    func(rep *inspectReport) bool { return ptr(rep.Current, "uid-current", "2") },
			text:    regexp.MustCompile(`(?m)^Current: +ConfigMap kube-system/kubelet-current \(UID: uid-current, resourceVersion: 2,`),
		},
		"last-known-good pointer": {
			sources: []string{"last-known-good", "meta/"},
			json:    func(rep *inspectReport) bool { return ptr(rep.LastKnownGood, "uid-good", "1") },
			text:    regexp.MustCompile(`(?m)^Last-known-good: +ConfigMap kube-system/kubelet-good \(UID: uid-good, resourceVersion: 1,`),
		},
		"checkpoint of good": {
			sources: []string{"checkpoint of good", "checkpoints/", "checkpoints/uid-good/"},
			json:    ckpt("uid-good/1"),
			text:    regexp.MustCompile(`(?m)^  uid-good/1 +kube-system/kubelet-good +kubelet +\d+ +ok `),
		},
		"checkpoint of current": {
			sources: []string{"checkpoint of current", "checkpoints/"},
			json:    ckpt("uid-current/2"),
			text:    regexp.MustCompile(`(?m)^  uid-current/2 +kube-system/kubelet-current +kubelet +\d+ +ok `),
		},
		"checkpoint of invalid": {
			sources: []string{"checkpoint of invalid", "checkpoints/"},
			json:    ckpt("uid-invalid/3"),
			text:    regexp.MustCompile(`(?m)^  uid-invalid/3 +kube-system/kubelet-invalid +kubelet +\d+ +ok `),
		},
		"bad mark": {
			sources: append([]string{"bad-configs"}, tracking...),
			json: func(rep *inspectReport) bool {
				v := version(rep)
				return v != nil && v.BadConfigsError == "" && len(v.BadConfigs) == 1 && v.BadConfigs[0].Key == "uid-invalid/3/kubelet"
			},
			text: regexp.MustCompile(`(?m)^    uid-invalid/3/kubelet +\S+ +ValidateFailed `),
		},
		"startups": {
			sources: append([]string{"startups"}, tracking...),
			json: func(rep *inspectReport) bool {
				v := version(rep)
				return v != nil && v.StartupsError == "" && len(v.Startups) == 3
			},
			text: regexp.MustCompile(`(?m)^  Startups \(3 recorded`),
		},
	}
}

// damageCase is one damage to one state file or directory.
type damageCase struct {
	target string // its name in damageFixture.targets
	rel    string // its path in the state dir
	damage damage.Damage
}

// harmless damages change nothing inspect reads: mode 000 as root (which
// reads anyway), a foreign entry in a directory that inspect does not
// list or that the layout does not forbid.
func (c damageCase) harmless() bool {
	switch c.damage.Name {
	case "mode 000":
		return os.Geteuid() == 0
	case "foreign entry":
		return c.target != "checkpoints/" && c.target != "tracking/"
	case "emptied":
		return c.target == "tmp/" // it is empty
	}
	return false
}

// hidesFacts reports whether the damage may hide what its target holds (a
// foreign entry beside it does not).
func (c damageCase) hidesFacts() bool {
	return !c.harmless() && c.damage.Name != "foreign entry"
}

// mustName reports whether inspect's output must name the damaged path.
// What inspect cannot tell from a state dir that never had it is exempt: a
// missing tracking file (no marks, no startups yet), a missing checkpoint
// that nothing references (garbage-collected), a missing or emptied
// tracking directory (a version that never ran), a missing tmp/ (state
// dirs of older versions have none), and a missing checkpoint that a
// pointer references or an emptied checkpoints/ (checked through the
// pointers instead, see checkpointMissing).
func (c damageCase) mustName() bool {
	if c.harmless() {
		return false
	}
	switch c.damage.Name {
	case "missing":
		switch c.target {
		case "current", "last-known-good", "checkpoints/", "meta/", "tracking/":
			return true
		}
		return false
	case "emptied":
		return c.target == "meta/" // both pointers missing
	}
	return true
}

// checkpointMissing returns the pointers whose checkpoint inspect must
// show as missing after the damage.
func (c damageCase) checkpointMissing() []string {
	if c.harmless() {
		return nil
	}
	gone := c.damage.Name == "missing" || c.damage.Name == "emptied"
	switch {
	case c.target == "checkpoint of good" && c.damage.Name == "missing",
		c.target == "checkpoints/uid-good/" && gone:
		return []string{refLastKnownGood}
	case c.target == "checkpoint of current" && c.damage.Name == "missing":
		return []string{refCurrent}
	case c.target == "checkpoints/" && gone:
		return []string{refCurrent, refLastKnownGood}
	}
	return nil
}

// TestInspectDamageMatrix damages each state file and each directory of a
// state dir written with checkpoint.Store in each way of fileDamages and
// dirDamages, and runs `dynconfigctl inspect DIR` (text and -o json) twice:
// with the lock, on a stopped component, and with --no-lock while a Store
// holds the lock, as a running component does (the damage is done after it
// opened the state dir, which would have repaired some of it). Each run
// must finish within inspectTimeout (a FIFO must not block it), exit 0,
// name the damaged path in both forms (mustName), still show every fact the
// damage does not touch (damageFacts), and leave the state dir exactly as
// it was. With -short, fewer truncation and bit-flip offsets.
func TestInspectDamageMatrix(t *testing.T) {
	f := newDamageFixture(t)
	facts := damageFacts()

	// The clean state dir: every fact, and nothing to complain about.
	clean := f.write(t)
	code, out, errOut := runWithin(t, []string{"inspect", "-o", "json", clean}, testDeps(t, f.clock))
	if code != 0 {
		t.Fatalf("inspect of the clean fixture: exit %d\n%s", code, errOut)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 || len(rep.Quarantine) > 0 {
		t.Fatalf("the clean fixture has problems %q, quarantine %q", rep.Problems, rep.Quarantine)
	}
	_, text, _ := runWithin(t, []string{"inspect", clean}, testDeps(t, f.clock))
	for name, fact := range facts {
		if !fact.json(&rep) || !fact.text.MatchString(text) {
			t.Fatalf("the clean fixture does not show the %s:\n%s", name, text)
		}
	}
	if strings.Contains(text, "UNREADABLE") || strings.Contains(text, "corrupt") {
		t.Fatalf("the clean fixture shows damage:\n%s", text)
	}

	var cases []damageCase
	names := make([]string, 0, len(f.targets))
	for name := range f.targets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rel := f.targets[name]
		if strings.HasSuffix(rel, "/") {
			for _, d := range damage.Dir(t) {
				cases = append(cases, damageCase{target: name, rel: rel, damage: d})
			}
			continue
		}
		for _, d := range damage.File(t, f.files[rel], sampleOffsets(len(f.files[rel]), testing.Short())) {
			cases = append(cases, damageCase{target: name, rel: rel, damage: d})
		}
	}
	t.Logf("%d damages, each inspected with and without the lock", len(cases))
	for _, c := range cases {
		t.Run(c.target+"/"+c.damage.Name, func(t *testing.T) {
			inspectDamaged(t, f, facts, c)
		})
	}
}

func inspectDamaged(t *testing.T, f *damageFixture, facts map[string]damageFact, c damageCase) {
	dir := f.write(t)
	path := filepath.Join(dir, strings.TrimSuffix(c.rel, "/"))

	// The running component: it opened the state dir, then the damage came.
	s := openStore(t, dir, damageVersion, f.clock)
	if err := c.damage.Apply(path); err != nil {
		s.Close()
		t.Fatalf("damage: %v", err)
	}
	t.Cleanup(func() { _ = os.Chmod(path, 0o700) }) // for TempDir's cleanup
	before := treeState(t, dir)
	check := func(noLock bool) {
		t.Helper()
		for _, output := range []string{"text", "json"} {
			args := []string{"inspect", "-o", output, dir}
			if noLock {
				args = append(args, "--no-lock")
			}
			what := strings.Join(args[:3], " ")
			if noLock {
				what += " --no-lock"
			}
			code, out, errOut := runWithin(t, args, testDeps(t, f.clock))
			if code != exitOK {
				t.Errorf("%s: exit %d, want 0 (a damaged state dir is shown, never refused); stderr:\n%s", what, code, errOut)
				continue
			}
			var rep inspectReport
			named := strings.Contains(out, path)
			if output == "json" {
				var v any
				if err := json.Unmarshal([]byte(out), &v); err != nil {
					t.Fatalf("%s: %v\n%s", what, err, out)
				}
				named = false
				for _, str := range jsonStrings(v) {
					named = named || strings.Contains(str, path)
				}
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			if c.mustName() && !named {
				t.Errorf("%s does not name %s:\n%s", what, path, out)
			}
			for name, fact := range facts {
				touched := false
				for _, src := range fact.sources {
					touched = touched || (src == c.target && c.hidesFacts())
				}
				if touched {
					continue
				}
				if (output == "json" && !fact.json(&rep)) || (output == "text" && !fact.text.MatchString(out)) {
					t.Errorf("%s does not show the %s, which the damage does not touch:\n%s", what, name, out)
				}
			}
			if output == "json" {
				for _, ref := range c.checkpointMissing() {
					p := rep.Current
					if ref == refLastKnownGood {
						p = rep.LastKnownGood
					}
					if p.Checkpoint != statusMissing {
						t.Errorf("%s: %s's checkpoint is %q, want %q", what, ref, p.Checkpoint, statusMissing)
					}
				}
			}
		}
	}
	check(true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(false)
	if diff := cmp.Diff(before, treeState(t, dir)); diff != "" {
		t.Errorf("inspect changed the state dir (-before +after):\n%s", diff)
	}
}

// sampleOffsets returns the offsets to truncate and flip at: with short,
// the middle one; else a spread of 16.
func sampleOffsets(n int, short bool) []int {
	if short {
		return []int{n / 2}
	}
	return damage.SampleOffsets(n, 16)
}
