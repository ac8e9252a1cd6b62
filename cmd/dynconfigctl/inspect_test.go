package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
)

func TestInspectGolden(t *testing.T) {
	tests := []struct {
		golden string
		opts   inspectOptions
		locked bool // a running component holds the lock
		// prepare, if set, changes the fixture.
		prepare func(t *testing.T, f *fixture)
	}{
		{golden: "inspect.txt", opts: inspectOptions{output: "text"}},
		{golden: "inspect.json", opts: inspectOptions{output: "json"}},
		{golden: "inspect-version.txt", opts: inspectOptions{output: "text", componentVersion: "v1.0.0"}},
		{golden: "inspect-nolock.txt", opts: inspectOptions{output: "text", noLock: true}, locked: true},
		{golden: "inspect-nolock.json", opts: inspectOptions{output: "json", noLock: true}, locked: true},
		{
			golden: "inspect-deadend.txt", opts: inspectOptions{output: "text", componentVersion: "v1.0.0"},
			prepare: func(t *testing.T, f *fixture) { f.addStartups(t, fixtureThreshold+1) },
		},
		{
			golden: "inspect-deadend.json", opts: inspectOptions{output: "json", componentVersion: "v1.0.0", noLock: true},
			prepare: func(t *testing.T, f *fixture) { f.addStartups(t, fixtureThreshold+1) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			f := newFixture(t)
			if tt.prepare != nil {
				tt.prepare(t, f)
			}
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
	CurrentFirstRun                time.Time
	CurrentCkpt, LastKnownGoodCkpt string
	Trial                          string
	Checkpoints                    map[string]string // key -> status usedBy
	Marks                          map[string]map[string]string
	Startups                       map[string]int
	SinceSet                       map[string]int
	SinceFirstRun                  map[string]int
	DeadEnds                       map[string]string
}

func summarize(rep *inspectReport) summary {
	s := summary{
		Checkpoints: map[string]string{}, Marks: map[string]map[string]string{}, Startups: map[string]int{},
		SinceSet: map[string]int{}, SinceFirstRun: map[string]int{}, DeadEnds: map[string]string{},
	}
	ptr := func(p *pointerReport) (string, time.Time, string) {
		if p.Local {
			return "local", *p.SetTime, ""
		}
		return checkpoint.Key{UID: p.UID, ResourceVersion: p.ResourceVersion}.String(), *p.SetTime, p.Checkpoint
	}
	s.Current, s.CurrentSet, s.CurrentCkpt = ptr(rep.Current)
	s.LastKnownGood, s.LastKnownGoodSet, s.LastKnownGoodCkpt = ptr(rep.LastKnownGood)
	if rep.Current.FirstRun != nil {
		s.CurrentFirstRun = *rep.Current.FirstRun
	}
	if tr := rep.Current.Trial; tr != nil {
		s.Trial = fmt.Sprintf("%s %d %s", tr.Duration, tr.CrashLoopThreshold, tr.From)
		if tr.Ends != nil {
			s.Trial += " ends " + tr.Ends.Format(time.RFC3339Nano)
		}
		s.Trial = strings.TrimSpace(s.Trial + fmt.Sprintf(" over=%v %s", tr.Over, tr.Error))
	}
	for _, c := range rep.Checkpoints {
		s.Checkpoints[c.Key] = strings.TrimSpace(c.Status + " " + strings.Join(c.UsedBy, ","))
	}
	for _, v := range rep.ComponentVersions {
		s.Marks[v.ComponentVersion] = map[string]string{}
		for _, m := range v.BadConfigs {
			s.Marks[v.ComponentVersion][m.Key] = strings.TrimSpace(m.Time.Format(time.RFC3339Nano) + " " + m.Problem + " " + m.Reason + " " + strings.Join(m.UsedBy, ","))
		}
		s.Startups[v.ComponentVersion] = len(v.Startups)
		if v.StartupsSinceCurrentSet != nil {
			s.SinceSet[v.ComponentVersion] = *v.StartupsSinceCurrentSet
		}
		if v.CrashRestartsSinceFirstRun != nil {
			s.SinceFirstRun[v.ComponentVersion] = *v.CrashRestartsSinceFirstRun
		}
		if v.DeadEnd != nil {
			s.DeadEnds[v.ComponentVersion] = v.DeadEnd.MarkKey
		}
	}
	return s
}

// TestInspectReport checks the JSON report against what the fixture wrote
// through the library, independently of the golden files, with and without
// the lock.
func TestInspectReport(t *testing.T) {
	for _, noLock := range []bool{false, true} {
		t.Run(fmt.Sprintf("noLock=%v", noLock), func(t *testing.T) {
			f := newFixture(t)
			if noLock {
				f.holdLock(t)
			}
			rep := inspectJSON(t, inspectOptions{dir: f.dir, noLock: noLock}, testDeps(t, f.clock))
			marks := map[string]map[string]string{}
			for v, m := range f.marks {
				marks[v] = map[string]string{}
				for k, e := range m {
					usedBy := ""
					if strings.HasPrefix(k, "uid-b/2") {
						usedBy = "current"
					}
					marks[v][k] = strings.TrimSpace(e.Time.Format(time.RFC3339Nano) + " " + e.Problem + " " + e.Reason + " " + usedBy)
				}
			}
			want := summary{
				Current:           checkpoint.KeyOf(f.currentCM).String(),
				CurrentSet:        f.currentSet,
				CurrentFirstRun:   f.firstRun,
				CurrentCkpt:       statusOK,
				Trial:             "5m0s 2 annotations ends " + f.firstRun.Add(fixtureTrial).Format(time.RFC3339Nano) + " over=false",
				LastKnownGood:     checkpoint.KeyOf(f.lkgCM).String(),
				LastKnownGoodSet:  t0,
				LastKnownGoodCkpt: statusOK,
				Checkpoints: map[string]string{
					checkpoint.KeyOf(f.lkgCM).String():     "ok lastKnownGood",
					checkpoint.KeyOf(f.currentCM).String(): "ok current",
					checkpoint.KeyOf(f.corruptCM).String(): "corrupt",
				},
				Marks:         marks,
				Startups:      map[string]int{f.currentVersion: f.startups, f.oldV: 0},
				SinceSet:      map[string]int{f.currentVersion: f.sinceSet, f.oldV: 0},
				SinceFirstRun: map[string]int{f.currentVersion: f.sinceFirstRun, f.oldV: 0},
				DeadEnds:      map[string]string{},
			}
			if diff := cmp.Diff(want, summarize(rep)); diff != "" {
				t.Errorf("inspect report (-want +got):\n%s", diff)
			}
			if f.sinceFirstRun != fixtureThreshold+1 || f.sinceSet != fixtureThreshold+2 {
				t.Errorf("fixture: %d startups since current was set, %d since its first run", f.sinceSet, f.sinceFirstRun)
			}
			if rep.Locked == noLock || rep.StateDir != f.dir {
				t.Errorf("locked = %v, stateDir = %q; want %v, %q", rep.Locked, rep.StateDir, !noLock, f.dir)
			}
			if len(rep.Quarantine) != 0 || len(rep.Problems) != 0 {
				t.Errorf("quarantine %q, problems %q; want none", rep.Quarantine, rep.Problems)
			}
			for _, c := range rep.Checkpoints {
				fi, err := os.Stat(filepath.Join(f.dir, "checkpoints", string(c.UID)+"_"+c.ResourceVersion))
				if errors.Is(err, fs.ErrNotExist) { // the nested layout of older versions
					fi, err = os.Stat(filepath.Join(f.dir, "checkpoints", string(c.UID), c.ResourceVersion))
				}
				if err != nil {
					t.Fatal(err)
				}
				if c.Size != fi.Size() {
					t.Errorf("checkpoint %s: size %d, file has %d bytes", c.Key, c.Size, fi.Size())
				}
			}
		})
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
	if rep.Locked {
		t.Errorf("--no-lock report claims to have read under the lock")
	}
	// --no-lock reads everything the locked inspect reads.
	if rep.Current.UID != "uid-b" || rep.Current.FirstRun == nil || rep.Current.Trial == nil || rep.LastKnownGood.UID != "uid-a" {
		t.Errorf("--no-lock did not read the pointers: current %+v, last-known-good %+v", rep.Current, rep.LastKnownGood)
	}
	var marks []string
	for _, v := range rep.ComponentVersions {
		for _, m := range v.BadConfigs {
			marks = append(marks, v.ComponentVersion+" "+m.Key)
		}
	}
	if diff := cmp.Diff([]string{"v0.9.0 uid-c/3", "v1.0.0 uid-b/2/kubelet", "v1.0.0 uid-c/3/kubelet"}, marks); diff != "" {
		t.Errorf("--no-lock bad marks (-want +got):\n%s", diff)
	}
	if got := len(rep.ComponentVersions[1].Startups); got != f.startups {
		t.Errorf("--no-lock read %d startups, want %d", got, f.startups)
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
	if diff := cmp.Diff([]string{"uid-a/1 ok", "uid-b/2 ok", "uid-c/3 corrupt"}, keys); diff != "" {
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
		// inspectOK: inspect, which needs no component version, shows the
		// dir.
		inspectOK bool
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
				if err := os.RemoveAll(filepath.Join(root, "state", "tracking", "v1")); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(root, "state")
			},
			wantErr:   "tracking/ holds no component version directory",
			inspectOK: true,
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
				if tt.inspectOK && name == "inspect" {
					if err != nil {
						t.Errorf("inspect: %v", err)
					}
				} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
					t.Errorf("a refused command changed the file system (-before +after):\n%s", diff)
				}
			})
		}
	}
}

