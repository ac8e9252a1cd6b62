package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dynconfig/dynconfig/lkg"
)

// forgetBadOptions are the arguments of forget-bad.
type forgetBadOptions struct {
	dir              string
	key              string // UID/RV
	componentVersion string // "" = the one version that has the mark
}

func newForgetBadCommand(stdout io.Writer, d deps) *cobra.Command {
	var o forgetBadOptions
	cmd := &cobra.Command{
		Use:   "forget-bad DIR UID/RV",
		Short: "Remove a bad mark, so that the component tries that config again",
		Long: `forget-bad removes the bad mark of the config UID/RV (the ConfigMap's UID
and resourceVersion, as inspect shows them). It is the repair step after a dead
end: when the last-known-good config crash-looped too, the crash was not the
config's fault, and the config marked bad deserves another try.

It needs the state-dir lock: stop the component first. Without
--component-version it looks in every component version's tracking dir and
refuses if more than one has the mark.`,
		Args: exactArgs("DIR", "UID/RV"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir, o.key = args[0], args[1]
			return runForgetBad(stdout, o, d)
		},
	}
	cmd.Flags().StringVar(&o.componentVersion, "component-version", "", "the component version whose mark to remove (default: the one that has it)")
	return cmd
}

// runForgetBad removes exactly one bad mark and says which on w.
func runForgetBad(w io.Writer, o forgetBadOptions, d deps) error {
	key, err := parseMarkKey(o.key)
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
	store, err := sd.open(o.componentVersion, storeOptions{
		clock: d.clock, logger: d.logger, lockedHint: "stop it first: forget-bad writes and needs the lock",
	})
	if err != nil {
		return err
	}
	defer store.Close()

	type found struct {
		version string
		tracker *lkg.Tracker
		entry   lkg.Entry
	}
	var hits []found
	var present []string // "<version>: <key>" of every mark, for the error
	for _, v := range versions {
		tr, err := lkg.NewTracker(lkg.TrackerOptions{Dir: sd.trackingDir(v), Clock: d.clock})
		if err != nil {
			return err
		}
		entries, err := tr.Entries()
		if err != nil {
			return fmt.Errorf("component version %s: %w", v, err)
		}
		if e, ok := entries[key.String()]; ok {
			hits = append(hits, found{version: v, tracker: tr, entry: e})
		}
		for k := range entries {
			present = append(present, fmt.Sprintf("%s (component version %s)", k, v))
		}
	}
	switch len(hits) {
	case 0:
		slices.Sort(present)
		list := "there are no bad marks"
		if len(present) > 0 {
			list = "marks present: " + strings.Join(present, ", ")
		}
		return fmt.Errorf("no bad mark %s in %s (%s)", key, describeScope(sd, versions), list)
	case 1:
	default:
		var vs []string
		for _, h := range hits {
			vs = append(vs, h.version)
		}
		return &usageError{err: fmt.Errorf("bad mark %s exists for component versions %s: choose one with --component-version",
			key, strings.Join(vs, ", "))}
	}
	h := hits[0]
	if err := h.tracker.Forget(key.String()); err != nil {
		return fmt.Errorf("component version %s: forget bad mark %s: %w", h.version, key, err)
	}
	_, err = fmt.Fprintf(w, "Forgot bad mark %s (component version %s), marked %s: %s\n",
		key, h.version, formatTime(h.entry.Time), h.entry.Reason)
	return err
}

func describeScope(sd stateDir, versions []string) string {
	if len(versions) == 1 {
		return fmt.Sprintf("%s (component version %s)", sd.trackingDir(versions[0]), versions[0])
	}
	return fmt.Sprintf("%s/%s/*", sd.path, trackingDir)
}
