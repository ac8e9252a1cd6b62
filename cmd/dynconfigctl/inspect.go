package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/crashloop"
)

// inspectOptions are the arguments of inspect.
type inspectOptions struct {
	dir              string
	componentVersion string // "" = every tracking dir present
	output           string // "text" or "json"
	noLock           bool
}

// Names used in usedBy lists.
const (
	refCurrent       = "current"
	refLastKnownGood = "lastKnownGood"
)

// Checkpoint statuses.
const (
	statusOK      = "ok"
	statusCorrupt = "corrupt"
	statusMissing = "missing"
	statusError   = "error"
)

// Where the trial settings of current come from.
const (
	trialFromAnnotations = "annotations"
	trialFromDefault     = "default"
)

// inspectReport is the JSON form of inspect's output. Its field names are
// stable: scripts may rely on them.
type inspectReport struct {
	// StateDir is the absolute path of the state dir.
	StateDir string `json:"stateDir"`
	// Locked is true when the state was read under the state-dir lock, and
	// false for --no-lock.
	Locked bool `json:"locked"`
	// InspectedAt is the time trial progress and dead ends were judged at.
	InspectedAt time.Time `json:"inspectedAt"`
	// Current and LastKnownGood are the pointers; a pointer that cannot be
	// read or trusted has only Error set.
	Current       *pointerReport `json:"current"`
	LastKnownGood *pointerReport `json:"lastKnownGood"`
	// Checkpoints are sorted by UID, then resourceVersion.
	Checkpoints []checkpointReport `json:"checkpoints"`
	// ComponentVersions are sorted by name.
	ComponentVersions []trackingReport `json:"componentVersions"`
	// Quarantine lists the entries of the state dir's quarantine (corrupt or
	// foreign files the component moved aside), oldest first.
	Quarantine []string `json:"quarantine"`
	// Problems is damage outside the files above (a missing or foreign
	// directory of the layout, an entry that is not a valid key), each
	// naming its path.
	Problems []string `json:"problems"`
}

type pointerReport struct {
	// Local is true for the local config.
	Local            bool       `json:"local"`
	Namespace        string     `json:"namespace,omitempty"`
	Name             string     `json:"name,omitempty"`
	UID              types.UID  `json:"uid,omitempty"`
	ResourceVersion  string     `json:"resourceVersion,omitempty"`
	KubeletConfigKey string     `json:"kubeletConfigKey,omitempty"`
	SetTime          *time.Time `json:"setTime,omitempty"`
	// FirstRun is when the component first ran current (crash-loop
	// counting starts there); absent when it has not run it yet, and for
	// last-known-good.
	FirstRun *time.Time `json:"firstRun,omitempty"`
	// Checkpoint is the status of the checkpoint a remote pointer references.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Trial is current's trial, for a remote current.
	Trial *trialReport `json:"trial,omitempty"`
	// Error is set when the pointer file cannot be read or trusted; the
	// other fields are then empty.
	Error string `json:"error,omitempty"`
}

// trialReport is the trial of current: its settings and how far it got.
type trialReport struct {
	// Duration is the trial period (time.Duration syntax).
	Duration string `json:"duration"`
	// CrashLoopThreshold is how many crash restarts within the trial are
	// tolerated.
	CrashLoopThreshold int `json:"crashLoopThreshold"`
	// From is "annotations" when the checkpoint's annotations set the trial,
	// "default" for the built-in defaults (components.DefaultTrial; a
	// component may be configured with other defaults).
	From string `json:"from"`
	// Error says why the defaults were used although they may not apply:
	// the checkpoint cannot be read, or an annotation is invalid (the
	// component marks such a config bad).
	Error string `json:"error,omitempty"`
	// Ends is the first run plus the duration: crash restarts count until
	// then. Absent until current first ran.
	Ends *time.Time `json:"ends,omitempty"`
	// Over is true when InspectedAt is past Ends. Promotion to
	// last-known-good also needs a full trial of uptime in one process,
	// which a state dir does not record.
	Over bool `json:"over"`
}