// runInspectWithin runs inspect and fails the test if it does not finish in
// time: a FIFO must never block it.
func runInspectWithin(t *testing.T, opts inspectOptions, d deps) (string, error) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		err := runInspect(&out, opts, d)
		done <- result{out.String(), err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(20 * time.Second):
		// The goroutine stays blocked; the test binary ends anyway.
		t.Fatalf("inspect %+v did not finish within 20s (blocked on a FIFO?)", opts)
		return "", nil
	}
}

// replaceWith puts something other than a regular file at path.
func replaceWith(t *testing.T, path, kind string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "directory":
		err = os.Mkdir(path, 0o700)
	case "symlink":
		err = os.Symlink(filepath.Join(filepath.Dir(path), "elsewhere"), path)
	case "garbage":
		err = os.WriteFile(path, []byte("\x00\xffgarbage{"), 0o600)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestInspectNoLockFIFO: with a FIFO in place of bad-configs.json,
// startups.json and meta/current, while the component holds the lock,
// inspect --no-lock finishes, names each file as unreadable and shows the
// rest (the old CLI hung forever on such a FIFO).
func TestInspectNoLockFIFO(t *testing.T) {
	f := newFixture(t)
	files := []string{
		filepath.Join(f.dir, "tracking", f.currentVersion, checkpoint.BadConfigsFile),
		filepath.Join(f.dir, "tracking", f.currentVersion, checkpoint.StartupsFile),
		filepath.Join(f.dir, "meta", "current"),
	}
	for _, p := range files {
		replaceWith(t, p, "fifo")
	}
	f.holdLock(t)
	before := snapshot(t, f.dir)
	for _, output := range []string{"text", "json"} {
		out, err := runInspectWithin(t, inspectOptions{dir: f.dir, noLock: true, output: output}, testDeps(t, f.clock))
		if err != nil {
			t.Fatalf("inspect --no-lock -o %s: %v", output, err)
		}
		for _, p := range files {
			if !strings.Contains(out, p) {
				t.Errorf("-o %s does not name %s:\n%s", output, p, out)
			}
		}
		if output == "text" {
			for _, want := range []string{
				"Current:          UNREADABLE: corrupt file " + files[2],
				"Bad configs: UNREADABLE: corrupt file " + files[0],
				"Startups: UNREADABLE: corrupt file " + files[1],
				"Last-known-good:  ConfigMap kube-system/kubelet-a",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("text output does not contain %q:\n%s", want, out)
				}
			}
		}
	}
	rep := inspectJSON(t, inspectOptions{dir: f.dir, noLock: true}, testDeps(t, f.clock))
	cv := rep.ComponentVersions[1]
	if !strings.Contains(rep.Current.Error, "not a regular file") || !strings.Contains(cv.BadConfigsError, "not a regular file") ||
		!strings.Contains(cv.StartupsError, "not a regular file") {
		t.Errorf("errors: current %q, bad configs %q, startups %q; want each to say it is not a regular file",
			rep.Current.Error, cv.BadConfigsError, cv.StartupsError)
	}
	if diff := cmp.Diff(before, snapshot(t, f.dir)); diff != "" {
		t.Errorf("inspect --no-lock changed the state dir (-before +after):\n%s", diff)
	}
}

