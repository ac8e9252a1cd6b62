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
//   - With Options.NodeAuthorization the API server authorizes as a
//     production cluster does (--authorization-mode=Node,RBAC, the
//     NodeRestriction admission plugin). UserConfig and NodeConfig mint
//     client certificates signed by the client CA the server trusts
//     (NodeConfig: CN=system:node:<name>, O=system:nodes, as a kubelet's);
//     ServiceAccountConfig gets a token from the TokenRequest API, and
//     PodTokenConfig one bound to a Pod, as its projected volume holds;
//     KubeConfigFor writes any of them as a kubeconfig for a process.
//   - ApplyManifests server-side applies YAML files as they are (so tests
//     exercise the checked-in manifests themselves), ApplyKustomization a
//     kustomize build of a directory as `kubectl apply -k` would; an error
//     names the file (or directory) and the document.
//   - With Options.ControlPlane the upstream kube-controller-manager and
//     kube-scheduler run too (bin/, built by ensure-bins.sh from the same
//     k8s.io/kubernetes as the kubelet), with the flags kubeadm's static
//     Pods give them: every default controller plus bootstrapsigner and
//     tokencleaner, each on its own ServiceAccount's credentials
//     (--use-service-account-credentials), the API server's ServiceAccount
//     signing key and CA, leader election. StartWithOptions returns once
//     both answer /healthz on their secure ports and hold their Leases. A
//     component that exits is restarted (after 1s, same flags and port), as
//     the kubelet restarts a kubeadm cluster's static Pods: both exit when
//     they lose their Lease, which an API server down for more than their
//     10s renew deadline (StopAPIServer, a slow RestartAPIServer) makes
//     them do. Each restart is in the test log.
//   - HeartbeatNode plays, for a Node no kubelet runs, what the control
//     plane reads of a kubelet: the well-known labels, a Ready status with
//     room for pods, and the Node's Lease renewed every 10s until the test
//     ends. The scheduler then binds to the Node and the node lifecycle
//     controller leaves it Ready; pods on it get no status from anyone.
//   - Everything started is stopped, and its files removed, when the test
//     ends; the tail of the API server's and etcd's logs is added to the test
//     log when the test failed.
//
// What it does not do:
//   - Without Options.ControlPlane no controllers run (no controller
//     manager, no scheduler): objects are stored and served, but nothing
//     acts on them; namespaces are not garbage-collected, pods are never
//     scheduled. No kubelet runs in any case (test/integration starts
//     bin/hollow-kubelet, test/realnode the real one).
//   - The controller manager's CSR signer signs with a CA of its own, not
//     the client CA the API server trusts (envtest keeps that CA's key in
//     memory): certificates it issues do not authenticate to the API
//     server. There is no front proxy (--requestheader-client-ca-file).
//   - The ServiceAccount admission plugin is disabled (envtest's default), and
//     authorization is RBAC only unless NodeAuthorization is set, so a
//     non-admin user gets only what RBAC objects the test creates grant it
//     (and, with NodeAuthorization, what the Node authorizer gives nodes).
//   - ApplyManifests does not wait for what it applied to take effect:
//     RBAC objects and admission policies are enforced once the API
//     server's informers see them, a moment later.
//   - It is not meant for parallel use of one Cluster by tests that stop the
//     API server: stopping it affects every client of that Cluster.
package cluster
