package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/lkg"
)

// The state-dir view reads the files the running component writes, without
// its lock, so it cannot go through checkpoint.Store (Open takes the lock)
// or crashloop.New (which removes temporary files the component may be
// writing). It only reads, and a file it cannot parse is shown as such.

// pointerView is the content of meta/current or meta/last-known-good.
type pointerView struct {
	// Source is the config pointed at; nil is the local config.
	Source *corev1.NodeConfigSource
	// SetTime is when the pointer was set; zero when unknown.
	SetTime time.Time
}

// uid returns the ConfigMap UID the pointer names, or "" for local.
func (p pointerView) uid() string {
	if p.Source == nil || p.Source.ConfigMap == nil {
		return ""
	}
	return string(p.Source.ConfigMap.UID)
}

// decodePointer parses a pointer file: an envelope
// {"version":..,"sha256":..,"pointer":{"source":..,"setTime":..}}, or
// nothing for the local config. It does not verify the checksum: the view
// shows what is there, the Controller decides whether to trust it.
func decodePointer(data []byte) (pointerView, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return pointerView{}, nil
	}
	var env struct {
		Pointer *struct {
			Source  *corev1.NodeConfigSource `json:"source"`
			SetTime time.Time                `json:"setTime"`
		} `json:"pointer"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return pointerView{}, fmt.Errorf("decode pointer: %w", err)
	}
	if env.Pointer == nil {
		return pointerView{}, errors.New("decode pointer: no pointer in the envelope")
	}
	p := pointerView{Source: env.Pointer.Source, SetTime: env.Pointer.SetTime}
	if p.Source != nil && p.Source.ConfigMap == nil {
		p.Source = nil
	}
	return p, nil
}

// checkpointView is one checkpoint on disk.
type checkpointView struct {
	UID, ResourceVersion string
}

// stateView is a snapshot of a state dir. Each part that cannot be read
// leaves its error in Problems and its zero value in place.
type stateView struct {
	Current, LastKnownGood pointerView
	// Bad are the bad marks, keyed "<uid>/<resourceVersion>".
	Bad         map[string]lkg.Entry
	Startups    []time.Time
	Checkpoints []checkpointView
	Problems    []string
}

// readState reads the state dir dir of component version version.
func readState(dir, version string) stateView {
	var v stateView
	problem := func(err error) { v.Problems = append(v.Problems, err.Error()) }

	for _, p := range []struct {
		file string
		dst  *pointerView
	}{{"current", &v.Current}, {"last-known-good", &v.LastKnownGood}} {
		path := filepath.Join(dir, "meta", p.file)
		data, err := readOptional(path)
		if err == nil {
			*p.dst, err = decodePointer(data)
		}
		if err != nil {
			problem(fmt.Errorf("%s: %w", path, err))
		}
	}

	tracking := filepath.Join(dir, "tracking", version)
	badPath := filepath.Join(tracking, lkg.BadConfigsFile)
	if data, err := readOptional(badPath); err != nil {
		problem(err)
	} else if len(data) > 0 {
		if v.Bad, err = lkg.DecodeBadConfigs(data); err != nil {
			v.Bad = nil
			problem(fmt.Errorf("%s: %w", badPath, err))
		}
	}
	startupsPath := filepath.Join(tracking, crashloop.FileName)
	if data, err := readOptional(startupsPath); err != nil {
		problem(err)
	} else if len(data) > 0 {
		if err := json.Unmarshal(data, &v.Startups); err != nil {
			v.Startups = nil // json.Unmarshal may have filled some entries
			problem(fmt.Errorf("%s: %w", startupsPath, err))
		}
	}

	checkpoints := filepath.Join(dir, "checkpoints")
	uids, err := os.ReadDir(checkpoints)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		problem(err)
	}
	for _, u := range uids {
		if !u.IsDir() || strings.HasPrefix(u.Name(), atomicfile.TempPrefix) {
			continue
		}
		rvs, err := os.ReadDir(filepath.Join(checkpoints, u.Name()))
		if err != nil {
			problem(err)
			continue
		}
		for _, rv := range rvs {
			if rv.Type().IsRegular() && !strings.HasPrefix(rv.Name(), atomicfile.TempPrefix) {
				v.Checkpoints = append(v.Checkpoints, checkpointView{UID: u.Name(), ResourceVersion: rv.Name()})
			}
		}
	}
	sort.Slice(v.Checkpoints, func(i, j int) bool {
		a, b := v.Checkpoints[i], v.Checkpoints[j]
		return a.UID < b.UID || (a.UID == b.UID && a.ResourceVersion < b.ResourceVersion)
	})
	return v
}

// readOptional reads path; a missing file is empty.
func readOptional(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// startupsSince counts the startups strictly after t (all of them for a
// zero t), the count the crash-loop verdict compares with the threshold.
func (v stateView) startupsSince(t time.Time) int {
	n := 0
	for _, s := range v.Startups {
		if t.IsZero() || s.After(t) {
			n++
		}
	}
	return n
}

// namer names configs in the view: the demo knows its ConfigMaps by UID.
type namer func(uid string) string

// describePointer words a pointer for the view.
func describePointer(p pointerView, name namer) string {
	if p.Source == nil {
		return "local"
	}
	r := p.Source.ConfigMap
	return fmt.Sprintf("%s (UID %s, resourceVersion %s)", name(string(r.UID)), r.UID, r.ResourceVersion)
}

// lines renders the view as label/value rows, at time now. trialOf gives
// the trial period of a demo config by UID.
func (v stateView) lines(now time.Time, name namer, trialOf func(uid string) time.Duration) [][2]string {
	var rows [][2]string
	add := func(label, value string) { rows = append(rows, [2]string{label, value}) }

	cur := describePointer(v.Current, name)
	if uid := v.Current.uid(); uid != "" {
		age := now.Sub(v.Current.SetTime)
		cur += fmt.Sprintf(", set %s ago", roundDuration(age))
		trial := trialOf(uid)
		_, bad := v.Bad[uid+"/"+v.Current.Source.ConfigMap.ResourceVersion]
		switch {
		case bad:
			cur += ", marked bad"
		case v.LastKnownGood.uid() == uid:
			cur += fmt.Sprintf(", passed its %s trial", trial)
		case age <= trial:
			cur += fmt.Sprintf(", on trial (%s of %s left)", roundDuration(trial-age), trial)
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
		startups += fmt.Sprintf(", %d since current was set", v.startupsSince(v.Current.SetTime))
	}
	add("startups", startups)

	if len(v.Checkpoints) == 0 {
		add("checkpoints", "none")
	} else {
		names := make([]string, len(v.Checkpoints))
		for i, c := range v.Checkpoints {
			names[i] = name(c.UID)
		}
		add("checkpoints", strings.Join(names, ", "))
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
