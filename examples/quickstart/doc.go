// Command quickstart walks through the whole dynconfig lifecycle on one
// machine, with no cluster and no flags:
//
//	go run ./examples/quickstart
//
// It creates a temporary work dir holding a directory source (the stand-in
// for the API server: an assignment file and a folder of ConfigMaps) and a
// state dir, then runs a small kubelet-like component as real child
// processes under a supervisor that restarts the component whenever it
// exits, as systemd does with Restart=always. The component is this same
// program, re-executed with the DYNCONFIG_QUICKSTART_COMPONENT environment
// variable set to the work dir; it embeds dynconfig.Controller with the
// kubelet profile and the directory source, writes its ConfigOK condition to
// a file for the walk-through to print, and exits 1 right after Bootstrap
// when its config sets providerID to quickstart://crash-at-startup.
//
// The walk-through assigns, in turn, a good config (which passes its trial
// and becomes last-known-good), one that fails validation, one that crashes
// the component at startup, another good one (which is promoted after its
// trial), and finally the empty assignment. After each step it prints the
// ConfigOK condition, the config the component runs, the process starts and
// exits seen by the supervisor, and a view of the state dir.
//
// What it guarantees: each step waits, by polling, for the state it
// expects, and the program exits non-zero with the reason and the tail of
// the component's log when a step does not get there in time; the work dir
// is removed at the end and no child process outlives the program (a child
// also exits when its stdin, a pipe from the supervisor, is closed).
//
// The state-dir view is read with checkpoint.Inspect: every file verified
// (checksums, versions), nothing written, and without the state-dir lock,
// which the running component holds.
//
// What it does not do: it talks to no API server and patches no Node, and
// a state-dir view is a snapshot that the component may change right after.
// Promotion needs a full trial of uptime in one process, which the view
// cannot see: it shows the trial from current's first run. It needs a unix
// system (the state dir uses flock).
package main
