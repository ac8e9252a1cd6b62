// Command kubelet-like is a stand-in for a kubelet fork that takes its
// KubeletConfiguration from the cluster through dynconfig. It does no kubelet
// work: it "runs" by serving /healthz, /configz and /metrics, so that the
// config lifecycle (checkpoint, trial, last-known-good, rollback, ConfigOK)
// can be watched from outside with real process restarts.
//
//	kubelet-like --dynamic-config-dir=/var/lib/kubelet-like/dynamic-config \
//	    --config=/etc/kubelet-like/config.yaml --kubeconfig=/etc/kubelet-like/kubeconfig
//
// # Where the config comes from
//
// The local config is the kubelet's layering: built-in defaults < --config
// (the init file) < --config-dir drop-ins (*.conf, lexical order, JSON merge
// patch) < --instance-config (strategic merge patch, same apiVersion and
// kind) < flags. The config flags --max-pods, --kube-api-qps and
// --feature-gates (merged by key, as the kubelet does) win over every layer,
// the remote config included. A remote config, when one is assigned,
// replaces the init file; the other layers still apply over it.
//
// The assignment comes from one of:
//
//   - --kubeconfig: the API server. The Node named --node-name (default: the
//     host name, lowercased) carries the assignment in its
//     dynconfig.io/config-source annotation (or legacy spec.configSource); the
//     ConfigOK condition is patched onto the Node's status and config changes
//     and rollbacks are recorded as Events.
//   - --source-dir: a directory source (assignment.yaml and configmaps/, see
//     package source), for machines without a cluster and for tests.
//   - neither, or --disable-remote-config: the local config only (and the
//     state dir's current and last-known-good pointers are reset to local).
//
// # What it guarantees
//
//   - An invalid local config (any layer, flags included) stops it before it
//     serves anything: exit code 1 and, last on stderr, an error starting
//     with "kubelet-like: " that names the file (or flag) and the field
//     path. It is not counted as a startup. A wrong command line (unknown
//     flag, bad value, an argument, missing --dynamic-config-dir) exits 2.
//   - A new assignment is checkpointed and made current, then the process
//     exits 0 so that its process manager (systemd with Restart=always, or
//     the tests' restart loop) starts it again on the new config. SIGTERM and
//     SIGINT also end it with exit code 0.
//   - When it serves, it prints one line "serving on HOST:PORT" to stdout
//     (with --port=0 the port is the one the kernel chose), and /configz
//     returns {"kubeletconfig": <the config in use>, "configOK": <the last
//     ConfigOK report>} as JSON.
//   - --status-file, when set, is replaced atomically with every ConfigOK
//     report, as JSON {"status", "reason", "message", "pid"}: a reader never
//     sees half a report. The report is also logged through klog.
//
// # Demo hooks
//
// Two hooks make crash loops demonstrable; a real component has neither.
// Both make the process exit 1 right after Bootstrap, that is after the
// startup was recorded and the ConfigOK condition reported:
//
//   - the config in use has providerID demo://crash-at-startup (any
//     providerID passes validation, so only the config's trial can reveal
//     it; the kubelet, like the profile, rejects feature gates it does not
//     know, so a made-up gate cannot serve);
//   - the environment variable DYNCONFIG_DEMO_CRASH is "1", whatever the
//     config: a crash that is not the config's fault, which after a rollback
//     ends in the "dead end:" condition.
//
// # What it does not do
//
// It is a thin user of package app, which gives it its flags (logging
// through component-base: --v, --vmodule, --logging-format), --version, the
// exit codes and the endpoints; its component name is "kubelet", so it
// keeps ConfigOK, dynconfig.io/config-source and the ConfigStatus in
// dynconfig.io/config-status. It runs no pods and has no kubelet API beyond
// the three endpoints; its
// HTTP server has no authentication, so keep --address on loopback. It
// needs a unix system (the state dir is locked with flock).
package main
