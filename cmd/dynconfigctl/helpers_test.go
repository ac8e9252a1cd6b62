package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/crashloop"
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
		newClient: func(string) (kubernetes.Interface, error) {
			return nil, errors.New("this test has no API server")
		},
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

// fixture is a state dir built with the library, as a component leaves it
// after a crash-looping config was rolled back.
type fixture struct {
	dir   string
	clock *testclock.FakePassiveClock

	lkgCM, currentCM, corruptCM *corev1.ConfigMap
	// currentSet is when current was set; startups are recorded before and
	// after it.
	currentSet           time.Time
	startups, sinceSet   int
	marks                map[string]map[string]lkg.Entry // version -> key -> mark
	currentVersion, oldV string
}

const (
	reasonCrashLoop = "failed to start current (UID: uid-b), crash loop detected"
	reasonValidate  = "failed to validate current (UID: uid-c)"
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

// newFixture writes the state dir:
//
//	checkpoints uid-a/1 (last-known-good), uid-b/2 (current), uid-c/3 (corrupted on disk)
//	tracking/v1.0.0: marks uid-b/2 (crash loop) and uid-c/3 (validation); 1 startup before current was set, 3 after
//	tracking/v0.9.0: mark uid-c/3; no startups
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		dir:            filepath.Join(t.TempDir(), "state"),
		clock:          testclock.NewFakePassiveClock(t0),
		lkgCM:          newConfigMap("kube-system", "kubelet-a", "uid-a", "1", map[string]string{"kubelet": "kind: KubeletConfiguration\n"}),
		currentCM:      newConfigMap("kube-system", "kubelet-b", "uid-b", "2", map[string]string{"kubelet": "kind: KubeletConfiguration\nmaxPods: 90\n", "notes": "x"}),
		corruptCM:      newConfigMap("kube-system", "kubelet-c", "uid-c", "3", map[string]string{"kubelet": "maxPods: -1\n"}),
		marks:          map[string]map[string]lkg.Entry{},
		currentVersion: "v1.0.0",
		oldV:           "v0.9.0",
	}
	mark := func(version, key, reason string) {
		tr, err := lkg.NewTracker(lkg.TrackerOptions{Dir: filepath.Join(f.dir, "tracking", version), Clock: f.clock})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.MarkBad(key, reason); err != nil {
			t.Fatal(err)
		}
		if f.marks[version] == nil {
			f.marks[version] = map[string]lkg.Entry{}
		}
		f.marks[version][key] = lkg.Entry{Time: f.clock.Now(), Reason: reason}
	}

	old := openStore(t, f.dir, f.oldV, f.clock)
	mark(f.oldV, "uid-c/3", reasonValidate)
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
	startups, err := crashloop.New(crashloop.Options{Dir: s.TrackingDir(), Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	record := func() {
		if err := startups.RecordStartup(crashloop.MaxThreshold); err != nil {
			t.Fatal(err)
		}
		f.startups++
		if f.clock.Now().After(f.currentSet) && !f.currentSet.IsZero() {
			f.sinceSet++
		}
	}
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	record()
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	f.currentSet = f.clock.Now()
	if err := s.SetCurrent(sourceOf(f.currentCM)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.clock.SetTime(f.clock.Now().Add(1500 * time.Millisecond))
		record()
	}
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	mark(f.currentVersion, "uid-b/2", reasonCrashLoop)
	mark(f.currentVersion, "uid-c/3", reasonValidate)

	// Change a byte of uid-c/3's payload: the checksum no longer matches.
	path := filepath.Join(f.dir, "checkpoints", "uid-c", "3")
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
