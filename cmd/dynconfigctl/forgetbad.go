package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// forgetBadOptions are the arguments of forget-bad.
type forgetBadOptions struct {
	dir              string
	key              string // UID/RV or UID/RV/PAYLOADKEY
	componentVersion string // "" = the one version that has the mark
}

func newForgetBadCommand(stdout io.Writer, d deps) *cobra.Command {
	var o forgetBadOptions
	cmd := &cobra.Command{
		Use:   "forget-bad DIR UID/RV[/PAYLOADKEY]",
		Short: "Remove a bad mark, so that the component tries that config again",
		Long: `forget-bad removes the bad mark of a config: UID/RV (the ConfigMap's UID and
resourceVersion) removes the marks of every payload key of that ConfigMap
version, UID/RV/PAYLOADKEY the mark of one config, as inspect shows the keys.
It is the repair step after a dead end: when the config rolled back to
crash-looped too, the crash was not the config's fault, and the config marked
bad deserves another try. When current is among the configs forgotten, its
first run is cleared too, so it gets a fresh trial and the startups before the
repair no longer count against it.

It needs the state-dir lock: stop the component first. Without
--component-version it looks in every component version's tracking dir and
refuses if more than one has the mark.`,
		Args: exactArgs("DIR", "UID/RV[/PAYLOADKEY]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir, o.key = args[0], args[1]
			return runForgetBad(stdout, o, d)
		},
	}
	cmd.Flags().StringVar(&o.componentVersion, "component-version", "", "the component version whose mark to remove (default: the one that has it)")
	return cmd
}

// runForgetBad removes the marks that match o.key, in exactly one component
// version, with checkpoint.Store.ForgetBad, and says what it removed on w.
func runForgetBad(w io.Writer, o forgetBadOptions, d deps) error {
	pattern, err := parseMarkPattern(o.key)
	if err != nil {
		return err
	}
	sd, err := checkStateDir(o.dir)
	if err != nil {
		return err
	}
	versions, err := sd.selectVersions(o.componentVersion)
	if err != nil {
		return err
	}
	opts := storeOptions{clock: d.clock, logger: d.logger, lockedHint: "stop it first: forget-bad writes and needs the lock"}
	// Take the lock before reading, so that what is read is what is
	// changed. The Store is opened as the version asked for, or the first
	// present, and reopened below if the mark is in another.
	openVersion := o.componentVersion
	if openVersion == "" && len(sd.versions) > 0 {
		openVersion = sd.versions[0]
	}
	store, err := sd.open(openVersion, opts)
	if err != nil {
		return err
	}
	defer func() { store.Close() }()

	snap, err := checkpoint.Inspect(sd.path)
	if err != nil {
		return err
	}
	type found struct {
		version string
		marks   checkpoint.BadMarks // the marks that match
	}
	var hits []found
	var present []string // "<key> (component version <v>)" of every mark, for the error
	for _, v := range versions {
		t, ok := snap.Version(v)
		if !ok {
			continue
		}
		if t.BadMarksErr != nil {
			return fmt.Errorf("component version %s: %w", v, t.BadMarksErr)
		}
		h := found{version: v, marks: checkpoint.BadMarks{}}
		for k, m := range t.BadMarks {
			if markMatches(k, pattern) {
				h.marks[k] = m
			}
			present = append(present, fmt.Sprintf("%s (component version %s)", k, v))
		}
		if len(h.marks) > 0 {
			hits = append(hits, h)
		}
	}
	switch len(hits) {
	case 0:
		slices.Sort(present)
		list := "there are no bad marks"
		if len(present) > 0 {
			list = "marks present: " + strings.Join(present, ", ")
		}
		return fmt.Errorf("no bad mark %s in %s (%s)", pattern, describeScope(sd, versions), list)
	case 1:
	default:
		var vs []string
		for _, h := range hits {
			vs = append(vs, h.version)
		}
		return &usageError{err: fmt.Errorf("bad mark %s exists for component versions %s: choose one with --component-version",
			pattern, strings.Join(vs, ", "))}
	}
	h := hits[0]
	if h.version != openVersion {
		// The Store's tracking dir is its component version's: reopen.
		if err := store.Close(); err != nil {
			return err
		}
		reopened, err := sd.open(h.version, opts)
		if err != nil {
			return err
		}
		store = reopened
	}
	forgotten, err := store.ForgetBad(pattern)
	if err != nil {
		return fmt.Errorf("component version %s: %w", h.version, err)
	}
	if len(forgotten) == 0 {
		return fmt.Errorf("component version %s: the bad mark %s was removed by someone else meanwhile", h.version, pattern)
	}
	for _, k := range forgotten {
		line := fmt.Sprintf("Forgot bad mark %s (component version %s)", k, h.version)
		if m, ok := h.marks[k]; ok {
			line += fmt.Sprintf(", marked %s: %s", formatTime(m.Time), m.Reason)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	// Say whether current got a fresh trial: read back what ForgetBad left.
	if before := snap.Current; before.Err == nil && !before.Pointer.FirstRun.IsZero() {
		if after, err := checkpoint.Inspect(sd.path); err == nil && after.Current.Err == nil && after.Current.Pointer.FirstRun.IsZero() {
			_, err := fmt.Fprintf(w, "Current (%s) gets a fresh trial: its first run (%s) was cleared, the startups before it no longer count\n",
				describePointer(before.Pointer, nil), formatTime(before.Pointer.FirstRun))
			return err
		}
	}
	return nil
}

func describeScope(sd stateDir, versions []string) string {
	if len(versions) == 1 {
		return fmt.Sprintf("%s (component version %s)", sd.trackingDir(versions[0]), versions[0])
	}
	return fmt.Sprintf("%s/%s/*", sd.path, trackingDir)
}
