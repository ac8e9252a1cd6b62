package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/damage"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/status"
)

// The configs of the damage matrix, told apart by maxPods in /configz.
var (
	damageGood = remoteConfig{name: "kubelet-good", uid: "a0000000-0000-4000-8000-00000000000a",
		trial: "1s", threshold: -1, payload: kubeletDoc("maxPods: 42")}
	damageCurrent = remoteConfig{name: "kubelet-current", uid: "b0000000-0000-4000-8000-00000000000b",
		trial: "10m", threshold: -1, payload: kubeletDoc("maxPods: 77")}
	damageInvalid = remoteConfig{name: "kubelet-invalid", uid: "c0000000-0000-4000-8000-00000000000c",
		threshold: -1, payload: kubeletDoc("maxPods: -1")}
)

const (
	damageGoodMaxPods    = 42
	damageCurrentMaxPods = 77
)

// syncFailedPrefix starts the reason of a start whose assignment cannot be
// read (status.SyncFailedReason).
const syncFailedPrefix = "failed to sync, desired config unclear, cause: "

// unusableLKGReason ends the reason of a start that could not use the
// last-known-good (status.WithUnusableLastKnownGood).
const unusableLKGReason = "is unusable, using local config, cause: "

// damageServeTimeout bounds how long one start may take to serve: a start
// that takes longer hangs.
const damageServeTimeout = 20 * time.Second

// stateTree is a state dir in memory: its directories and regular files
// (paths relative to the state dir; the lock file is left out).
type stateTree struct {
	dirs  []string
	files map[string][]byte
}

