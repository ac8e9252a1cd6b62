// Package integration holds the tests that run against a real kube-apiserver
// and etcd started by package cluster. Build the binaries first with
// test/hack/ensure-bins.sh; the tests fail, saying so, when they are missing.
//
// The smoke test proves what the library relies on from the API server (the
// Node status subresource, strategic merge of conditions by type, objects
// kept across an API server restart). The Controller tests run the library
// as a component would — kubelet profile, the Node annotation as the
// assignment, the Node status and Event reporters — each scenario with its
// own Node and state dir, and read the ConfigOK condition back from the
// Node's status with a real client. A process start is a new Controller over
// the same state dir and its Bootstrap; the Restart hook only records the
// call, so a restart is observable. They cover: the empty, invalid and
// correct assignments at startup; invalid assignments while running (only
// the condition changes); decode and validation failures rolling back to a
// last-known-good config promoted by a short trial, and the recovery; an
// in-place ConfigMap edit; a ConfigMap deleted and recreated; the API server
// down during Bootstrap; 100 successive assignments without goroutine or
// checkpoint leaks; the ConfigChanged and ConfigRolledBack Events.
// TestKubeletLikeAgainstAPIServer runs the real examples/kubelet-like binary
// under a restart loop against the API server: a crash-looping config runs at
// its adopting start and exactly threshold crash restarts, and the next start
// rolls back; then a dead end.
//
// TestLeastPrivilege and TestComponentsShareANode run the API server with
// Node,RBAC authorization and the NodeRestriction admission plugin, apply
// the deploy/ manifests from their files, and run the components on
// least-privilege identities: a kubelet-like one on the Node's client
// certificate (system:node:<name>), a kube-proxy-like one on its
// ServiceAccount's Pod-bound token, and dynconfigctl (the real binary) on
// an operator's certificate. They show that each identity can do its job,
// that reads outside the config namespace are forbidden, that the
// admission policies stop a node (and any nodes/status write) from
// changing an assignment and a ServiceAccount from writing another Node's
// status, and that the two example binaries on one Node, each with its own
// ConfigMap, roll back independently and keep both conditions and both
// ConfigStatus annotations.
//
// TestAdmissionNodeStatusWriters derives from the API server's RBAC every
// subject that may write nodes/status (the bootstrap controllers, cluster-
// admin's group, deploy/'s component, and a node-problem-detector, a
// node-feature-discovery master, node admins and a cluster-admin
// ServiceAccount bound by the test), confirms each with a
// SubjectAccessReview, and impersonates each in a dry-run status PATCH:
// deploy/'s policies let all through but dynconfig's own components, which
// write their Pod's Node only.
//
// TestHollowKubeletFork runs the real kubelet code on dynconfig
// (bin/hollow-kubelet: kubemark's HollowKubelet whose KubeletConfiguration a
// Controller chooses with the kubelet's own defaulting, validation and
// conversion, package kubeletfork) under a restart loop on one Node: the
// kubelet registers its Node Ready on the local config; maxPods 150 assigned
// restarts it once, the capacity becomes 150 and the config is promoted;
// ConfigOK and the ConfigStatus annotation survive the kubelet's own status
// updates (every version of the Node is watched); a config the kubelet's
// ValidateKubeletConfiguration rejects is refused without a restart; a config
// the kubelet exits on is rolled back after threshold+1 crashed starts and
// the Node is Ready again. $HOLLOW_KUBELET_LOGS=DIR keeps each process's log.
//
// TestControlPlaneSmoke, TestAttachDetachWithDeployApplied and
// TestRolloutKeepsPodDisruptionBudgets run the full upstream control
// plane (cluster.Options.ControlPlane:
// kube-controller-manager as kubeadm runs it, on ServiceAccount
// credentials, and kube-scheduler). The first shows a Deployment getting a
// ReplicaSet and Pods that the scheduler binds to a hollow kubelet's Node
// and that kubelet runs, and the disruption controller computing a
// PodDisruptionBudget's status. The second applies deploy/ (kustomize, as
// `kubectl apply -k deploy/`) under Node,RBAC authorization: a CSIDriver
// that requires attachment, a PersistentVolume bound to its claim by the
// PV controller, a Pod scheduled onto a Node; the test plays the external
// attacher (marks the VolumeAttachment attached) and the Node's
// status.volumesAttached must be written by kube-controller-manager's
// attach-detach controller, a nodes/status PATCH by a ServiceAccount that
// deploy/'s own-node admission policy must let through. The third rolls
// a config over two hollow kubelets carrying a Deployment under a
// PodDisruptionBudget and watches the budget's status: never below its
// minimum while the rollout respects budgets, below it with Ignore.
// TestRolloutHoldsNodesForPodDisruptionBudgets runs in it too, over
// simulated Nodes kept alive by cluster.HeartbeatNode: a Deployment's pods
// bound by the scheduler, the budget's status from the disruption
// controller, only the pods' readiness written by the test (test/README.md,
// "Hand-set status, audited", lists what every test still writes by hand).
//
// TestScale is a benchmark run only when DYNCONFIG_SCALE=N is set: N
// Controllers in one process, one reassignment of all their Nodes, with
// latency percentiles, API requests per node (asserted against a budget of
// 4 per change) and memory per Controller.
//
// What these tests do not prove: they use the real clock for trials (short
// ones) and deadlines, so they show that things happen, never how fast
// (TestScale measures latency and asserts only the request budget); except
// in the control-plane tests the API server runs without controllers,
// so nothing else writes the Nodes.
// They are not run by the root module's `go test ./...`.
package integration
