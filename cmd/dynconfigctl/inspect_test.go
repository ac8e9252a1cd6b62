package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/checkpoint"
)

func TestInspectGolden(t *testing.T) {
	tests := []struct {
		golden string
		opts   inspectOptions
		locked bool // a running component holds the lock
	}{
		{golden: "inspect.txt", opts: inspectOptions{output: "text"}},
		{golden: "inspect.json", opts: inspectOptions{output: "json"}},
		{golden: "inspect-version.txt", opts: inspectOptions{output: "text", componentVersion: "v1.0.0"}},
		{golden: "inspect-nolock.txt", opts: inspectOptions{output: "text", noLock: true}, locked: true},
		{golden: "inspect-nolock.json", opts: inspectOptions{output: "json", noLock: true}, locked: true},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			f := newFixture(t)
			if tt.locked {
				f.holdLock(t)
			}
			tt.opts.dir = f.dir
			var out bytes.Buffer
			if err := runInspect(&out, tt.opts, testDeps(t, f.clock)); err != nil {
				t.Fatalf("inspect: %v", err)
			}
			checkGolden(t, tt.golden, bytes.ReplaceAll(out.Bytes(), []byte(f.dir), []byte("$STATE")))
		})
	}
}

// inspectJSON runs inspect -o json and decodes the report.
func inspectJSON(t *testing.T, opts inspectOptions, d deps) *inspectReport {
	t.Helper()
	opts.output = "json"
	var out bytes.Buffer
	if err := runInspect(&out, opts, d); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	rep := &inspectReport{}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(rep); err != nil {
		t.Fatalf("decode inspect's JSON: %v", err)
	}
	return rep
}

// summary is what TestInspectReport compares: the facts the fixture wrote.
type summary struct {
	Current, LastKnownGood         string // key, or "local"
	CurrentSet, LastKnownGoodSet   time.Time
	CurrentCkpt, LastKnownGoodCkpt string
	Checkpoints                    map[string]string // key -> status usedBy
	Marks                          map[string]map[string]string
	Startups                       map[string]int
	SinceSet                       map[string]int
}

func summarize(rep *inspectReport) summary {
	s := summary{Checkpoints: map[string]string{}, Marks: map[string]map[string]string{}, Startups: map[string]int{}, SinceSet: map[string]int{}}
	ptr := func(p *pointerReport) (string, time.Time, string) {
		if p.Local {
			return "local", *p.SetTime, ""
		}
		return checkpoint.Key{UID: p.UID, ResourceVersion: p.ResourceVersion}.String(), *p.SetTime, p.Checkpoint
	}
	s.Current, s.CurrentSet, s.CurrentCkpt = ptr(rep.Current)
	s.LastKnownGood, s.LastKnownGoodSet, s.LastKnownGoodCkpt = ptr(rep.LastKnownGood)
	for _, c := range rep.Checkpoints {
		s.Checkpoints[c.Key] = strings.TrimSpace(c.Status + " " + strings.Join(c.UsedBy, ","))
	}
	for _, v := range rep.ComponentVersions {
		s.Marks[v.ComponentVersion] = map[string]string{}
		for _, m := range v.BadConfigs {
			s.Marks[v.ComponentVersion][m.Key] = m.Time.Format(time.RFC3339Nano) + " " + m.Reason
		}
		s.Startups[v.ComponentVersion] = len(v.Startups)
		if v.StartupsSinceCurrentSet != nil {
			s.SinceSet[v.ComponentVersion] = *v.StartupsSinceCurrentSet
		}
	}
	return s
}

// TestInspectReport checks the JSON report against what the fixture wrote
// through the library, independently of the golden files.
func TestInspectReport(t *testing.T) {
	f := newFixture(t)
	rep := inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
	marks := map[string]map[string]string{}
	for v, m := range f.marks {
		marks[v] = map[string]string{}
		for k, e := range m {
			marks[v][k] = e.Time.Format(time.RFC3339Nano) + " " + e.Reason
		}
	}
	want := summary{
		Current:           checkpoint.KeyOf(f.currentCM).String(),
		CurrentSet:        f.currentSet,
		CurrentCkpt:       statusOK,
		LastKnownGood:     checkpoint.KeyOf(f.lkgCM).String(),
		LastKnownGoodSet:  t0,
		LastKnownGoodCkpt: statusOK,
		Checkpoints: map[string]string{
			checkpoint.KeyOf(f.lkgCM).String():     "ok lastKnownGood",
			checkpoint.KeyOf(f.currentCM).String(): "ok current",
			checkpoint.KeyOf(f.corruptCM).String(): "corrupt",
		},
		Marks:    marks,
		Startups: map[string]int{f.currentVersion: f.startups, f.oldV: 0},
		SinceSet: map[string]int{f.currentVersion: f.sinceSet, f.oldV: 0},
	}
	if diff := cmp.Diff(want, summarize(rep)); diff != "" {
		t.Errorf("inspect report (-want +got):\n%s", diff)
	}
	if !rep.Locked || rep.StateDir != f.dir {
		t.Errorf("locked = %v, stateDir = %q; want true, %q", rep.Locked, rep.StateDir, f.dir)
	}
	for _, c := range rep.Checkpoints {
		fi, err := os.Stat(filepath.Join(f.dir, "checkpoints", string(c.UID), c.ResourceVersion))
		if err != nil {
			t.Fatal(err)
		}
		if c.Size != fi.Size() {
			t.Errorf("checkpoint %s: size %d, file has %d bytes", c.Key, c.Size, fi.Size())
		}
	}
}

