package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// stateDir is a state dir written by the real checkpoint.Store, so that the
// view is checked against what the library actually writes.
type stateDir struct {
	t     *testing.T
	dir   string
	clock *clocktesting.FakeClock
	store *checkpoint.Store
}

func newStateDir(t *testing.T) *stateDir {
	t.Helper()
	d := &stateDir{t: t, dir: filepath.Join(t.TempDir(), "state"), clock: clocktesting.NewFakeClock(t0)}
	var err error
	d.store, err = checkpoint.Open(checkpoint.Options{Dir: d.dir, ComponentVersion: componentVersion, Clock: d.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.store.Close() })
	return d
}

func (d *stateDir) must(err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatal(err)
	}
}

func (d *stateDir) startup() {
	d.t.Helper()
	_, err := d.store.RecordStartup()
	d.must(err)
}

func (d *stateDir) firstRun() {
	d.t.Helper()
	_, err := d.store.RecordFirstRun()
	d.must(err)
}

// save checkpoints the ConfigMap that remoteSource(uid) names, with a 5s
// trial and threshold 2.
func (d *stateDir) save(uid string) {
	src := remoteSource(uid).ConfigMap
	_, err := d.store.Save(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: src.Namespace, Name: src.Name, UID: src.UID, ResourceVersion: src.ResourceVersion,
			Annotations: map[string]string{components.TrialDurationAnnotation: "5s", components.CrashLoopThresholdAnnotation: "2"},
		},
		Data: map[string]string{"kubelet": "{}"},
	})
	d.must(err)
}

var demoTrial = components.Trial{Duration: 5 * time.Second, CrashLoopThreshold: 2}

