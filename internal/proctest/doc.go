// Package proctest runs the example components as real processes for their
// tests: it builds a component once per test binary, starts it in its own
// process group, restarts it whenever it exits (a small stand-in for
// systemd's Restart=always), and lays out the files of a simulated node
// (state dir, directory source, status file). The binaries are built by
// the package's TestMain (Main), before any test's clock starts. It is a
// normal package so that the components' tests and the test module's tests
// against a real API server share it; only tests import it.
//
// # What it guarantees
//
//   - Nothing a test starts outlives it: the test's cleanup stops the
//     restart loop and kills the process group of every process (on Linux
//     the kernel also kills a child whose test process died).
//   - Every wait is bounded by WaitTimeout and fails the test with what it
//     waited for and the tail of each process's stderr.
//   - Files written with WriteFile appear whole: they are written beside
//     the target as a dot-file (which the directory source skips) and
//     renamed.
//
// # What it does not do
//
// It needs a unix system and the go command on the PATH (go test puts it
// there). Builds are skipped under -short, which skips the real-process
// tests, and in a test binary run again by a test of its package. WaitFor
// polls; it is for processes, not for in-process code, which should use
// fake clocks instead.
package proctest
