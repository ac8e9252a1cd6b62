// Package sourcetest checks and fakes source.Remote implementations.
//
// RunRemoteConformance checks the documented contract of source.Remote
// against any implementation, given a Harness that builds the Remote and
// changes what it reads (ConfigMaps and the assignment). Every Remote in
// package source passes it, and so does Fake.
//
// Fake is an in-memory Remote for tests of code that consumes a Remote: it
// resolves assignments with the rules of package source (nodeapi.Validate
// and source.Resolve, so invalid assignments carry the same words), calls
// back on every change, and can be made to fail reads, as an unreachable
// API server does.
//
// What this package does not do: it does not check timing beyond bounded
// real-clock waits (a Remote that reports a change late but within the
// Harness timeout passes), and it cannot prove that two calls never overlap
// or that no call is missed, only that none did in the runs it made.
package sourcetest
