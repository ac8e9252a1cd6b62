// Package versionmatrix runs versions N-2, N-1 and N of dynconfig against
// each other on a real API server: the node agent (examples/kubelet-like)
// of every version under the rollout controller (cmd/dynconfig-rollout) of
// every version, and the state dir handed from each version to the others.
// N is the working tree; N-1 and N-2 are the commits test/versions.txt
// names, built from git history by TestMain before any test starts a
// clock (a shallow clone fetches them from origin, or the tests fail in CI
// saying why). The skew rule these tests hold the versions to is in
// package nodeapi's documentation (the node<->fleet contract) and package
// checkpoint's (the state dir). test/README.md says how to run them and
// what they cost.
package versionmatrix
