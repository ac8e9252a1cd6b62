package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// resetOptions are the arguments of reset.
type resetOptions struct {
	dir              string
	componentVersion string // only picks the tracking dir checkpoint.Open is given
}

func newResetCommand(stdout io.Writer, d deps) *cobra.Command {
	var o resetOptions
	cmd := &cobra.Command{
		Use:   "reset DIR",
		Short: "Point current and last-known-good at the local config",
		Long: `reset points the current and the last-known-good pointers at the local
config, as an empty assignment does, with no first run. Checkpoints and bad
marks stay; the component garbage-collects checkpoints that no pointer
references. A pointer file that cannot be read or trusted (garbage, empty,
missing, a FIFO) is moved to the state dir's quarantine first, as evidence,
and reset says where.

It needs the state-dir lock: stop the component first. It does not change the
node's assignment: if a ConfigMap is still assigned, the component adopts it
again when it starts; clear it with 'dynconfigctl assign --clear'.`,
		Args: exactArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			return runReset(stdout, o, d)
		},
	}
	cmd.Flags().StringVar(&o.componentVersion, "component-version", "", "the component version to open the state dir as (default: the first present; reset does not depend on it)")
	return cmd
}

// runReset sets both pointers to local and says what they were on w.
// Current is reset first: a component that starts between the two writes
// finds current local, and resets last-known-good itself.
func runReset(w io.Writer, o resetOptions, d deps) error {
	sd, err := checkStateDir(o.dir)
	if err != nil {
		return err
	}
	if _, err := sd.selectVersions(o.componentVersion); err != nil {
		return err
	}
	store, err := sd.open(o.componentVersion, storeOptions{
		clock: d.clock, logger: d.logger, lockedHint: "stop it first: reset writes and needs the lock",
	})
	if err != nil {
		return err
	}
	defer store.Close()

	steps := []struct {
		name string
		get  func() (checkpoint.Pointer, error)
		set  func() error
	}{
		{"current", store.Current, func() error { return store.SetCurrent(nil) }},
		{"last-known-good", store.LastKnownGood, func() error { return store.SetLastKnownGood(nil) }},
	}
	for _, s := range steps {
		old, readErr := s.get()
		if err := s.set(); err != nil {
			return fmt.Errorf("reset %s in %s: %w", s.name, sd.path, err)
		}
		was := describePointer(old, readErr)
		if _, err := fmt.Fprintf(w, "%s: %s -> local\n", s.name, was); err != nil {
			return err
		}
	}
	return nil
}

// describePointer is a one-line summary of a pointer for reset's output.
func describePointer(p checkpoint.Pointer, err error) string {
	if err != nil {
		return fmt.Sprintf("unreadable (%v)", err)
	}
	r := newPointerReport(p, nil)
	s := "local"
	if !r.Local {
		s = fmt.Sprintf("ConfigMap %s/%s (UID: %s, resourceVersion: %s)", r.Namespace, r.Name, r.UID, orDash(r.ResourceVersion))
	}
	if r.SetTime != nil {
		s += ", set " + formatTime(*r.SetTime)
	}
	return s
}