// TestInspectForeignFiles: a FIFO, a directory, a symbolic link or garbage
// in place of any state file is shown as unreadable naming the file, with
// and without the lock, and never fails the command.
func TestInspectForeignFiles(t *testing.T) {
	files := []string{
		"meta/current",
		"meta/last-known-good",
		"checkpoints/uid-a/1",
		"tracking/v1.0.0/" + checkpoint.BadConfigsFile,
		"tracking/v1.0.0/" + checkpoint.StartupsFile,
		// Directories of the layout (an empty directory in their place is
		// no damage).
		"meta/",
		"checkpoints/uid-a/",
		"tracking/v1.0.0/",
		"tracking/",
		"checkpoints/",
	}
	for _, file := range files {
		kinds := []string{"fifo", "directory", "symlink", "garbage"}
		if strings.HasSuffix(file, "/") {
			file, kinds = strings.TrimSuffix(file, "/"), []string{"fifo", "symlink", "garbage"}
		}
		for _, kind := range kinds {
			t.Run(file+"/"+kind, func(t *testing.T) {
				f := newFixture(t)
				path := filepath.Join(f.dir, file)
				replaceWith(t, path, kind)
				before := snapshot(t, f.dir)
				for _, noLock := range []bool{false, true} {
					out, err := runInspectWithin(t, inspectOptions{dir: f.dir, noLock: noLock, output: "text"}, testDeps(t, f.clock))
					if err != nil {
						t.Fatalf("inspect (no lock: %v): %v", noLock, err)
					}
					if !strings.Contains(out, path) {
						t.Errorf("inspect (no lock: %v) does not name %s:\n%s", noLock, path, out)
					}
					if !strings.Contains(out, "UNREADABLE") && !strings.Contains(out, "corrupt") {
						t.Errorf("inspect (no lock: %v) does not say %s is unreadable:\n%s", noLock, path, out)
					}
				}
				if diff := cmp.Diff(before, snapshot(t, f.dir)); diff != "" {
					t.Errorf("inspect changed the state dir (-before +after):\n%s", diff)
				}
			})
		}
	}
}