// TestInspectCorruptFiles: every corrupt or missing file is reported next to
// the rest, and inspect still succeeds.
func TestInspectCorruptFiles(t *testing.T) {
	garbage := []byte("{not json")
	tests := []struct {
		name  string
		file  string // relative to the state dir
		data  []byte // nil: remove the file
		check func(rep *inspectReport) (got, wantSubstring string)
	}{
		{
			name: "current pointer", file: "meta/current", data: garbage,
			check: func(rep *inspectReport) (string, string) { return rep.Current.Error, "meta/current" },
		},
		{
			name: "current pointer unreadable leaves no since-set count", file: "meta/current", data: garbage,
			check: func(rep *inspectReport) (string, string) {
				return strings.TrimSpace(strings.Repeat("count ", countSince(rep))), ""
			},
		},
		{
			name: "last-known-good pointer", file: "meta/last-known-good", data: []byte(`{"version":"dynconfig.io/pointer/v9"}`),
			check: func(rep *inspectReport) (string, string) { return rep.LastKnownGood.Error, "unknown envelope version" },
		},
		{
			name: "last-known-good checkpoint truncated", file: "checkpoints/uid-a/1", data: []byte{},
			check: func(rep *inspectReport) (string, string) { return rep.LastKnownGood.Checkpoint, statusCorrupt },
		},
		{
			name: "last-known-good checkpoint removed", file: "checkpoints/uid-a/1", data: nil,
			check: func(rep *inspectReport) (string, string) { return rep.LastKnownGood.Checkpoint, statusMissing },
		},
		{
			name: "bad-config file", file: "tracking/v1.0.0/bad-configs.json", data: garbage,
			check: func(rep *inspectReport) (string, string) {
				return rep.ComponentVersions[1].BadConfigsError, "bad-configs.json"
			},
		},
		{
			name: "startups file", file: "tracking/v1.0.0/startups.json", data: []byte(`["yesterday"]`),
			check: func(rep *inspectReport) (string, string) {
				return rep.ComponentVersions[1].StartupsError, "startups.json"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			path := filepath.Join(f.dir, tt.file)
			var err error
			if tt.data == nil {
				err = os.Remove(path)
			} else {
				err = os.WriteFile(path, tt.data, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			rep := inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
			if rep.ComponentVersions[1].ComponentVersion != f.currentVersion {
				t.Fatalf("component versions %+v: want %s second", rep.ComponentVersions, f.currentVersion)
			}
			got, want := tt.check(rep)
			if !strings.Contains(got, want) || (want == "" && got != "") {
				t.Errorf("got %q, want it to contain %q", got, want)
			}
			// The text form renders the same report without failing.
			var out bytes.Buffer
			if err := runInspect(&out, inspectOptions{dir: f.dir, output: "text"}, testDeps(t, f.clock)); err != nil {
				t.Fatalf("inspect text: %v", err)
			}
			if want != "" && !strings.Contains(out.String(), want) {
				t.Errorf("text output does not mention %q:\n%s", want, out.String())
			}
		})
	}
}

func countSince(rep *inspectReport) int {
	n := 0
	for _, v := range rep.ComponentVersions {
		if v.StartupsSinceCurrentSet != nil {
			n++
		}
	}
	return n
}

func TestInspectLocked(t *testing.T) {
	f := newFixture(t)
	f.holdLock(t)
	before := snapshot(t, f.dir)

	var out bytes.Buffer
	err := runInspect(&out, inspectOptions{dir: f.dir, output: "text"}, testDeps(t, f.clock))
	if !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("inspect of a locked dir: err = %v, want one that wraps checkpoint.ErrLocked", err)
	}
	if want := "state dir " + f.dir + " is in use by a running component; stop it or use --no-lock"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if out.Len() != 0 {
		t.Errorf("inspect wrote output before failing: %q", out.String())
	}

	rep := inspectJSON(t, inspectOptions{dir: f.dir, noLock: true}, testDeps(t, f.clock))
	if rep.Locked || rep.Current != nil || rep.LastKnownGood != nil {
		t.Errorf("--no-lock report claims to have read under the lock: locked %v, current %v, lkg %v", rep.Locked, rep.Current, rep.LastKnownGood)
	}
	var marks []string
	for _, v := range rep.ComponentVersions {
		for _, m := range v.BadConfigs {
			marks = append(marks, v.ComponentVersion+" "+m.Key)
		}
	}
	if diff := cmp.Diff([]string{"v0.9.0 uid-c/3", "v1.0.0 uid-b/2", "v1.0.0 uid-c/3"}, marks); diff != "" {
		t.Errorf("--no-lock bad marks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, f.dir)); diff != "" {
		t.Errorf("inspect changed the state dir (-before +after):\n%s", diff)
	}
}

// TestInspectNoLockSkipsTemporaryFiles: a write in progress by the running
// component is not listed as a checkpoint.
func TestInspectNoLockSkipsTemporaryFiles(t *testing.T) {
	f := newFixture(t)
	f.holdLock(t)
	if err := os.WriteFile(filepath.Join(f.dir, "checkpoints", "uid-a", ".tmp-1-123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := inspectJSON(t, inspectOptions{dir: f.dir, noLock: true}, testDeps(t, f.clock))
	var keys []string
	for _, c := range rep.Checkpoints {
		keys = append(keys, c.Key+" "+c.Status)
	}
	if diff := cmp.Diff([]string{"uid-a/1 unverified", "uid-b/2 unverified", "uid-c/3 unverified"}, keys); diff != "" {
		t.Errorf("--no-lock checkpoints (-want +got):\n%s", diff)
	}
}

// TestStateDirErrors: bad DIR arguments are refused by every command, and
// nothing is created.
func TestStateDirErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, root string) string // returns DIR
		version string
		wantErr string
	}{
		{
			name:    "missing",
			setup:   func(t *testing.T, root string) string { return filepath.Join(root, "nope") },
			wantErr: "does not exist",
		},
		{
			name: "a file",
			setup: func(t *testing.T, root string) string {
				p := filepath.Join(root, "file")
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			},
			wantErr: "is not a directory",
		},
		{
			name: "not a state dir",
			setup: func(t *testing.T, root string) string {
				p := filepath.Join(root, "etc")
				if err := os.MkdirAll(filepath.Join(p, "checkpoints"), 0o700); err != nil {
					t.Fatal(err)
				}
				return p
			},
			wantErr: "is not a dynconfig state dir: it has no meta/ directory",
		},
		{
			name: "unknown component version",
			setup: func(t *testing.T, root string) string {
				s := openStore(t, filepath.Join(root, "state"), "v1", nil)
				s.Close()
				return filepath.Join(root, "state")
			},
			version: "v2",
			wantErr: `has no tracking dir for component version "v2" (present: v1)`,
		},
		{
			name: "no component version",
			setup: func(t *testing.T, root string) string {
				s := openStore(t, filepath.Join(root, "state"), "v1", nil)
				s.Close()
				if err := os.Remove(filepath.Join(root, "state", "tracking", "v1")); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(root, "state")
			},
			wantErr: "tracking/ holds no component version directory",
		},
	}
	commands := map[string]func(d deps, dir, version string) error{
		"inspect": func(d deps, dir, version string) error {
			return runInspect(&bytes.Buffer{}, inspectOptions{dir: dir, componentVersion: version, output: "text"}, d)
		},
		"forget-bad": func(d deps, dir, version string) error {
			return runForgetBad(&bytes.Buffer{}, forgetBadOptions{dir: dir, key: "uid/1", componentVersion: version}, d)
		},
		"reset": func(d deps, dir, version string) error {
			return runReset(&bytes.Buffer{}, resetOptions{dir: dir, componentVersion: version}, d)
		},
	}
	for _, tt := range tests {
		for name, command := range commands {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				root := t.TempDir()
				dir := tt.setup(t, root)
				before := snapshot(t, root)
				err := command(testDeps(t, nil), dir, tt.version)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
					t.Errorf("a refused command changed the file system (-before +after):\n%s", diff)
				}
			})
		}
	}
}