type checkpointReport struct {
	Key             string    `json:"key"`
	UID             types.UID `json:"uid"`
	ResourceVersion string    `json:"resourceVersion"`
	// Namespace, Name and DataKeys come from the verified checkpoint.
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name,omitempty"`
	DataKeys  []string `json:"dataKeys,omitempty"`
	// Size is the size of the checkpoint file in bytes.
	Size int64 `json:"size"`
	// Status is ok, corrupt or error.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// UsedBy lists the pointers that reference it.
	UsedBy []string `json:"usedBy,omitempty"`
}

type trackingReport struct {
	ComponentVersion string `json:"componentVersion"`
	// BadConfigs is empty, never null.
	BadConfigs      []badMarkReport `json:"badConfigs"`
	BadConfigsError string          `json:"badConfigsError,omitempty"`
	// Startups is empty, never null, oldest first.
	Startups      []time.Time `json:"startups"`
	StartupsError string      `json:"startupsError,omitempty"`
	// StartupsSinceCurrentSet is the count of startups after current's set
	// time, when that time is known.
	StartupsSinceCurrentSet *int `json:"startupsSinceCurrentSet,omitempty"`
	// CrashRestartsSinceFirstRun is the count of startups after current's
	// first run, the count the crash-loop verdict compares with the
	// threshold; absent until current first ran.
	CrashRestartsSinceFirstRun *int `json:"crashRestartsSinceFirstRun,omitempty"`
	// DeadEnd is set when current is marked bad and the component keeps
	// crashing on the config it rolled back to.
	DeadEnd *deadEndReport `json:"deadEnd,omitempty"`
}