func readStateTree(t *testing.T, dir string) stateTree {
	t.Helper()
	tree := stateTree{files: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			tree.dirs = append(tree.dirs, rel)
		case d.Type().IsRegular():
			if rel == "lock" {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree.files[rel] = data
		default:
			return fmt.Errorf("%s: unexpected %v in a fresh state dir", p, d.Type())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// write lays the tree out at dir (which must not exist), directories 0700
// and files 0600, as the Store makes them.
func (tree stateTree) write(t *testing.T, dir string) {
	t.Helper()
	for _, d := range tree.dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for rel, data := range tree.files {
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// damageFixture is the state dir the real binary left: a good config
// promoted to last-known-good, a newer config current in its trial, a bad
// mark and startups.
type damageFixture struct {
	tree   stateTree
	source string // the directory source, with the assignment of damageCurrent
	init   string // the local init file (maxPods initMaxPods)
	// files are the state files, named, relative to the state dir; dirs
	// the sub-directories.
	files map[string]string
	dirs  map[string]string
}

// prepareDamageFixture runs the real binary through the lifecycle that
// leaves every kind of state file behind:
//
//  1. the invalid config is assigned: it fails validation and is marked bad;
//  2. the good config (1s trial) is assigned, runs and is promoted;
//  3. the current config (10m trial) is assigned and runs; SIGTERM.
func prepareDamageFixture(t *testing.T, bin string) *damageFixture {
	t.Helper()
	n := node{proctest.NewNode(t)}
	initFile := n.File("init.yaml")
	proctest.WriteFile(t, initFile, kubeletDoc(fmt.Sprintf("maxPods: %d", initMaxPods)))
	for _, rc := range []remoteConfig{damageGood, damageCurrent, damageInvalid} {
		n.put(t, rc)
	}
	args := n.Args("--config=" + initFile)
	// start starts the binary and waits until it serves with want in the
	// status file.
	start := func(what string, want func(app.Condition) bool) *proctest.Proc {
		t.Helper()
		p := proctest.Start(t, bin, args, nil)
		p.WaitServing(t)
		proctest.WaitFor(t, what, func() (bool, string) {
			c, ok, err := n.ReadStatus()
			return err == nil && ok && c.PID == p.PID() && want(c), fmt.Sprintf("status %+v, %v", c, err)
		}, func() string { return proctest.Tail(p.Stderr(), 10) })
		return p
	}
	// restart assigns rc to the running p, which exits 0 to adopt it.
	restart := func(p *proctest.Proc, rc remoteConfig) {
		t.Helper()
		n.assign(t, rc)
		select {
		case <-p.Done():
		case <-time.After(proctest.WaitTimeout):
			t.Fatalf("the process did not exit for the new assignment %s\n%s", rc.name, proctest.Tail(p.Stderr(), 10))
		}
		if p.Code() != 0 {
			t.Fatalf("exit code %d on a new assignment, want 0\n%s", p.Code(), proctest.Tail(p.Stderr(), 10))
		}
	}

	n.assign(t, damageInvalid)
	p := start("the invalid config's validation failure", func(c app.Condition) bool {
		return c.Reason == status.ValidateFailedReason(damageInvalid.uid)
	})
	restart(p, damageGood)
	p = start("the good config", func(c app.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Message == status.CurrentMessage(status.Ref{UID: damageGood.uid}, status.LocalInit)
	})
	proctest.WaitFor(t, "the good config's promotion to last-known-good", func() (bool, string) {
		uid, err := n.lastKnownGoodUID()
		return err == nil && uid == damageGood.uid, fmt.Sprintf("last-known-good %q, err %v", uid, err)
	}, func() string { return proctest.Tail(p.Stderr(), 10) })
	restart(p, damageCurrent)
	p = start("the current config", func(c app.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Message == status.CurrentMessage(status.Ref{UID: damageCurrent.uid}, status.LocalInit)
	})
	if code := p.Terminate(t); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0", code)
	}

	// The last-known-good was checkpointed by an older version, in the
	// nested layout (checkpoints/<uid>/<rv>); the others are flat
	// (checkpoints/<uid>_<rv>), so both layouts are damaged.
	flat, _ := filepath.Glob(filepath.Join(n.StateDir(), "checkpoints", string(damageGood.uid)+"_*"))
	if len(flat) != 1 {
		t.Fatalf("checkpoints of the good config: %v", flat)
	}
	nestedDir := filepath.Join(n.StateDir(), "checkpoints", string(damageGood.uid))
	if err := os.Mkdir(nestedDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(flat[0], filepath.Join(nestedDir, strings.TrimPrefix(filepath.Base(flat[0]), string(damageGood.uid)+"_"))); err != nil {
		t.Fatal(err)
	}

	// The state the matrix starts from, read back through the library.
	snap, err := checkpoint.Inspect(n.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := snap.Version(componentVersion)
	if uid := pointerUID(snap.Current); uid != damageCurrent.uid || snap.Current.Pointer.FirstRun.IsZero() ||
		pointerUID(snap.LastKnownGood) != damageGood.uid || len(tr.Startups) < 3 || tr.StartupsErr != nil ||
		len(tr.BadMarks) != 1 || tr.BadMarksErr != nil || len(snap.Problems) > 0 || len(snap.Quarantine) > 0 {
		t.Fatalf("unexpected fixture: current %+v, last-known-good %+v, tracking %+v, problems %v, quarantine %v",
			snap.Current, snap.LastKnownGood, tr, snap.Problems, snap.Quarantine)
	}

	f := &damageFixture{
		tree:   readStateTree(t, n.StateDir()),
		source: n.SourceDir(),
		init:   initFile,
		files: map[string]string{
			"current":         "meta/current",
			"last-known-good": "meta/last-known-good",
			"bad-configs":     "tracking/" + componentVersion + "/" + checkpoint.BadConfigsFile,
			"startups":        "tracking/" + componentVersion + "/" + checkpoint.StartupsFile,
		},
		dirs: map[string]string{
			"checkpoints/":            "checkpoints",
			"checkpoints/<good uid>/": "checkpoints/" + string(damageGood.uid),
			"meta/":                   "meta",
			"tracking/":               "tracking",
			"tracking/<version>/":     "tracking/" + componentVersion,
			"tmp/":                    "tmp",
		},
	}
	for _, c := range snap.Checkpoints {
		if c.Err != nil {
			t.Fatalf("checkpoint %s: %v", c.Key, c.Err)
		}
		rel, _ := filepath.Rel(snap.Dir, c.Path)
		f.files["checkpoint of "+checkpointName(c.Key.UID)] = rel
	}
	for _, name := range []string{"checkpoint of good", "checkpoint of current"} {
		if f.files[name] == "" {
			t.Fatalf("no %s in %v", name, f.files)
		}
	}
	return f
}

func pointerUID(p checkpoint.PointerState) types.UID {
	if p.Err != nil || p.Pointer.Source == nil || p.Pointer.Source.ConfigMap == nil {
		return ""
	}
	return p.Pointer.Source.ConfigMap.UID
}

func checkpointName(uid types.UID) string {
	switch uid {
	case damageGood.uid:
		return "good"
	case damageCurrent.uid:
		return "current"
	case damageInvalid.uid:
		return "invalid"
	}
	return string(uid)
}

// damage is one way to break a state file or directory.

// damageCase is one damage to one state file or directory.
type damageCase struct {
	target string // the file's or directory's name in the fixture
	rel    string // its path in the state dir
	dir    bool
	damage damage.Damage
}

// damageOutcome is what a start on a damaged state dir must do.
type damageOutcome struct {
	maxPods int32
	status  corev1.ConditionStatus
	message string
	// reasonPrefix starts the reason; unusableLKG says it ends naming the
	// unusable last-known-good.
	reasonPrefix string
	unusableLKG  bool
	// checkedLater: the running component checks its rollback target (issue
	// 21) and may add to the message that it is unusable.
	checkedLater bool
	// quarantined: the damaged file must be moved to the quarantine;
	// reported: the log must name it.
	quarantined, reported bool
}

// harmless damages leave a file the process reads as it was (mode 000 as
// root), or change nothing it reads.
func harmless(c damageCase) bool {
	switch c.damage.Name {
	case "mode 000":
		return os.Geteuid() == 0
	case "foreign entry":
		return true
	}
	return false
}

// wantAfterDamage mirrors wantAfterDamage of the root package's
// corruption matrix, for the real binary: with the source reachable the
// current config runs (state is repaired from the source); unreachable, the
// last-known-good runs, or the local init config when the last-known-good
// itself was damaged (its pointer, its checkpoint, or a directory that
// holds either).
func wantAfterDamage(c damageCase, reachable bool) damageOutcome {
	var o damageOutcome
	lkgDamaged := false
	if !harmless(c) {
		switch c.target {
		case "last-known-good":
			// An unreadable pointer is reported as an unusable
			// last-known-good (issue 21, defect 5).
			lkgDamaged = true
			o.unusableLKG = true
		case "meta/":
			// Emptied, the pointers are missing from a state dir that
			// had them: unreadable, reported. Anything else in place of
			// meta/ is moved aside and the pointers start over (local).
			lkgDamaged = true
			o.unusableLKG = c.damage.Name == "emptied"
		case "checkpoint of good", "checkpoints/", "checkpoints/<good uid>/":
			lkgDamaged = true
			o.unusableLKG = true
			o.checkedLater = true
		}
	}
	switch {
	case reachable:
		o.maxPods, o.status, o.reasonPrefix = damageCurrentMaxPods, corev1.ConditionTrue, status.ReasonAllChecksPassed
		o.message = status.CurrentMessage(status.Ref{UID: damageCurrent.uid}, status.LocalInit)
		o.unusableLKG = false
	case lkgDamaged:
		o.checkedLater = false
		o.maxPods, o.status, o.reasonPrefix = initMaxPods, corev1.ConditionUnknown, syncFailedPrefix
		o.message = status.LastKnownGoodMessage(status.Ref{}, status.LocalInit)
	default:
		o.maxPods, o.status, o.reasonPrefix = damageGoodMaxPods, corev1.ConditionUnknown, syncFailedPrefix
		o.message = status.LastKnownGoodMessage(status.Ref{UID: damageGood.uid}, status.LocalInit)
	}
	if harmless(c) {
		return o
	}

	// What must be reported. A state file the process reads at startup
	// that is corrupt, or anything but a regular file, is moved to the
	// quarantine and logged; a missing pointer is logged (a missing
	// checkpoint or tracking file, or a deleted directory, is no damage to
	// report: it is fetched again, empty, or recreated).
	read := true // read at startup
	switch c.target {
	case "checkpoint of good":
		read = !reachable
	case "checkpoint of invalid":
		read = false
	}
	if !c.dir {
		switch {
		case c.damage.Name == "missing":
			o.reported = read && (c.target == "current" || c.target == "last-known-good")
		default:
			o.quarantined, o.reported = read, read
		}
		return o
	}
	switch c.damage.Name {
	case "missing":
	case "emptied":
		// The pointers are gone: each is a missing pointer.
		o.reported = c.target == "meta/"
	default:
		// Something else where a directory should be.
		if c.target == "checkpoints/<good uid>/" {
			// Not a directory of the layout: the checkpoint in it is
			// unreadable when it is needed.
			o.reported = !reachable
		} else {
			o.quarantined, o.reported = true, true
		}
	}
	return o
}

// TestDamageMatrix starts the real binary once on each damaged state dir:
// each state file and each sub-directory of the state dir a real run of
// the binary left, broken in each way of damage.File and damage.Dir, with
// the directory source reachable (the assignment of the current config
// intact) and unreachable (--source-dir names a directory that does not
// exist, as a down API server: Assigned fails with a plain error). Each
// start must serve within damageServeTimeout (no hang), never exit 1 (the
// local init config is always valid), serve the config wantAfterDamage
// says in /configz, report the matching ConfigOK in the status file and
// /configz, move only the damaged file to the quarantine, name it in its
// log when it did (or when it must report it), and exit 0 on SIGTERM.
func TestDamageMatrix(t *testing.T) {
	bin := testBinary.Build(t) // skipped with -short, as every real-process test
	f := prepareDamageFixture(t, bin)

	var cases []damageCase
	names := make([]string, 0, len(f.files))
	for name := range f.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		valid := f.tree.files[f.files[name]]
		for _, d := range damage.File(t, valid, damage.SampleOffsets(len(valid), 6)) {
			cases = append(cases, damageCase{target: name, rel: f.files[name], damage: d})
		}
	}
	names = names[:0]
	for name := range f.dirs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, d := range damage.Dir(t) {
			cases = append(cases, damageCase{target: name, rel: f.dirs[name], dir: true, damage: d})
		}
	}
	t.Logf("%d damages × reachable/unreachable", len(cases))

	for _, c := range cases {
		for _, reachable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%s/reachable=%v", c.target, c.damage.Name, reachable), func(t *testing.T) {
				t.Parallel()
				runDamageCase(t, bin, f, c, reachable)
			})
		}
	}
}

func runDamageCase(t *testing.T, bin string, f *damageFixture, c damageCase, reachable bool) {
	if c.damage.Name == "mode 000" {
		testenv.Root(t, "for mode 000: the expectations are for root, which still reads the file")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	f.tree.write(t, state)
	path := filepath.Join(state, c.rel)
	if err := c.damage.Apply(path); err != nil {
		t.Fatalf("damage: %v", err)
	}
	// Let TempDir's cleanup remove what mode 000 keeps it from.
	t.Cleanup(func() { _ = os.Chmod(path, 0o700) })
	src := f.source
	if !reachable {
		src = filepath.Join(dir, "no-such-source")
	}
	statusFile := filepath.Join(dir, "configok.json")
	p := proctest.Start(t, bin, []string{
		"--dynamic-config-dir=" + state,
		"--source-dir=" + src,
		"--source-poll-interval=50ms",
		"--status-file=" + statusFile,
		"--port=0",
		"--config=" + f.init,
	}, nil)

	deadline := time.Now().Add(damageServeTimeout)
	for p.ServingAddr() == "" {
		if p.Exited() {
			t.Fatalf("exited with code %d before serving (a valid local config exists); stderr:\n%s", p.Code(), proctest.Tail(p.Stderr(), 15))
		}
		if time.Now().After(deadline) {
			p.Kill()
			t.Fatalf("not serving after %v (hangs); stderr:\n%s", damageServeTimeout, proctest.Tail(p.Stderr(), 15))
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := wantAfterDamage(c, reachable)

	z, err := getConfigz(p.ServingAddr())
	if err != nil {
		t.Fatal(err)
	}
	if z.KubeletConfig == nil || z.KubeletConfig.MaxPods != want.maxPods {
		got := int32(-1)
		if z.KubeletConfig != nil {
			got = z.KubeletConfig.MaxPods
		}
		t.Errorf("/configz serves maxPods %d, want %d", got, want.maxPods)
	}
	// The condition: the startup report, or, once a sync failed while
	// running, the running report (the README's "sync failure while
	// running" row: the running config's message, the sync failure as the
	// reason). Only the startup report says that the last-known-good is
	// unusable; neither may say so falsely.
	checkCondition := func(where string, got app.Condition) {
		t.Helper()
		// The running component's check of its rollback target (issue 21,
		// defect 6) may have added to the message by now.
		messageOK := got.Message == want.message || want.checkedLater &&
			strings.HasPrefix(got.Message, want.message+"; last-known-good (UID: ") &&
			strings.Contains(got.Message, "is unusable, a rollback would use the local config, cause: ")
		if got.Status != want.status || !messageOK || !strings.HasPrefix(got.Reason, want.reasonPrefix) ||
			(strings.Contains(got.Reason, unusableLKGReason) && !want.unusableLKG) {
			t.Errorf("%s: %s %q (reason %q); want %s %q, reason starting %q, naming an unusable last-known-good: %v",
				where, got.Status, got.Message, got.Reason, want.status, want.message, want.reasonPrefix, want.unusableLKG)
		}
	}
	if z.ConfigOK == nil {
		t.Errorf("/configz has no configOK")
	} else {
		checkCondition("/configz configOK", *z.ConfigOK)
	}
	cond, ok, err := proctest.Node{Dir: dir}.ReadStatus()
	switch {
	case err != nil || !ok:
		t.Errorf("status file: ok=%v, %v", ok, err)
	case cond.PID != p.PID():
		t.Errorf("status file written by pid %d, the serving process is %d", cond.PID, p.PID())
	default:
		checkCondition("status file", cond)
	}

	if code := p.Terminate(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0; stderr:\n%s", code, proctest.Tail(p.Stderr(), 10))
	}
	stderr := p.Stderr()

	// The startup report, as the process logged it (demo.LogReporter).
	startupReport := ""
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, `"ConfigOK"`) {
			startupReport = line
			break
		}
	}
	if !strings.Contains(startupReport, fmt.Sprintf(`status="%s"`, want.status)) ||
		!strings.Contains(startupReport, fmt.Sprintf(`message="%s"`, want.message)) ||
		strings.Contains(startupReport, unusableLKGReason) != want.unusableLKG {
		t.Errorf("startup report %q: want %s %q, naming an unusable last-known-good: %v", startupReport, want.status, want.message, want.unusableLKG)
	}

	// The quarantine holds the damaged file and nothing else.
	entries, err := os.ReadDir(filepath.Join(state, checkpoint.QuarantineDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	suffix := "-" + strings.ReplaceAll(c.rel, "/", "_")
	for _, e := range entries {
		if name := e.Name(); !strings.HasSuffix(name, suffix) {
			t.Errorf("quarantine holds %s; only the damaged %s may be moved there", name, c.rel)
		}
	}
	if want.quarantined && len(entries) == 0 {
		t.Errorf("%s was not moved to the quarantine", path)
	}
	if (len(entries) > 0 || want.reported) && !strings.Contains(stderr, path) {
		t.Errorf("the log does not name %s (quarantined: %d entries); stderr:\n%s", path, len(entries), proctest.Tail(stderr, 15))
	}
}
