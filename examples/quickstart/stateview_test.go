package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/lkg"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// stateDir is a state dir written by the real store and trackers, so that
// the view is checked against the formats they actually write.
type stateDir struct {
	t        *testing.T
	dir      string
	clock    *clocktesting.FakeClock
	store    *checkpoint.Store
	bad      *lkg.Tracker
	startups *crashloop.Tracker
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
	tracking := filepath.Join(d.dir, "tracking", componentVersion)
	if d.bad, err = lkg.NewTracker(lkg.TrackerOptions{Dir: tracking, Clock: d.clock}); err != nil {
		t.Fatal(err)
	}
	if d.startups, err = crashloop.New(crashloop.Options{Dir: tracking, Clock: d.clock}); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *stateDir) must(err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatal(err)
	}
}

// save checkpoints the ConfigMap that remoteSource(uid) names.
func (d *stateDir) save(uid string) {
	src := remoteSource(uid).ConfigMap
	_, err := d.store.Save(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name, UID: src.UID, ResourceVersion: src.ResourceVersion},
		Data:       map[string]string{"kubelet": "{}"},
	})
	d.must(err)
}

func TestReadState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(d *stateDir)
		want     stateView
		problems int
	}{{
		name:  "fresh state dir",
		setup: func(*stateDir) {},
		want:  stateView{},
	}, {
		name: "current on trial, last-known-good local",
		setup: func(d *stateDir) {
			d.must(d.startups.RecordStartup(2))
			d.save("a")
			d.clock.Step(time.Second)
			d.must(d.store.SetCurrent(remoteSource("a")))
			d.clock.Step(time.Second)
			d.must(d.startups.RecordStartup(2))
		},
		want: stateView{
			Current:     pointerView{Source: remoteSource("a"), SetTime: t0.Add(time.Second)},
			Startups:    []time.Time{t0, t0.Add(2 * time.Second)},
			Checkpoints: []checkpointView{{UID: "a", ResourceVersion: "rv-a"}},
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
			d.must(d.bad.MarkBad("b/rv-b", "failed to validate current (UID: b)"))
		},
		want: stateView{
			Current:       pointerView{Source: remoteSource("b"), SetTime: t0.Add(time.Minute)},
			LastKnownGood: pointerView{Source: remoteSource("a"), SetTime: t0},
			Bad:           map[string]lkg.Entry{"b/rv-b": {Time: t0.Add(time.Minute + time.Second), Reason: "failed to validate current (UID: b)"}},
			Checkpoints:   []checkpointView{{UID: "a", ResourceVersion: "rv-a"}, {UID: "b", ResourceVersion: "rv-b"}},
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
		name: "unreadable files are problems, the rest is read",
		setup: func(d *stateDir) {
			d.save("a")
			d.must(d.store.SetLastKnownGood(remoteSource("a")))
			d.must(os.WriteFile(filepath.Join(d.dir, "meta", "current"), []byte("{not json"), 0o600))
			d.must(os.WriteFile(d.bad.Path(), []byte("[]"), 0o600))
			d.must(os.WriteFile(d.startups.Path(), []byte(`["yesterday"]`), 0o600))
		},
		want: stateView{
			LastKnownGood: pointerView{Source: remoteSource("a"), SetTime: t0},
			Checkpoints:   []checkpointView{{UID: "a", ResourceVersion: "rv-a"}},
		},
		problems: 3,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newStateDir(t)
			tc.setup(d)
			got := readState(d.dir, componentVersion)
			if len(got.Problems) != tc.problems {
				t.Errorf("problems %q, want %d of them", got.Problems, tc.problems)
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
	trialOf := func(string) time.Duration { return 5 * time.Second }
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
		name: "on trial",
		view: stateView{
			Current:     pointerView{Source: remoteSource("a"), SetTime: t0},
			Startups:    []time.Time{t0.Add(-time.Second), t0.Add(time.Second)},
			Checkpoints: []checkpointView{{UID: "a", ResourceVersion: "rv-a"}},
		},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 2s ago, on trial (3s of 5s left)"},
			{"last-known-good", "local"}, {"bad marks", "none"},
			{"startups", "2 recorded, 1 since current was set"}, {"checkpoints", "kube-system/cm-a"},
		},
	}, {
		name: "trial over, promotion pending",
		view: stateView{Current: pointerView{Source: remoteSource("a"), SetTime: t0.Add(-time.Minute)}},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 1m2s ago, 5s trial over, promotion pending"},
			{"last-known-good", "local"}, {"bad marks", "none"},
			{"startups", "0 recorded, 0 since current was set"}, {"checkpoints", "none"},
		},
	}, {
		name: "promoted",
		view: stateView{Current: pointerView{Source: remoteSource("a"), SetTime: t0}, LastKnownGood: pointerView{Source: remoteSource("a"), SetTime: now}},
		want: [][2]string{
			{"current", "kube-system/cm-a (UID a, resourceVersion rv-a), set 2s ago, passed its 5s trial"},
			{"last-known-good", "kube-system/cm-a (UID a, resourceVersion rv-a)"}, {"bad marks", "none"},
			{"startups", "0 recorded, 0 since current was set"}, {"checkpoints", "none"},
		},
	}, {
		name: "marked bad, two marks, unreadable file",
		view: stateView{
			Current:       pointerView{Source: remoteSource("b"), SetTime: t0},
			LastKnownGood: pointerView{Source: remoteSource("a")},
			Bad: map[string]lkg.Entry{
				"c/rv-c": {Time: t0, Reason: "failed to validate current (UID: c)"},
				"b/rv-b": {Time: t0, Reason: "crash loop detected with current (UID: b)"},
			},
			Problems: []string{"read x: permission denied"},
		},
		want: [][2]string{
			{"current", "kube-system/cm-b (UID b, resourceVersion rv-b), set 2s ago, marked bad"},
			{"last-known-good", "kube-system/cm-a (UID a, resourceVersion rv-a)"},
			{"bad marks", "kube-system/cm-b: crash loop detected with current (UID: b)"},
			{"", "kube-system/cm-c: failed to validate current (UID: c)"},
			{"startups", "0 recorded, 0 since current was set"}, {"checkpoints", "none"},
			{"unreadable", "read x: permission denied"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.view.lines(now, name, trialOf)); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecodePointer feeds arbitrary pointer files to the view's decoder: it
// must not panic, and a remote pointer always names a ConfigMap.
func FuzzDecodePointer(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("  \n"))
	f.Add([]byte(`{"version":"dynconfig.io/pointer/v1","sha256":"00","pointer":{"setTime":"2026-11-22T10:17:33.332375158Z"}}`))
	f.Add([]byte(`{"version":"dynconfig.io/pointer/v1","sha256":"00","pointer":{"source":{"configMap":{"namespace":"kube-system","name":"a","uid":"u","resourceVersion":"1"}},"setTime":"2026-11-22T10:17:33Z"}}`))
	f.Add([]byte(`{"pointer":{"source":{}}}`))
	f.Add([]byte(`{"pointer":null}`))
	f.Add([]byte(`{"pointer":{"setTime":"yesterday"}}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePointer(data)
		if err != nil {
			if p != (pointerView{}) {
				t.Errorf("error %v with a non-zero pointer %+v", err, p)
			}
			return
		}
		if p.Source != nil && p.Source.ConfigMap == nil {
			t.Errorf("remote pointer without a ConfigMap: %+v", p.Source)
		}
		if (p.uid() == "") != (p.Source == nil || p.Source.ConfigMap.UID == "") {
			t.Errorf("uid() = %q for source %+v", p.uid(), p.Source)
		}
	})
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