type badMarkReport struct {
	// Key is "<uid>/<resourceVersion>/<payload key>", or
	// "<uid>/<resourceVersion>" for a mark of an older version, which
	// marks every payload key of the ConfigMap.
	Key    string    `json:"key"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	// Problem is the kind of problem ("CrashLoop", "ValidateFailed", ...);
	// absent in marks of older versions.
	Problem string `json:"problem,omitempty"`
	// UsedBy lists the pointers that reference the marked config.
	UsedBy []string `json:"usedBy,omitempty"`
}

// deadEndReport is a dead end: current is marked bad, and the startups since
// the mark exceed current's crash-loop threshold within its trial, so the
// config the component rolled back to crash-loops too.
type deadEndReport struct {
	// MarkKey, Reason, Problem and MarkedAt are current's bad mark.
	MarkKey  string    `json:"markKey"`
	Reason   string    `json:"reason"`
	Problem  string    `json:"problem,omitempty"`
	MarkedAt time.Time `json:"markedAt"`
	// CrashRestartsSinceMark is the count of startups after the mark.
	CrashRestartsSinceMark int `json:"crashRestartsSinceMark"`
	// ForgetBadRepairs is true when the mark is for a crash loop: the
	// crashes may not be the config's fault, and after repairing the node,
	// forget-bad gives current a fresh trial. A decode, validation or apply
	// mark is certain, and forgetting it cannot help.
	ForgetBadRepairs bool `json:"forgetBadRepairs"`
	// Repair is the command that forgets the mark, when ForgetBadRepairs.
	Repair string `json:"repair,omitempty"`
}

func newInspectCommand(stdout io.Writer, d deps) *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect DIR",
		Short: "Show a state dir: current, last-known-good, trial, checkpoints, bad marks, startups, dead ends",
		Long: `inspect shows what a component's state dir holds: the current and
last-known-good configs, when they were set and when current first ran, current's
trial and how far it got, every checkpoint and whether it verifies, and for each
component version the bad marks (with reasons and times), the recorded startups
and whether the component is at a dead end (current marked bad and the config it
rolled back to crash-looping too).

Every file is read and verified by package checkpoint; a file that cannot be
read or trusted (garbage, a bad checksum, a FIFO, a directory or a symbolic
link in its place) is shown as unreadable, naming it, next to the rest.

inspect takes the state-dir lock (shared; it writes nothing), so it fails while
the component runs. With --no-lock it reads the same without the lock, while the
component runs: every file is replaced by a rename, so each is seen old or new,
but the component may change the state right after.`,
		Args: exactArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			return runInspect(stdout, o, d)
		},
	}
	cmd.Flags().StringVar(&o.componentVersion, "component-version", "", "show only this component version's tracking dir (default: all)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&o.noLock, "no-lock", false, "read without the state-dir lock, while the component runs")
	return cmd
}

// runInspect writes the report on the state dir o.dir to w.
func runInspect(w io.Writer, o inspectOptions, d deps) error {
	if o.output != "text" && o.output != "json" {
		return usagef("--output %q: want text or json", o.output)
	}
	sd, err := checkStateDirToRead(o.dir)
	if err != nil {
		return err
	}
	if _, err := sd.selectVersions(o.componentVersion); err != nil {
		return err
	}
	snap, err := readSnapshot(sd, !o.noLock)
	if err != nil {
		return err
	}
	rep := buildReport(snap, o.componentVersion, !o.noLock, d.clock.Now())
	var out []byte
	if o.output == "json" {
		out, err = json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		out = append(out, '\n')
	} else {
		out = renderInspect(rep)
	}
	_, err = w.Write(out)
	return err
}

// readSnapshot reads the whole state dir with checkpoint.Inspect, under the
// shared state-dir lock when locked.
func readSnapshot(sd stateDir, locked bool) (*checkpoint.Snapshot, error) {
	if locked {
		unlock, err := checkpoint.LockShared(sd.path)
		if errors.Is(err, checkpoint.ErrLocked) {
			return nil, &inUseError{dir: sd.path, hint: "stop it or use --no-lock", err: err}
		}
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	return checkpoint.Inspect(sd.path)
}

// buildReport turns a snapshot into the report, judging trial progress and
// dead ends at now. version, when not empty, selects one component version.
func buildReport(snap *checkpoint.Snapshot, version string, locked bool, now time.Time) *inspectReport {
	rep := &inspectReport{
		StateDir:          snap.Dir,
		Locked:            locked,
		InspectedAt:       now.UTC(),
		Checkpoints:       []checkpointReport{},
		ComponentVersions: []trackingReport{},
		Quarantine:        []string{},
		Problems:          []string{},
	}
	cur, lkgPtr := snap.Current, snap.LastKnownGood
	rep.Current = newPointerReport(cur.Pointer, cur.Err)
	rep.LastKnownGood = newPointerReport(lkgPtr.Pointer, lkgPtr.Err)
	// A pointer's FirstRun is only meaningful for current.
	rep.LastKnownGood.FirstRun = nil

	for _, c := range snap.Checkpoints {
		r := checkpointReport{Key: c.Key.String(), UID: c.Key.UID, ResourceVersion: c.Key.ResourceVersion, Size: c.Size}
		switch {
		case c.Err == nil && c.ConfigMap != nil:
			r.Status = statusOK
			r.Namespace, r.Name = c.ConfigMap.Namespace, c.ConfigMap.Name
			for key := range c.ConfigMap.Data {
				r.DataKeys = append(r.DataKeys, key)
			}
			slices.Sort(r.DataKeys)
		case errors.Is(c.Err, checkpoint.ErrCorrupt):
			r.Status, r.Error = statusCorrupt, c.Err.Error()
		default:
			r.Status, r.Error = statusError, errString(c.Err)
		}
		r.UsedBy = checkpointUsedBy(snap, c.Key)
		rep.Checkpoints = append(rep.Checkpoints, r)
	}
	for _, p := range []struct {
		st  checkpoint.PointerState
		rep *pointerReport
	}{{cur, rep.Current}, {lkgPtr, rep.LastKnownGood}} {
		if k, ok := pointerKey(p.st); ok {
			p.rep.Checkpoint = statusMissing
			if c, ok := snap.Checkpoint(k); ok {
				p.rep.Checkpoint = checkpointStatus(c)
			}
		}
	}

	// Current's trial, from its checkpoint's annotations, as the component
	// reads it.
	trial := components.DefaultTrial()
	if k, ok := pointerKey(cur); ok {
		tr := &trialReport{From: trialFromDefault}
		c, found := snap.Checkpoint(k)
		switch {
		case !found:
			tr.Error = fmt.Sprintf("checkpoint %s is missing: the component cannot run current", k)
		case c.ConfigMap == nil:
			tr.Error = fmt.Sprintf("checkpoint %s is unreadable: %v", k, c.Err)
		default:
			t, err := components.TrialFromAnnotations(c.ConfigMap.Annotations, components.DefaultTrial())
			if err != nil {
				tr.Error = err.Error()
			} else {
				trial = t
				if hasTrialAnnotation(c.ConfigMap) {
					tr.From = trialFromAnnotations
				}
			}
		}
		tr.Duration, tr.CrashLoopThreshold = trial.Duration.String(), trial.CrashLoopThreshold
		if fr := cur.Pointer.FirstRun; !fr.IsZero() {
			ends := fr.Add(trial.Duration).UTC()
			tr.Ends, tr.Over = &ends, now.After(ends)
		}
		rep.Current.Trial = tr
	}

	for _, t := range snap.Tracking {
		if version != "" && t.ComponentVersion != version {
			continue
		}
		rep.ComponentVersions = append(rep.ComponentVersions, trackingFor(snap, t, trial, now))
	}
	rep.Quarantine = append(rep.Quarantine, snap.Quarantine...)
	for _, p := range snap.Problems {
		rep.Problems = append(rep.Problems, p.Error())
	}
	return rep
}

// trackingFor reports one component version's tracking dir.
func trackingFor(snap *checkpoint.Snapshot, t checkpoint.TrackingState, trial components.Trial, now time.Time) trackingReport {
	r := trackingReport{ComponentVersion: t.ComponentVersion, BadConfigs: []badMarkReport{}, Startups: []time.Time{}}
	if t.BadMarksErr != nil {
		r.BadConfigsError = t.BadMarksErr.Error()
	}
	for k, m := range t.BadMarks {
		r.BadConfigs = append(r.BadConfigs, badMarkReport{
			Key: k, Time: m.Time.UTC(), Reason: m.Reason, Problem: m.Problem, UsedBy: markUsedBy(snap, k),
		})
	}
	slices.SortFunc(r.BadConfigs, func(a, b badMarkReport) int { return strings.Compare(a.Key, b.Key) })
	if t.StartupsErr != nil {
		r.StartupsError = t.StartupsErr.Error()
	}
	for _, s := range t.Startups {
		r.Startups = append(r.Startups, s.UTC())
	}

	cur := snap.Current
	if cur.Err != nil || t.StartupsErr != nil {
		return r
	}
	if !cur.Pointer.SetTime.IsZero() {
		n := crashloop.CrashRestarts(t.Startups, cur.Pointer.SetTime)
		r.StartupsSinceCurrentSet = &n
	}
	if !cur.Pointer.FirstRun.IsZero() {
		n := crashloop.CrashRestarts(t.Startups, cur.Pointer.FirstRun)
		r.CrashRestartsSinceFirstRun = &n
	}
	key, mark, marked := t.BadMarks.Lookup(cur.Pointer.Source)
	if !marked {
		return r
	}
	if crashloop.CrashLooping(crashloop.Input{
		Startups: t.Startups, Since: mark.Time, Now: now, Trial: trial.Duration, Threshold: trial.CrashLoopThreshold,
	}) {
		de := &deadEndReport{
			MarkKey: key, Reason: mark.Reason, Problem: mark.Problem, MarkedAt: mark.Time.UTC(),
			CrashRestartsSinceMark: crashloop.CrashRestarts(t.Startups, mark.Time),
			ForgetBadRepairs:       mark.IsCrashLoop(),
		}
		if de.ForgetBadRepairs {
			de.Repair = fmt.Sprintf("dynconfigctl forget-bad %s %s --component-version %s", snap.Dir, key, t.ComponentVersion)
		}
		r.DeadEnd = de
	}
	return r
}

func hasTrialAnnotation(cm *corev1.ConfigMap) bool {
	_, d := cm.Annotations[components.TrialDurationAnnotation]
	_, t := cm.Annotations[components.CrashLoopThresholdAnnotation]
	return d || t
}

func newPointerReport(p checkpoint.Pointer, err error) *pointerReport {
	if err != nil {
		return &pointerReport{Error: err.Error()}
	}
	r := &pointerReport{Local: p.Source == nil || p.Source.ConfigMap == nil}
	if !p.SetTime.IsZero() {
		t := p.SetTime.UTC()
		r.SetTime = &t
	}
	if !p.FirstRun.IsZero() {
		t := p.FirstRun.UTC()
		r.FirstRun = &t
	}
	if !r.Local {
		ref := p.Source.ConfigMap
		r.Namespace, r.Name, r.UID = ref.Namespace, ref.Name, ref.UID
		r.ResourceVersion, r.KubeletConfigKey = ref.ResourceVersion, ref.KubeletConfigKey
	}
	return r
}

// pointerKey returns the checkpoint a readable remote pointer references.
func pointerKey(p checkpoint.PointerState) (checkpoint.Key, bool) {
	if p.Err != nil {
		return checkpoint.Key{}, false
	}
	return checkpoint.KeyFromSource(p.Pointer.Source)
}

func checkpointStatus(c checkpoint.CheckpointState) string {
	switch {
	case c.Err == nil && c.ConfigMap != nil:
		return statusOK
	case errors.Is(c.Err, checkpoint.ErrCorrupt):
		return statusCorrupt
	}
	return statusError
}

// checkpointUsedBy lists the pointers that reference the checkpoint k.
func checkpointUsedBy(snap *checkpoint.Snapshot, k checkpoint.Key) []string {
	var refs []string
	for _, p := range []struct {
		name string
		st   checkpoint.PointerState
	}{{refCurrent, snap.Current}, {refLastKnownGood, snap.LastKnownGood}} {
		if pk, ok := pointerKey(p.st); ok && pk == k {
			refs = append(refs, p.name)
		}
	}
	return refs
}

// markUsedBy lists the pointers whose config the mark key applies to, as
// the component looks marks up (checkpoint.BadMarks.Lookup).
func markUsedBy(snap *checkpoint.Snapshot, key string) []string {
	var refs []string
	only := checkpoint.BadMarks{key: {}}
	for _, p := range []struct {
		name string
		st   checkpoint.PointerState
	}{{refCurrent, snap.Current}, {refLastKnownGood, snap.LastKnownGood}} {
		if p.st.Err != nil {
			continue
		}
		if _, _, ok := only.Lookup(p.st.Pointer.Source); ok {
			refs = append(refs, p.name)
		}
	}
	return refs
}

func errString(err error) string {
	if err == nil {
		return "unreadable"
	}
	return err.Error()
}

// timeFormat shows milliseconds: startups a moment apart stay apart.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// renderInspect is the human-readable form of rep.
func renderInspect(rep *inspectReport) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "State dir:        %s\n", rep.StateDir)
	if rep.Locked {
		fmt.Fprintf(&b, "Read:             under the state-dir lock, at %s\n", formatTime(rep.InspectedAt))
	} else {
		fmt.Fprintf(&b, "Read:             without the lock (--no-lock), at %s: a running component may change it right after\n", formatTime(rep.InspectedAt))
	}
	fmt.Fprintf(&b, "\n")
	writePointer(&b, "Current:", rep.Current, rep)
	writePointer(&b, "Last-known-good:", rep.LastKnownGood, rep)

	fmt.Fprintf(&b, "\nCheckpoints (%d):\n", len(rep.Checkpoints))
	if len(rep.Checkpoints) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  KEY\tCONFIGMAP\tDATA KEYS\tBYTES\tSTATUS\tUSED BY\n")
		for _, c := range rep.Checkpoints {
			cm := ""
			if c.Name != "" {
				cm = c.Namespace + "/" + c.Name
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", c.Key, orDash(cm), orDash(strings.Join(c.DataKeys, ",")),
				c.Size, c.Status, orDash(strings.Join(c.UsedBy, ",")))
		}
		_ = tw.Flush()
		for _, c := range rep.Checkpoints {
			if c.Error != "" {
				fmt.Fprintf(&b, "  %s: %s\n", c.Key, c.Error)
			}
		}
	}

	for _, t := range rep.ComponentVersions {
		writeTracking(&b, rep, t)
	}
	if len(rep.ComponentVersions) == 0 {
		fmt.Fprintf(&b, "\nComponent versions: none (%s/ holds no component version directory)\n", trackingDir)
	}

	if len(rep.Quarantine) == 0 {
		fmt.Fprintf(&b, "\nQuarantine: empty\n")
	} else {
		fmt.Fprintf(&b, "\nQuarantine (%d, oldest first; corrupt or foreign files moved aside, kept as evidence):\n", len(rep.Quarantine))
		for _, q := range rep.Quarantine {
			fmt.Fprintf(&b, "  %s\n", q)
		}
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(&b, "\nProblems (%d):\n", len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	return b.Bytes()
}

func writeTracking(b *bytes.Buffer, rep *inspectReport, t trackingReport) {
	fmt.Fprintf(b, "\nComponent version %s (%s/%s/):\n", t.ComponentVersion, trackingDir, t.ComponentVersion)
	switch {
	case t.BadConfigsError != "":
		fmt.Fprintf(b, "  Bad configs: UNREADABLE: %s\n", t.BadConfigsError)
		if strings.HasPrefix(t.BadConfigsError, "corrupt file ") {
			fmt.Fprintf(b, "    (the component moves a corrupt file to the quarantine and reads it as no marks)\n")
		}
	case len(t.BadConfigs) == 0:
		fmt.Fprintf(b, "  Bad configs: none\n")
	default:
		fmt.Fprintf(b, "  Bad configs (%d):\n", len(t.BadConfigs))
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "    KEY\tMARKED\tPROBLEM\tUSED BY\tREASON\n")
		for _, m := range t.BadConfigs {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", m.Key, formatTime(m.Time), orDash(m.Problem), orDash(strings.Join(m.UsedBy, ",")), m.Reason)
		}
		_ = tw.Flush()
	}
	switch {
	case t.StartupsError != "":
		fmt.Fprintf(b, "  Startups: UNREADABLE: %s\n", t.StartupsError)
		if strings.HasPrefix(t.StartupsError, "corrupt file ") {
			fmt.Fprintf(b, "    (the component moves a corrupt file to the quarantine and starts counting anew)\n")
		}
	case len(t.Startups) == 0:
		fmt.Fprintf(b, "  Startups: none recorded\n")
	default:
		var since []string
		if t.StartupsSinceCurrentSet != nil {
			since = append(since, fmt.Sprintf("%d since current was set", *t.StartupsSinceCurrentSet))
		}
		if t.CrashRestartsSinceFirstRun != nil {
			s := fmt.Sprintf("%d crash restarts since current first ran", *t.CrashRestartsSinceFirstRun)
			if tr := rep.Current.Trial; tr != nil {
				s += fmt.Sprintf(" (threshold %d)", tr.CrashLoopThreshold)
			}
			since = append(since, s)
		}
		extra := ""
		if len(since) > 0 {
			extra = ", " + strings.Join(since, ", ")
		}
		fmt.Fprintf(b, "  Startups (%d recorded%s):\n", len(t.Startups), extra)
		for _, s := range t.Startups {
			fmt.Fprintf(b, "    %s\n", formatTime(s))
		}
	}
	if de := t.DeadEnd; de != nil {
		tr := rep.Current.Trial
		fmt.Fprintf(b, "  DEAD END: current is marked bad (%s: %s),\n", de.MarkKey, de.Reason)
		fmt.Fprintf(b, "    and the component keeps crashing on the config it rolled back to: %d crash restarts\n", de.CrashRestartsSinceMark)
		fmt.Fprintf(b, "    since the mark, more than the threshold %d, within the %s trial.\n", tr.CrashLoopThreshold, tr.Duration)
		if de.ForgetBadRepairs {
			fmt.Fprintf(b, "    The mark is for a crash loop, which may not be the config's fault. Repair the node, then give\n")
			fmt.Fprintf(b, "    current a fresh trial by forgetting the mark (stop the component first):\n")
			fmt.Fprintf(b, "      %s\n", de.Repair)
		} else {
			fmt.Fprintf(b, "    The mark is certain (%s): forget-bad cannot help. Repair the node, or assign another config.\n", orDash(de.Problem))
		}
	}
}

func writePointer(b *bytes.Buffer, label string, p *pointerReport, rep *inspectReport) {
	const indent = "                  "
	fmt.Fprintf(b, "%-18s", label)
	switch {
	case p.Error != "":
		fmt.Fprintf(b, "UNREADABLE: %s\n", p.Error)
		return
	case p.Local:
		fmt.Fprintf(b, "local")
	default:
		fmt.Fprintf(b, "ConfigMap %s/%s (UID: %s, resourceVersion: %s, key: %s)",
			p.Namespace, p.Name, p.UID, orDash(p.ResourceVersion), orDash(p.KubeletConfigKey))
	}
	fmt.Fprintf(b, "\n")
	if p.SetTime != nil {
		fmt.Fprintf(b, "%sset %s\n", indent, formatTime(*p.SetTime))
	} else {
		fmt.Fprintf(b, "%sset time unknown\n", indent)
	}
	if p.FirstRun != nil {
		fmt.Fprintf(b, "%sfirst run %s\n", indent, formatTime(*p.FirstRun))
	} else if p == rep.Current && !p.Local {
		fmt.Fprintf(b, "%snot run yet: its trial starts when the component first runs it\n", indent)
	}
	if tr := p.Trial; tr != nil {
		from := "from its annotations"
		if tr.From == trialFromDefault {
			from = "the built-in default"
		}
		fmt.Fprintf(b, "%strial %s, crash-loop threshold %d (%s)", indent, tr.Duration, tr.CrashLoopThreshold, from)
		switch {
		case tr.Ends == nil:
		case tr.Over:
			fmt.Fprintf(b, "; ended %s", formatTime(*tr.Ends))
		default:
			fmt.Fprintf(b, "; ends %s, %s left", formatTime(*tr.Ends), tr.Ends.Sub(rep.InspectedAt).Round(100*time.Millisecond))
		}
		fmt.Fprintf(b, "\n")
		if tr.Error != "" {
			fmt.Fprintf(b, "%s  (%s)\n", indent, tr.Error)
		}
		if samePointer(rep.Current, rep.LastKnownGood) {
			fmt.Fprintf(b, "%spromoted: it is also last-known-good\n", indent)
		}
		for _, t := range rep.ComponentVersions {
			for _, m := range t.BadConfigs {
				if slices.Contains(m.UsedBy, refCurrent) {
					fmt.Fprintf(b, "%sMARKED BAD by component version %s (%s): %s\n", indent, t.ComponentVersion, m.Key, m.Reason)
				}
			}
		}
	}
	if !p.Local {
		fmt.Fprintf(b, "%scheckpoint %s\n", indent, p.Checkpoint)
	}
}

// samePointer reports whether two readable remote pointers name the same
// config.
func samePointer(a, b *pointerReport) bool {
	return a.Error == "" && b.Error == "" && !a.Local && !b.Local &&
		a.UID == b.UID && a.ResourceVersion == b.ResourceVersion && a.KubeletConfigKey == b.KubeletConfigKey
}
