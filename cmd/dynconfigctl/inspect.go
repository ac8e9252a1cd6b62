package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/lkg"
)

// inspectOptions are the arguments of inspect.
type inspectOptions struct {
	dir              string
	componentVersion string // "" = every tracking dir present
	output           string // "text" or "json"
	noLock           bool
}

// Names used in usedBy lists and in the notRead list.
const (
	refCurrent       = "current"
	refLastKnownGood = "lastKnownGood"
)

// Checkpoint statuses.
const (
	statusOK         = "ok"
	statusCorrupt    = "corrupt"
	statusMissing    = "missing"
	statusError      = "error"
	statusUnverified = "unverified"
)

// inspectReport is the JSON form of inspect's output. Its field names are
// stable: scripts may rely on them.
type inspectReport struct {
	// StateDir is the absolute path of the state dir.
	StateDir string `json:"stateDir"`
	// Locked is true when the state was read under the state-dir lock, and
	// false for --no-lock.
	Locked bool `json:"locked"`
	// NotRead names what --no-lock could not read.
	NotRead []string `json:"notRead,omitempty"`
	// Current and LastKnownGood are null when not read.
	Current       *pointerReport `json:"current"`
	LastKnownGood *pointerReport `json:"lastKnownGood"`
	// Checkpoints are sorted by UID, then resourceVersion.
	Checkpoints []checkpointReport `json:"checkpoints"`
	// ComponentVersions are sorted by name.
	ComponentVersions []trackingReport `json:"componentVersions"`
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
	// Checkpoint is the status of the checkpoint a remote pointer references.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Error is set when the pointer file cannot be read or trusted; the
	// other fields are then empty.
	Error string `json:"error,omitempty"`
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
	// Status is ok, corrupt, missing, error, or unverified (--no-lock).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// UsedBy lists the pointers that reference it.
	UsedBy []string `json:"usedBy,omitempty"`
}

type trackingReport struct {
	ComponentVersion string `json:"componentVersion"`
	// BadConfigs is empty, never null, when it was read.
	BadConfigs      []badMarkReport `json:"badConfigs"`
	BadConfigsError string          `json:"badConfigsError,omitempty"`
	// Startups is null when not read (--no-lock).
	Startups      []time.Time `json:"startups"`
	StartupsError string      `json:"startupsError,omitempty"`
	// StartupsSinceCurrentSet is the count of startups after current's set
	// time, when that time is known.
	StartupsSinceCurrentSet *int `json:"startupsSinceCurrentSet,omitempty"`
}

