// Package integration holds the tests that run against a real kube-apiserver
// and etcd started by package cluster. Build the binaries first with
// test/hack/ensure-bins.sh; the tests fail, saying so, when they are missing.
//
// The tests prove what the library relies on from the API server (the Node
// status subresource, strategic merge of conditions by type, objects kept
// across an API server restart); they are not run by the root module's
// `go test ./...`.
package integration