// TestInspectDeadEnd: current is marked bad, and the startups since the
// mark exceed current's threshold within its trial: inspect flags a dead
// end, and names forget-bad as the repair only for a crash-loop mark.
func TestInspectDeadEnd(t *testing.T) {
	// remark replaces current's mark by m, for src.
	remark := func(t *testing.T, f *fixture, legacy bool, m checkpoint.BadMark) {
		s := openStore(t, f.dir, f.currentVersion, f.clock)
		defer s.Close()
		if _, err := s.ForgetBad("uid-b/2"); err != nil {
			t.Fatal(err)
		}
		src := sourceOf(f.currentCM)
		if legacy {
			src.ConfigMap.KubeletConfigKey = ""
		}
		if err := s.MarkBad(src, m); err != nil {
			t.Fatal(err)
		}
	}
	const validate = "failed to validate current (UID: uid-b)"
	tests := []struct {
		name    string
		prepare func(t *testing.T, f *fixture)
		// wantKey is the mark of the dead end, "" for none.
		wantKey     string
		wantRepairs bool
		wantText    []string
	}{
		{
			name:    "no startup since the mark",
			prepare: func(*testing.T, *fixture) {},
		},
		{
			name:    "threshold crash restarts are tolerated",
			prepare: func(t *testing.T, f *fixture) { f.addStartups(t, fixtureThreshold) },
		},
		{
			name:        "crash-loop mark",
			prepare:     func(t *testing.T, f *fixture) { f.addStartups(t, fixtureThreshold+1) },
			wantKey:     "uid-b/2/kubelet",
			wantRepairs: true,
			wantText: []string{
				"DEAD END: current is marked bad (uid-b/2/kubelet: " + reasonCrashLoop + ")",
				"keeps crashing on the config it rolled back to: 3 crash restarts\n    since the mark, more than the threshold 2, within the 5m0s trial.",
				"Repair the node, then give",
				"dynconfigctl forget-bad $STATE uid-b/2/kubelet --component-version v1.0.0",
			},
		},
		{
			name: "after the trial",
			prepare: func(t *testing.T, f *fixture) {
				f.addStartups(t, fixtureThreshold+1)
				f.clock.SetTime(f.clock.Now().Add(fixtureTrial))
			},
		},
		{
			name: "validation mark",
			prepare: func(t *testing.T, f *fixture) {
				remark(t, f, false, checkpoint.BadMark{Reason: validate, Problem: lkg.ProblemValidateFailed.String()})
				f.addStartups(t, fixtureThreshold+1)
			},
			wantKey: "uid-b/2/kubelet",
			wantText: []string{
				"DEAD END: current is marked bad (uid-b/2/kubelet: " + validate + ")",
				"The mark is certain (ValidateFailed): forget-bad cannot help.",
			},
		},
		{
			name: "older crash-loop mark, without problem, of the whole ConfigMap",
			prepare: func(t *testing.T, f *fixture) {
				remark(t, f, true, checkpoint.BadMark{Reason: reasonCrashLoop})
				f.addStartups(t, fixtureThreshold+1)
			},
			wantKey:     "uid-b/2",
			wantRepairs: true,
			wantText:    []string{"dynconfigctl forget-bad $STATE uid-b/2 --component-version v1.0.0"},
		},
		{
			name: "older validation mark, without problem",
			prepare: func(t *testing.T, f *fixture) {
				remark(t, f, false, checkpoint.BadMark{Reason: validate})
				f.addStartups(t, fixtureThreshold+1)
			},
			wantKey:  "uid-b/2/kubelet",
			wantText: []string{"The mark is certain (-): forget-bad cannot help."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.prepare(t, f)
			rep := inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
			for _, v := range rep.ComponentVersions {
				de := v.DeadEnd
				if v.ComponentVersion != f.currentVersion {
					if de != nil {
						t.Errorf("component version %s: dead end %+v, want none", v.ComponentVersion, de)
					}
					continue
				}
				switch {
				case tt.wantKey == "" && de != nil:
					t.Errorf("dead end %+v, want none", de)
				case tt.wantKey != "" && de == nil:
					t.Errorf("no dead end, want one for %s", tt.wantKey)
				case de != nil:
					if de.MarkKey != tt.wantKey || de.ForgetBadRepairs != tt.wantRepairs || (de.Repair != "") != tt.wantRepairs {
						t.Errorf("dead end %+v, want mark %s, forget-bad repairs: %v", de, tt.wantKey, tt.wantRepairs)
					}
				}
			}
			out, err := runInspectWithin(t, inspectOptions{dir: f.dir, output: "text"}, testDeps(t, f.clock))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "DEAD END"); got != (tt.wantKey != "") {
				t.Errorf("text says DEAD END: %v, want %v:\n%s", got, tt.wantKey != "", out)
			}
			for _, want := range tt.wantText {
				if want = strings.ReplaceAll(want, "$STATE", f.dir); !strings.Contains(out, want) {
					t.Errorf("text does not contain %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestInspectDeadEndRepair: the repair inspect names for a crash-loop dead
// end works: after it, there is no dead end and current has a fresh trial.
func TestInspectDeadEndRepair(t *testing.T) {
	f := newFixture(t)
	f.addStartups(t, fixtureThreshold+1)
	rep := inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
	de := rep.ComponentVersions[1].DeadEnd
	if de == nil {
		t.Fatal("no dead end")
	}
	args := strings.Fields(de.Repair)
	if len(args) < 2 || args[0] != "dynconfigctl" {
		t.Fatalf("repair %q", de.Repair)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args[1:], &stdout, &stderr, testDeps(t, f.clock)); code != exitOK {
		t.Fatalf("%s: exit %d: %s", de.Repair, code, stderr.String())
	}
	rep = inspectJSON(t, inspectOptions{dir: f.dir}, testDeps(t, f.clock))
	if cv := rep.ComponentVersions[1]; cv.DeadEnd != nil || rep.Current.FirstRun != nil {
		t.Errorf("after %s: dead end %+v, current's first run %v; want neither", de.Repair, cv.DeadEnd, rep.Current.FirstRun)
	}
}
