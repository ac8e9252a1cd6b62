// Package testenv decides what a test does when the machine it runs on
// lacks a real part the test needs: a tool on the PATH (strace, promtool,
// containerd, systemd), root, a kernel feature, a commit of the git
// history. Both modules' tests use it (the test module may import this
// internal package: its path is under github.com/dynconfig/dynconfig).
//
// # What it guarantees
//
//   - In CI (DYNCONFIG_CI=1, which .ci/run sets) a missing part fails the
//     test with what is missing and how to get it: green in CI means every
//     test ran.
//   - Elsewhere the test skips, and the skip is appended as one line to the
//     file DYNCONFIG_SKIP_LOG names (`make test` sets it and prints the list
//     at the end with the one command that installs every part), so that a
//     green run says what it did not cover.
//
// # What it does not do
//
// It is for missing parts only. A test that skips under -short, on another
// platform or for a deliberate reason (a child run of another test, an
// opt-in benchmark) calls t.Skip itself. The skip log is written with one
// O_APPEND write per line, so that test binaries running in parallel do not
// interleave lines; nothing else locks it.
package testenv
