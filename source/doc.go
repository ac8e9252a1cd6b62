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
// Remote implementations read the assignment: Dir (a folder of ConfigMap
// files, each named after its ConfigMap, and an assignment file, all
// decoded strictly; for nodes without an API server and for the
// quickstart), and the API-server sources. Each resolves the assignment
// to the ConfigMap object to checkpoint, and Run calls back when it may have
// changed.
//
// The API-server sources are NodeSource and FixedSource. NodeSource reads
// the Node annotation dynconfig.io/config-source (a strictly decoded JSON
// NodeConfigSource; a blank or "null" value is the empty assignment), else
// the legacy spec.configSource that API servers before 1.24 still serve, else
// the empty assignment. FixedSource always assigns one named ConfigMap at its
// current UID, for DaemonSet components. While Run runs, each keeps
// client-go informers restricted by field selector to this Node and to the
// one ConfigMap assigned (the ConfigMap watch moves with the assignment);
// Assigned answers from their caches once synced and reads from the API
// server otherwise, and whenever the cached copy does not resolve, so an
// invalid verdict never comes from a stale cache alone. A ConfigMap the
// assignment names but the server does not have is an *InvalidError; any
// other failure to read is a plain error (the desired config is unclear).
// Watch errors and API server restarts are retried by the informers and
// never end Run; Run returns only when its context ends, after every
// informer it started has stopped. The caches are eventually consistent, so
// a change may be reported late (after a relist) and changed may be called
// when nothing changed; the jittered resync calls changed regardless, so a
// read that failed is retried without any event.
//
// What this package does not do: it does not checkpoint, decide or report.
package source
