// Package source tells which config a node should run and where its local
// config comes from.
//
// An assignment is a corev1.NodeConfigSource. It is empty (nil: run the
// local config), correct, or invalid, by the Dynamic Kubelet Configuration
// rules: exactly one subfield must be set; the ConfigMap reference's uid,
// namespace and name must be non-empty (Validate); the uid and the
// namespace/name must refer to the same ConfigMap, which must exist and
// hold the payload key (Resolve). Invalid assignments are *InvalidError
// values whose message is the cause the ConfigOK condition reports.
//
// Remote implementations read the assignment: Dir (a folder of YAML
// ConfigMaps and an assignment file, for nodes without an API server and for
// the quickstart), and the API-server sources. Each resolves the assignment
// to the ConfigMap object to checkpoint, and Run calls back when it may have
// changed.
//
// What this package does not do: it does not checkpoint, decide or report.
package source
