// Package cluster starts a real control plane — an etcd and a kube-apiserver
// built from Go modules by test/hack/ensure-bins.sh — for integration tests,
// through controller-runtime's envtest.
//
// What it guarantees:
//   - Start fails the test with the command to run when the binaries are
//     missing from the repository's bin/ directory; it never downloads
//     anything and ignores KUBEBUILDER_ASSETS and TEST_ASSET_* so a test
//     always runs the binaries this module pinned.
//   - Cluster.Config is an admin (system:masters) client config, and
//     Cluster.Client a clientset built from it.
//   - StopAPIServer and RestartAPIServer stop and start the API server alone:
//     etcd and its data stay, and the restarted server listens on the same
//     address with the same serving certificate and client CA, so Config and
//     Client keep working once it is back (RestartAPIServer returns only when
//     /readyz answers ok).
//   - Everything started is stopped, and its files removed, when the test
//     ends; the tail of the API server's and etcd's logs is added to the test
//     log when the test failed.
//
// What it does not do:
//   - No controllers run (no controller-manager, no scheduler, no kubelet):
//     objects are stored and served, but nothing acts on them; namespaces
//     are not garbage-collected, pods are never scheduled.
//   - The ServiceAccount admission plugin is disabled (envtest's default), and
//     authorization is RBAC only, so a non-admin user gets only what RBAC
//     objects the test creates grant it.
//   - It is not meant for parallel use of one Cluster by tests that stop the
//     API server: stopping it affects every client of that Cluster.
package cluster
