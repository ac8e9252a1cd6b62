package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/lkg"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// t0 is when every fixture starts.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// testDeps are deps with a fake clock (at t0 when clk is nil) and no API
// server.
func testDeps(t testing.TB, clk *testclock.FakePassiveClock) deps {
	if clk == nil {
		clk = testclock.NewFakePassiveClock(t0)
	}
	return deps{
		clock:  clk,
		logger: ktesting.NewLogger(t, ktesting.NewConfig()),
		newClient: func(*genericclioptions.ConfigFlags) (apiClient, error) {
			return apiClient{}, errors.New("this test has no API server")
		},
		stdin: strings.NewReader(""),
	}
}

func newConfigMap(ns, name, uid, rv string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv},
		Data:       data,
	}
}

func sourceOf(cm *corev1.ConfigMap) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: "kubelet",
	}}
}

// fixture is a state dir built with checkpoint.Store, as a component leaves
// it after a crash-looping config was rolled back.
type fixture struct {
	dir   string
	clock *testclock.FakePassiveClock

	lkgCM, currentCM, corruptCM *corev1.ConfigMap
	// currentSet is when current was set, firstRun when the component first
	// ran it; startups are recorded before and after both.
	currentSet, firstRun time.Time
	// startups counts the startups recorded, sinceSet those after
	// currentSet, sinceFirstRun those after firstRun.
	startups, sinceSet, sinceFirstRun int
	marks                             map[string]checkpoint.BadMarks // version -> key -> mark
	currentVersion, oldV              string

	s *checkpoint.Store // the Store newFixture writes with, nil after
}

const (
	reasonCrashLoop = "crash loop detected with current (UID: uid-b)"
	reasonValidate  = "failed to validate current (UID: uid-c)"
	// The trial current's annotations give it.
	fixtureTrial     = 5 * time.Minute
	fixtureThreshold = 2
)

func openStore(t testing.TB, dir, version string, clk *testclock.FakePassiveClock) *checkpoint.Store {
	t.Helper()
	if clk == nil {
		clk = testclock.NewFakePassiveClock(t0)
	}
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: version, Clock: clk, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatalf("checkpoint.Open: %v", err)
	}
	return s
}

