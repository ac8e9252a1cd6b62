package main

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/crashloop"
)

// The state-dir view reads the state dir with checkpoint.Inspect: without
// the lock the running component holds, without writing anything, and with
// every file verified (checksums, versions, keys). A file that cannot be
// read or trusted is shown as such, naming it.

// pointerView is a pointer as the view shows it.
type pointerView struct {
	// Source is the config pointed at; nil is the local config.
	Source *corev1.NodeConfigSource
	// SetTime is when the pointer was set.
	SetTime time.Time
	// FirstRun is, for current, when the component first ran it; zero
	// when it has not yet.
	FirstRun time.Time
}

// uid returns the ConfigMap UID the pointer names, or "" for local.
func (p pointerView) uid() string {
	if p.Source == nil || p.Source.ConfigMap == nil {
		return ""
	}
	return string(p.Source.ConfigMap.UID)
}

// checkpointView is one checkpoint on disk.
type checkpointView struct {
	UID, ResourceVersion string
	// Corrupt is true when it does not verify.
	Corrupt bool
}

// stateView is a snapshot of a state dir, for one component version. Each
// part that cannot be read leaves its error in Problems and its zero value
// in place.
type stateView struct {
	Current, LastKnownGood pointerView
	// CurrentTrial is current's trial, from its checkpoint's annotations;
	// zero when current is local or its checkpoint cannot be read.
	CurrentTrial components.Trial
	// Bad are the bad marks, keyed by checkpoint.MarkKey.
	Bad         checkpoint.BadMarks
	Startups    []time.Time
	Checkpoints []checkpointView
	// Quarantine lists what the component moved aside as corrupt.
	Quarantine []string
	Problems   []string
}

// onlyReferenced reports whether every checkpoint on disk is one that
// current or last-known-good names (what garbage collection leaves).
func (v stateView) onlyReferenced() bool {
	for _, c := range v.Checkpoints {
		if c.UID != v.Current.uid() && c.UID != v.LastKnownGood.uid() {
			return false
		}
	}
	return true
}

// readState reads the state dir dir, and the tracking dir of component
// version version, with checkpoint.Inspect. A state dir that does not exist
// yet is an empty view.
func readState(dir, version string) stateView {
	var v stateView
	snap, err := checkpoint.Inspect(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return v
	}
	if err != nil {
		v.Problems = append(v.Problems, err.Error())
		return v
	}
	problem := func(err error) { v.Problems = append(v.Problems, err.Error()) }

	for _, p := range []struct {
		st  checkpoint.PointerState
		dst *pointerView
	}{{snap.Current, &v.Current}, {snap.LastKnownGood, &v.LastKnownGood}} {
		if p.st.Err != nil {
			problem(p.st.Err)
			continue
		}
		*p.dst = pointerView{Source: p.st.Pointer.Source, SetTime: p.st.Pointer.SetTime, FirstRun: p.st.Pointer.FirstRun}
	}
	for _, c := range snap.Checkpoints {
		v.Checkpoints = append(v.Checkpoints, checkpointView{
			UID: string(c.Key.UID), ResourceVersion: c.Key.ResourceVersion, Corrupt: c.Err != nil,
		})
		if c.Err != nil {
			problem(c.Err)
		}
	}
	if k, ok := checkpoint.KeyFromSource(v.Current.Source); ok {
		if c, ok := snap.Checkpoint(k); ok && c.ConfigMap != nil {
			trial, err := components.TrialFromAnnotations(c.ConfigMap.Annotations, components.DefaultTrial())
			if err != nil {
				problem(fmt.Errorf("checkpoint %s: %w", k, err))
			} else {
				v.CurrentTrial = trial
			}
		}
	}
	if t, ok := snap.Version(version); ok {
		if t.BadMarksErr != nil {
			problem(t.BadMarksErr)
		} else if len(t.BadMarks) > 0 {
			v.Bad = t.BadMarks
		}
		if t.StartupsErr != nil {
			problem(t.StartupsErr)
		} else {
			v.Startups = t.Startups
		}
	}
	v.Quarantine = snap.Quarantine
	for _, p := range snap.Problems {
		problem(p)
	}
	return v
}

// namer names configs in the view: the demo knows its ConfigMaps by UID.
type namer func(uid string) string

// describePointer words a pointer for the view.
func describePointer(p pointerView, name namer) string {
	if p.Source == nil || p.Source.ConfigMap == nil {
		return "local"
	}
	r := p.Source.ConfigMap
	return fmt.Sprintf("%s (UID %s, resourceVersion %s)", name(string(r.UID)), r.UID, r.ResourceVersion)
}

// lines renders the view as label/value rows, at time now.
func (v stateView) lines(now time.Time, name namer) [][2]string {
	var rows [][2]string
	add := func(label, value string) { rows = append(rows, [2]string{label, value}) }

	cur := describePointer(v.Current, name)
	if uid := v.Current.uid(); uid != "" {
		cur += fmt.Sprintf(", set %s ago", roundDuration(now.Sub(v.Current.SetTime)))
		trial := v.CurrentTrial.Duration
		_, _, bad := v.Bad.Lookup(v.Current.Source)
		ran := now.Sub(v.Current.FirstRun)
		switch {
		case bad:
			cur += ", marked bad"
		case v.LastKnownGood.uid() == uid:
			cur += fmt.Sprintf(", passed its %s trial", trial)
		case v.Current.FirstRun.IsZero():
			cur += ", not run yet"
		case trial == 0:
			cur += ", trial unknown"
		case ran <= trial:
			cur += fmt.Sprintf(", on trial (%s of %s left)", roundDuration(trial-ran), trial)
		default:
			cur += fmt.Sprintf(", %s trial over, promotion pending", trial)
		}
	}
	add("current", cur)
	add("last-known-good", describePointer(v.LastKnownGood, name))

	if len(v.Bad) == 0 {
		add("bad marks", "none")
	}
	keys := make([]string, 0, len(v.Bad))
	for k := range v.Bad {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		label := ""
		if i == 0 {
			label = "bad marks"
		}
		uid, _, _ := strings.Cut(k, "/")
		add(label, fmt.Sprintf("%s: %s", name(uid), v.Bad[k].Reason))
	}

	startups := fmt.Sprintf("%d recorded", len(v.Startups))
	if v.Current.uid() != "" {
		startups += fmt.Sprintf(", %d since current was set", crashloop.CrashRestarts(v.Startups, v.Current.SetTime))
		if !v.Current.FirstRun.IsZero() {
			startups += fmt.Sprintf(", %d since it first ran", crashloop.CrashRestarts(v.Startups, v.Current.FirstRun))
			if th := v.CurrentTrial.CrashLoopThreshold; v.CurrentTrial.Duration != 0 {
				startups += fmt.Sprintf(" (crash restarts; %d tolerated)", th)
			}
		}
	}
	add("startups", startups)

	if len(v.Checkpoints) == 0 {
		add("checkpoints", "none")
	} else {
		names := make([]string, len(v.Checkpoints))
		for i, c := range v.Checkpoints {
			names[i] = name(c.UID)
			if c.Corrupt {
				names[i] += " (corrupt)"
			}
		}
		add("checkpoints", strings.Join(names, ", "))
	}
	if len(v.Quarantine) > 0 {
		add("quarantine", strings.Join(v.Quarantine, ", "))
	}
	for _, p := range v.Problems {
		add("unreadable", p)
	}
	return rows
}

// roundDuration rounds d to a tenth of a second for display.
func roundDuration(d time.Duration) time.Duration {
	if d < 0 {
		d = 0
	}
	return d.Round(100 * time.Millisecond)
}