type badMarkReport struct {
	Key    string    `json:"key"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	// UsedBy lists the pointers that reference the marked config.
	UsedBy []string `json:"usedBy,omitempty"`
}

func newInspectCommand(stdout io.Writer, d deps) *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect DIR",
		Short: "Show a state dir: current, last-known-good, checkpoints, bad marks, startups",
		Long: `inspect shows what a component's state dir holds: the current and
last-known-good configs and when they were set, every checkpoint and whether it
verifies, and for each component version the bad marks (with reasons and times)
and the recorded startups.

inspect takes the state-dir lock, so it fails while the component runs. With
--no-lock it reads without the lock and shows only what can be read safely that
way: the bad marks and the names and sizes of the checkpoints.`,
		Args: exactArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			return runInspect(stdout, o, d)
		},
	}
	cmd.Flags().StringVar(&o.componentVersion, "component-version", "", "show only this component version's tracking dir (default: all)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&o.noLock, "no-lock", false, "read without the state-dir lock, while the component runs (shows less)")
	return cmd
}

// runInspect writes the report on the state dir o.dir to w.
func runInspect(w io.Writer, o inspectOptions, d deps) error {
	if o.output != "text" && o.output != "json" {
		return usagef("--output %q: want text or json", o.output)
	}
	sd, err := checkStateDir(o.dir)
	if err != nil {
		return err
	}
	versions, err := sd.selectVersions(o.componentVersion)
	if err != nil {
		return err
	}
	var rep *inspectReport
	if o.noLock {
		rep, err = inspectNoLock(sd, versions)
	} else {
		rep, err = inspectLocked(sd, o.componentVersion, versions, d)
	}
	if err != nil {
		return err
	}
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

// inspectLocked reads everything through the library, under the lock.
func inspectLocked(sd stateDir, version string, versions []string, d deps) (*inspectReport, error) {
	store, err := sd.open(version, storeOptions{clock: d.clock, logger: d.logger, lockedHint: "stop it or use --no-lock"})
	if err != nil {
		return nil, err
	}
	defer store.Close()

	rep := &inspectReport{StateDir: sd.path, Locked: true}
	cur, curErr := store.Current()
	lkgPtr, lkgErr := store.LastKnownGood()
	rep.Current = newPointerReport(cur, curErr)
	rep.LastKnownGood = newPointerReport(lkgPtr, lkgErr)

	keys, err := store.List()
	if err != nil {
		return nil, err
	}
	rep.Checkpoints = []checkpointReport{}
	for _, k := range keys {
		c := newCheckpointReport(sd, k)
		cm, err := store.Load(k)
		switch {
		case err == nil:
			c.Status = statusOK
			c.Namespace, c.Name = cm.Namespace, cm.Name
			for key := range cm.Data {
				c.DataKeys = append(c.DataKeys, key)
			}
			slices.Sort(c.DataKeys)
		case errors.Is(err, checkpoint.ErrCorrupt):
			c.Status, c.Error = statusCorrupt, err.Error()
		case errors.Is(err, checkpoint.ErrNotFound):
			c.Status, c.Error = statusMissing, err.Error()
		default:
			c.Status, c.Error = statusError, err.Error()
		}
		rep.Checkpoints = append(rep.Checkpoints, c)
	}
	markUsed(rep)

	for _, v := range versions {
		t := trackingReport{ComponentVersion: v, BadConfigs: []badMarkReport{}}
		dir := sd.trackingDir(v)
		bad, err := lkg.NewTracker(lkg.TrackerOptions{Dir: dir})
		if err != nil {
			return nil, err
		}
		entries, err := bad.Entries()
		if err != nil {
			t.BadConfigsError = err.Error()
		}
		t.BadConfigs = badMarks(entries, rep)

		startups, err := crashloop.New(crashloop.Options{Dir: dir, Clock: d.clock})
		if err != nil {
			return nil, err
		}
		t.Startups, err = startups.Startups()
		if err != nil {
			t.StartupsError = err.Error()
		}
		for i := range t.Startups {
			t.Startups[i] = t.Startups[i].UTC()
		}
		if t.Startups == nil {
			t.Startups = []time.Time{}
		}
		if curErr == nil && !cur.SetTime.IsZero() && t.StartupsError == "" {
			n, err := startups.StartupsSince(cur.SetTime)
			if err != nil {
				t.StartupsError = err.Error()
			} else {
				t.StartupsSinceCurrentSet = &n
			}
		}
		rep.ComponentVersions = append(rep.ComponentVersions, t)
	}
	if rep.ComponentVersions == nil {
		rep.ComponentVersions = []trackingReport{}
	}
	return rep, nil
}

// inspectNoLock reads what it can without the lock and without writing:
// the bad marks (lkg.DecodeBadConfigs) and the checkpoint file names. The
// pointer, checkpoint and startups decoders are not exported, and their
// readers need the lock (checkpoint.Open, crashloop.New clean up temporary
// files, which would race with the running component).
func inspectNoLock(sd stateDir, versions []string) (*inspectReport, error) {
	rep := &inspectReport{
		StateDir: sd.path,
		NotRead:  []string{refCurrent, refLastKnownGood, "startups", "checkpoint contents"},
	}
	root := filepath.Join(sd.path, checkpointsDir)
	uids, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints in %s: %w", root, err)
	}
	rep.Checkpoints = []checkpointReport{}
	for _, u := range uids {
		if !u.IsDir() {
			continue
		}
		rvs, err := os.ReadDir(filepath.Join(root, u.Name()))
		if err != nil {
			return nil, fmt.Errorf("list checkpoints in %s: %w", filepath.Join(root, u.Name()), err)
		}
		for _, rv := range rvs {
			k := checkpoint.Key{UID: types.UID(u.Name()), ResourceVersion: rv.Name()}
			// ValidateKey also rejects the temporary files of writes in
			// progress.
			if checkpoint.ValidateKey(k) != nil || !rv.Type().IsRegular() {
				continue
			}
			c := newCheckpointReport(sd, k)
			if c.Status == "" {
				c.Status = statusUnverified
			}
			rep.Checkpoints = append(rep.Checkpoints, c)
		}
	}
	slices.SortFunc(rep.Checkpoints, func(a, b checkpointReport) int {
		return strings.Compare(string(a.UID)+"\x00"+a.ResourceVersion, string(b.UID)+"\x00"+b.ResourceVersion)
	})

	rep.ComponentVersions = []trackingReport{}
	for _, v := range versions {
		t := trackingReport{ComponentVersion: v, BadConfigs: []badMarkReport{}}
		path := filepath.Join(sd.trackingDir(v), lkg.BadConfigsFile)
		data, err := readNoFollow(path, maxTrackingFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			t.BadConfigsError = err.Error()
		default:
			entries, err := lkg.DecodeBadConfigs(data)
			if err != nil {
				t.BadConfigsError = fmt.Sprintf("%s: %v", path, err)
			}
			t.BadConfigs = badMarks(entries, rep)
		}
		rep.ComponentVersions = append(rep.ComponentVersions, t)
	}
	return rep, nil
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
	if !r.Local {
		ref := p.Source.ConfigMap
		r.Namespace, r.Name, r.UID = ref.Namespace, ref.Name, ref.UID
		r.ResourceVersion, r.KubeletConfigKey = ref.ResourceVersion, ref.KubeletConfigKey
	}
	return r
}

// newCheckpointReport fills in the key and the file size; a file that cannot
// be stat'ed gets an error status.
func newCheckpointReport(sd stateDir, k checkpoint.Key) checkpointReport {
	c := checkpointReport{Key: k.String(), UID: k.UID, ResourceVersion: k.ResourceVersion}
	fi, err := os.Lstat(filepath.Join(sd.path, checkpointsDir, string(k.UID), k.ResourceVersion))
	if err != nil {
		c.Status, c.Error = statusError, err.Error()
		return c
	}
	c.Size = fi.Size()
	return c
}

// pointerKey returns the key a readable remote pointer references.
func pointerKey(p *pointerReport) (string, bool) {
	if p == nil || p.Error != "" || p.Local {
		return "", false
	}
	return checkpoint.Key{UID: p.UID, ResourceVersion: p.ResourceVersion}.String(), true
}

// usedBy lists the pointers of rep that reference key.
func usedBy(rep *inspectReport, key string) []string {
	var refs []string
	if k, ok := pointerKey(rep.Current); ok && k == key {
		refs = append(refs, refCurrent)
	}
	if k, ok := pointerKey(rep.LastKnownGood); ok && k == key {
		refs = append(refs, refLastKnownGood)
	}
	return refs
}

// markUsed fills in the checkpoints' usedBy and the pointers' checkpoint
// status.
func markUsed(rep *inspectReport) {
	status := map[string]string{}
	for i := range rep.Checkpoints {
		c := &rep.Checkpoints[i]
		c.UsedBy = usedBy(rep, c.Key)
		status[c.Key] = c.Status
	}
	for _, p := range []*pointerReport{rep.Current, rep.LastKnownGood} {
		if k, ok := pointerKey(p); ok {
			p.Checkpoint = statusMissing
			if s, ok := status[k]; ok {
				p.Checkpoint = s
			}
		}
	}
}

func badMarks(entries map[string]lkg.Entry, rep *inspectReport) []badMarkReport {
	out := []badMarkReport{}
	for k, e := range entries {
		out = append(out, badMarkReport{Key: k, Time: e.Time.UTC(), Reason: e.Reason, UsedBy: usedBy(rep, k)})
	}
	slices.SortFunc(out, func(a, b badMarkReport) int { return strings.Compare(a.Key, b.Key) })
	return out
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
		fmt.Fprintf(&b, "Read:             under the state-dir lock\n")
	} else {
		fmt.Fprintf(&b, "Read:             without the lock (--no-lock); not read: %s\n", strings.Join(rep.NotRead, ", "))
	}
	fmt.Fprintf(&b, "\n")
	writePointer(&b, "Current:", rep.Current)
	writePointer(&b, "Last-known-good:", rep.LastKnownGood)

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
		fmt.Fprintf(&b, "\nComponent version %s (%s/%s/):\n", t.ComponentVersion, trackingDir, t.ComponentVersion)
		switch {
		case t.BadConfigsError != "":
			fmt.Fprintf(&b, "  Bad configs: file unusable, the component reads it as empty: %s\n", t.BadConfigsError)
		case len(t.BadConfigs) == 0:
			fmt.Fprintf(&b, "  Bad configs: none\n")
		default:
			fmt.Fprintf(&b, "  Bad configs (%d):\n", len(t.BadConfigs))
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "    KEY\tMARKED\tUSED BY\tREASON\n")
			for _, m := range t.BadConfigs {
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", m.Key, formatTime(m.Time), orDash(strings.Join(m.UsedBy, ",")), m.Reason)
			}
			_ = tw.Flush()
		}
		switch {
		case t.Startups == nil:
			fmt.Fprintf(&b, "  Startups: not read\n")
		case t.StartupsError != "":
			fmt.Fprintf(&b, "  Startups: file unusable, the component reads it as empty: %s\n", t.StartupsError)
		case len(t.Startups) == 0:
			fmt.Fprintf(&b, "  Startups: none recorded\n")
		default:
			since := ""
			if t.StartupsSinceCurrentSet != nil {
				since = fmt.Sprintf(", %d since current was set", *t.StartupsSinceCurrentSet)
			}
			fmt.Fprintf(&b, "  Startups (%d recorded%s):\n", len(t.Startups), since)
			for _, s := range t.Startups {
				fmt.Fprintf(&b, "    %s\n", formatTime(s))
			}
		}
	}
	if len(rep.ComponentVersions) == 0 {
		fmt.Fprintf(&b, "\nComponent versions: none (%s/ is empty)\n", trackingDir)
	}
	return b.Bytes()
}

func writePointer(b *bytes.Buffer, label string, p *pointerReport) {
	const indent = "                  "
	fmt.Fprintf(b, "%-18s", label)
	switch {
	case p == nil:
		fmt.Fprintf(b, "not read (needs the state-dir lock)\n")
		return
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
	if !p.Local {
		fmt.Fprintf(b, "%scheckpoint %s\n", indent, p.Checkpoint)
	}
}
