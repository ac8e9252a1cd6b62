package dynconfig

import (
	"github.com/dynconfig/dynconfig/status"
)

// readOnlyNote is appended to ConfigOK's message while the state dir is on
// a read-only mount (checkpoint.Store.ReadOnly): the component runs what the
// state dir holds, but records nothing.
const readOnlyNote = "; the state dir is on a read-only file system: running read-only, nothing is recorded (startups, bad marks, new configs) until it is writable and the component restarts"

// withReadOnly says in r that the state dir is read-only. Which config runs
// is decided as usual: a config on trial is not run (its crash restarts
// cannot be recorded), a new assignment cannot be checkpointed, so the
// component runs its last-known-good (or the local config), and the
// reasons of those decisions name EROFS.
func withReadOnly(r status.Report, readOnly bool) status.Report {
	if readOnly {
		r.Message += readOnlyNote
	}
	return r
}