func TestReadState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(d *stateDir)
		want     stateView
		problems int
	}{{
		name:  "fresh state dir",
		setup: func(*stateDir) {},
		want:  stateView{Current: pointerView{SetTime: t0}, LastKnownGood: pointerView{SetTime: t0}},
	}, {
		name: "current on trial, last-known-good local",
		setup: func(d *stateDir) {
			d.startup()
			d.save("a")
			d.clock.Step(time.Second)
			d.must(d.store.SetCurrent(remoteSource("a")))
			d.clock.Step(time.Second)
			d.startup()
			d.firstRun()
		},
		want: stateView{
			Current:       pointerView{Source: remoteSource("a"), SetTime: t0.Add(time.Second), FirstRun: t0.Add(2 * time.Second)},
			LastKnownGood: pointerView{SetTime: t0},
			CurrentTrial:  demoTrial,
			Startups:      []time.Time{t0, t0.Add(2 * time.Second)},
			Checkpoints:   []checkpointView{{UID: "a", ResourceVersion: "rv-a"}},
		},
	}, {
		name: "current marked bad, rolled back to a remote last-known-good",
		setup: func(d *stateDir) {
			d.save("a")
			d.save("b")
			d.must(d.store.SetCurrent(remoteSource("a")))
			d.must(d.store.SetLastKnownGood(remoteSource("a")))
			d.clock.Step(time.Minute)
			d.must(d.store.SetCurrent(remoteSource("b")))
			d.clock.Step(time.Second)
			d.must(d.store.MarkBad(remoteSource("b"), checkpoint.BadMark{Reason: "failed to validate current (UID: b)", Problem: "ValidateFailed"}))
		},
		want: stateView{
			Current:       pointerView{Source: remoteSource("b"), SetTime: t0.Add(time.Minute)},
			LastKnownGood: pointerView{Source: remoteSource("a"), SetTime: t0},
			CurrentTrial:  demoTrial,
			Bad: checkpoint.BadMarks{"b/rv-b/kubelet": {
				Time: t0.Add(time.Minute + time.Second), Reason: "failed to validate current (UID: b)", Problem: "ValidateFailed",
			}},
			Checkpoints: []checkpointView{{UID: "a", ResourceVersion: "rv-a"}, {UID: "b", ResourceVersion: "rv-b"}},
		},
	}, {
		name: "reset to local",
		setup: func(d *stateDir) {
			d.save("a")
			d.must(d.store.SetCurrent(remoteSource("a")))
			d.must(d.store.SetLastKnownGood(remoteSource("a")))
			d.clock.Step(time.Minute)
			d.must(d.store.SetCurrent(nil))
			d.must(d.store.SetLastKnownGood(nil))
			_, err := d.store.GC()
			d.must(err)
		},
		want: stateView{Current: pointerView{SetTime: t0.Add(time.Minute)}, LastKnownGood: pointerView{SetTime: t0.Add(time.Minute)}},
	}, {
		name: "unreadable and unverified files are problems, the rest is read",
		setup: func(d *stateDir) {
			d.save("a")
			d.save("b")
			d.must(d.store.SetLastKnownGood(remoteSource("a")))
			d.must(os.WriteFile(filepath.Join(d.dir, "meta", "current"), []byte("{not json"), 0o600))
			tracking := filepath.Join(d.dir, "tracking", componentVersion)
			d.must(syscall.Mkfifo(filepath.Join(tracking, checkpoint.BadConfigsFile), 0o600))
			d.must(os.WriteFile(filepath.Join(tracking, checkpoint.StartupsFile), []byte(`["yesterday"]`), 0o600))
			// A checkpoint whose checksum does not match, wherever the
			// store's layout puts it.
			snap, err := checkpoint.Inspect(d.dir)
			d.must(err)
			cp, ok := snap.Checkpoint(checkpoint.Key{UID: "b", ResourceVersion: "rv-b"})
			if !ok {
				d.t.Fatal("checkpoint b/rv-b not found")
			}
			path := cp.Path
			data, err := os.ReadFile(path)
			d.must(err)
			d.must(os.WriteFile(path, bytes.Replace(data, []byte(`"kubelet":"{}"`), []byte(`"kubelet":"[]"`), 1), 0o600))
		},
		want: stateView{
			LastKnownGood: pointerView{Source: remoteSource("a"), SetTime: t0},
			Checkpoints:   []checkpointView{{UID: "a", ResourceVersion: "rv-a"}, {UID: "b", ResourceVersion: "rv-b", Corrupt: true}},
		},
		problems: 4,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newStateDir(t)
			tc.setup(d)
			got := readState(d.dir, componentVersion)
			if len(got.Problems) != tc.problems {
				t.Errorf("problems %q, want %d of them", got.Problems, tc.problems)
			}
			for _, p := range got.Problems {
				if !strings.Contains(p, d.dir) {
					t.Errorf("problem %q does not name its file", p)
				}
			}
			got.Problems = nil
			if len(got.Startups) == 0 {
				got.Startups = nil // an empty list and no file read the same
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readState (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadStateMissingDir(t *testing.T) {
	got := readState(filepath.Join(t.TempDir(), "nothing-here"), componentVersion)
	if diff := cmp.Diff(stateView{}, got); diff != "" {
		t.Errorf("readState of a missing dir (-want +got):\n%s", diff)
	}
}

func TestStateLines(t *testing.T) {
	name := func(uid string) string { return "kube-system/cm-" + uid }
	now := t0.Add(2 * time.Second)
	for _, tc := range []struct {
		name string
		view stateView
		want [][2]string
	}{{
		name: "local",
		view: stateView{Startups: []time.Time{t0}},
		want: [][2]string{{"current", "local"}, {"last-known-good", "local"}, {"bad marks", "none"}, {"startups", "1 recorded"}, {"checkpoints", "none"}},
	}, {
		name: "not run yet",
		view: stateView{Current: pointerView{Source: remoteSource("a"), SetTime: t0}, CurrentTrial: demoTrial},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 2s ago, not run yet"},
			{"last-known-good", "local"}, {"bad marks", "none"},
			{"startups", "0 recorded, 0 since current was set"}, {"checkpoints", "none"},
		},
	}, {
		name: "on trial",
		view: stateView{
			Current:      pointerView{Source: remoteSource("a"), SetTime: t0.Add(-time.Second), FirstRun: t0},
			CurrentTrial: demoTrial,
			Startups:     []time.Time{t0.Add(-2 * time.Second), t0.Add(-500 * time.Millisecond), t0.Add(time.Second)},
			Checkpoints:  []checkpointView{{UID: "a", ResourceVersion: "rv-a"}},
		},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 3s ago, on trial (3s of 5s left)"},
			{"last-known-good", "local"}, {"bad marks", "none"},
			{"startups", "3 recorded, 2 since current was set, 1 since it first ran (crash restarts; 2 tolerated)"},
			{"checkpoints", "kube-system/cm-a"},
		},
	}, {
		name: "trial over, promotion pending",
		view: stateView{Current: pointerView{Source: remoteSource("a"), SetTime: t0.Add(-time.Minute), FirstRun: t0.Add(-time.Minute)}, CurrentTrial: demoTrial},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 1m2s ago, 5s trial over, promotion pending"},
			{"last-known-good", "local"}, {"bad marks", "none"},
			{"startups", "0 recorded, 0 since current was set, 0 since it first ran (crash restarts; 2 tolerated)"}, {"checkpoints", "none"},
		},
	}, {
		name: "promoted",
		view: stateView{
			Current:       pointerView{Source: remoteSource("a"), SetTime: t0, FirstRun: t0},
			LastKnownGood: pointerView{Source: remoteSource("a"), SetTime: now},
			CurrentTrial:  demoTrial,
		},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 2s ago, passed its 5s trial"},
			{"last-known-good", "kube-system/cm-a (UID a, resourceVersion rv-a)"}, {"bad marks", "none"},
			{"startups", "0 recorded, 0 since current was set, 0 since it first ran (crash restarts; 2 tolerated)"}, {"checkpoints", "none"},
		},
	}, {
		name: "marked bad, two marks, one of an older version, unreadable file, quarantine",
		view: stateView{
			Current:       pointerView{Source: remoteSource("b"), SetTime: t0},
			LastKnownGood: pointerView{Source: remoteSource("a")},
			Bad: checkpoint.BadMarks{
				"c/rv-c/kubelet": {Time: t0, Reason: "failed to validate current (UID: c)"},
				"b/rv-b":         {Time: t0, Reason: "crash loop detected with current (UID: b)"},
			},
			Checkpoints: []checkpointView{{UID: "a"}, {UID: "b", Corrupt: true}},
			Quarantine:  []string{"20261122T100000.000000000Z-meta_current"},
			Problems:    []string{"read x: permission denied"},
		},
		want: [][2]string{
			{"current", "kube-system/cm-b (UID b, resourceVersion rv-b), set 2s ago, marked bad"},
			{"last-known-good", "kube-system/cm-a (UID a, resourceVersion rv-a)"},
			{"bad marks", "kube-system/cm-b: crash loop detected with current (UID: b)"},
			{"", "kube-system/cm-c: failed to validate current (UID: c)"},
			{"startups", "0 recorded, 0 since current was set"},
			{"checkpoints", "kube-system/cm-a, kube-system/cm-b (corrupt)"},
			{"quarantine", "20261122T100000.000000000Z-meta_current"},
			{"unreadable", "read x: permission denied"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.view.lines(now, name)); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecodeStatus feeds arbitrary status files to the walk-through's
// decoder: it must not panic, and what it accepts survives a round trip.
func FuzzDecodeStatus(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte(`{"pid":42,"condition":{"status":"True","reason":"all checks passed","message":"using current (default)"},"running":{"maxPods":110}}`))
	f.Add([]byte(`{"pid":42}`))
	f.Add([]byte(`{"pid":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeStatus(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("marshal %+v: %v", st, err)
		}
		back, err := decodeStatus(again)
		if err != nil {
			t.Fatalf("decode %s: %v", again, err)
		}
		if diff := cmp.Diff(st, back); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

// TestDemoConfigsParse checks the demo's generated YAML: each ConfigMap
// carries its payload and its trial settings, and each assignment names
// its ConfigMap.
func TestDemoConfigsParse(t *testing.T) {
	good1, invalid, crash, good2 := demoConfigs()
	for _, c := range []demoConfig{good1, invalid, crash, good2} {
		t.Run(c.name, func(t *testing.T) {
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(c.configMap()), &cm); err != nil {
				t.Fatalf("ConfigMap YAML: %v\n%s", err, c.configMap())
			}
			want := map[string]string{"kubelet": c.payload()}
			if diff := cmp.Diff(want, cm.Data); diff != "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
			trial, err := kubelet.Profile{}.Trial(cm.Annotations)
			if err != nil {
				t.Fatalf("trial annotations: %v", err)
			}
			if trial.Duration != c.trial || trial.CrashLoopThreshold != c.threshold {
				t.Errorf("trial %+v, want %s and threshold %d", trial, c.trial, c.threshold)
			}
			if cm.UID != types.UID(c.uid) || cm.Namespace != namespace || cm.Name != c.name {
				t.Errorf("metadata %+v", cm.ObjectMeta)
			}
			var src corev1.NodeConfigSource
			if err := yaml.UnmarshalStrict([]byte(c.assignment()), &src); err != nil {
				t.Fatalf("assignment YAML: %v", err)
			}
			if src.ConfigMap == nil || src.ConfigMap.UID != cm.UID || src.ConfigMap.Name != cm.Name || src.ConfigMap.Namespace != cm.Namespace {
				t.Errorf("assignment %+v does not name the ConfigMap", src.ConfigMap)
			}
		})
	}
}