// newFixture writes the state dir, following the component's lifecycle:
//
//	checkpoints uid-a/1 (last-known-good, nested layout of older versions), uid-b/2 (current; trial 5m,
//	  threshold 2), uid-c/3 (corrupted on disk)
//	tracking/v0.9.0: mark uid-c/3 (validation; an older version's mark, without payload key or problem); no startups
//	tracking/v1.0.0: 1 startup before current was set; the startup that adopted current, then its
//	  first run, then 3 crash restarts; marks uid-b/2/kubelet (crash loop) and uid-c/3/kubelet (validation)
//
// The clock ends a minute after the marks, within current's trial. No dead
// end: no startup since the mark (see addStartups).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		dir:            filepath.Join(t.TempDir(), "state"),
		clock:          testclock.NewFakePassiveClock(t0),
		lkgCM:          newConfigMap("kube-system", "kubelet-a", "uid-a", "1", map[string]string{"kubelet": "kind: KubeletConfiguration\n"}),
		currentCM:      newConfigMap("kube-system", "kubelet-b", "uid-b", "2", map[string]string{"kubelet": "kind: KubeletConfiguration\nmaxPods: 90\n", "notes": "x"}),
		corruptCM:      newConfigMap("kube-system", "kubelet-c", "uid-c", "3", map[string]string{"kubelet": "maxPods: -1\n"}),
		marks:          map[string]checkpoint.BadMarks{},
		currentVersion: "v1.0.0",
		oldV:           "v0.9.0",
	}
	f.currentCM.Annotations = map[string]string{
		components.TrialDurationAnnotation:      fixtureTrial.String(),
		components.CrashLoopThresholdAnnotation: fmt.Sprint(fixtureThreshold),
	}
	mark := func(s *checkpoint.Store, version string, src *corev1.NodeConfigSource, m checkpoint.BadMark) {
		t.Helper()
		if err := s.MarkBad(src, m); err != nil {
			t.Fatal(err)
		}
		if f.marks[version] == nil {
			f.marks[version] = checkpoint.BadMarks{}
		}
		m.Time = f.clock.Now()
		f.marks[version][checkpoint.MarkKey(src)] = m
	}

	old := openStore(t, f.dir, f.oldV, f.clock)
	legacy := sourceOf(f.corruptCM)
	legacy.ConfigMap.KubeletConfigKey = "" // older versions marked the whole ConfigMap
	mark(old, f.oldV, legacy, checkpoint.BadMark{Reason: reasonValidate})
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, f.dir, f.currentVersion, f.clock)
	defer s.Close()
	for _, cm := range []*corev1.ConfigMap{f.lkgCM, f.currentCM, f.corruptCM} {
		if _, err := s.Save(cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetLastKnownGood(sourceOf(f.lkgCM)); err != nil {
		t.Fatal(err)
	}
	f.s = s
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	f.recordStartup(t)
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	f.currentSet = f.clock.Now()
	if err := s.SetCurrent(sourceOf(f.currentCM)); err != nil {
		t.Fatal(err)
	}
	// The start that adopts current records its startup, then its first run.
	f.clock.SetTime(f.clock.Now().Add(1500 * time.Millisecond))
	f.recordStartup(t)
	f.clock.SetTime(f.clock.Now().Add(10 * time.Millisecond))
	if _, err := s.RecordFirstRun(); err != nil {
		t.Fatal(err)
	}
	f.firstRun = f.clock.Now()
	// threshold+1 crash restarts: the last start finds the crash loop, marks
	// current bad and rolls back.
	for range fixtureThreshold + 1 {
		f.clock.SetTime(f.clock.Now().Add(1500 * time.Millisecond))
		f.recordStartup(t)
	}
	f.clock.SetTime(f.clock.Now().Add(500 * time.Millisecond))
	mark(s, f.currentVersion, sourceOf(f.currentCM), checkpoint.BadMark{Reason: reasonCrashLoop, Problem: lkg.ProblemCrashLoop.String()})
	mark(s, f.currentVersion, sourceOf(f.corruptCM), checkpoint.BadMark{Reason: reasonValidate, Problem: lkg.ProblemValidateFailed.String()})
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	f.s = nil

	// The last-known-good was checkpointed by an older version, in the
	// nested layout (checkpoints/<uid>/<rv>); the others are flat
	// (checkpoints/<uid>_<rv>).
	nested := filepath.Join(f.dir, "checkpoints", "uid-a", "1")
	if err := os.Mkdir(filepath.Dir(nested), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(f.dir, "checkpoints", "uid-a_1"), nested); err != nil {
		t.Fatal(err)
	}
	// Change a byte of uid-c/3's payload: the checksum no longer matches.
	path := filepath.Join(f.dir, "checkpoints", "uid-c_3")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(data, []byte(`maxPods: -1`), []byte(`maxPods: -2`), 1)
	if bytes.Equal(edited, data) {
		t.Fatalf("%s does not hold the payload this fixture corrupts:\n%s", path, data)
	}
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// recordStartup records a startup at the clock's now, with f.s or a Store it
// opens for the purpose.
func (f *fixture) recordStartup(t testing.TB) {
	t.Helper()
	s := f.s
	if s == nil {
		s = openStore(t, f.dir, f.currentVersion, f.clock)
		defer s.Close()
	}
	if _, err := s.RecordStartup(); err != nil {
		t.Fatal(err)
	}
	f.startups++
	now := f.clock.Now()
	if !f.currentSet.IsZero() && now.After(f.currentSet) {
		f.sinceSet++
	}
	if !f.firstRun.IsZero() && now.After(f.firstRun) {
		f.sinceFirstRun++
	}
}

// addStartups records n startups, a second apart, as the component does
// when it keeps crashing on the config it rolled back to: with n above the
// threshold, a dead end.
func (f *fixture) addStartups(t testing.TB, n int) {
	t.Helper()
	for range n {
		f.clock.SetTime(f.clock.Now().Add(time.Second))
		f.recordStartup(t)
	}
}

// holdLock opens the state dir like a running component and keeps it open
// until the test ends.
func (f *fixture) holdLock(t testing.TB) {
	t.Helper()
	s := openStore(t, f.dir, f.currentVersion, f.clock)
	t.Cleanup(func() { s.Close() })
}

// fileState is what snapshot records of a file.
type fileState struct {
	Mode    fs.FileMode
	ModTime time.Time
	SHA256  [32]byte
}

// snapshot records every entry under dir, to prove a command wrote nothing.
func snapshot(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{Mode: fi.Mode(), ModTime: fi.ModTime()}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			st.SHA256 = sha256.Sum256(data)
		}
		out[strings.TrimPrefix(path, dir)] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
	}
}
