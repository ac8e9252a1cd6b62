// Command kube-proxy-like is a stand-in for a kube-proxy-style DaemonSet
// that takes its KubeProxyConfiguration from one shared ConfigMap through
// dynconfig and applies a new config in process: it reloads, it does not
// restart. It does no proxying: it "runs" by serving /healthz, /configz and
// /metrics, so the config lifecycle can be watched from outside.
//
//	kube-proxy-like --dynamic-config-dir=/var/lib/kube-proxy-like/dynamic-config \
//	    --configmap=kube-system/kube-proxy --instance-config=/var/run/kube-proxy-like/instance.yaml
//
// # Where the config comes from
//
// Layers, lowest first: built-in defaults < --config (the init file; the
// remote config replaces it) < --config-dir drop-ins < --instance-config
// (strategic merge patch, same apiVersion and kind) < flags. The config
// flags --hostname-override, --cluster-cidr and --feature-gates (merged by
// key) win over every layer.
//
// The remote config is one of:
//
//   - --configmap NS/NAME: that ConfigMap (key "config.conf", as kubeadm's
//     kube-system/kube-proxy), whatever UID it has now, read with
//     --kubeconfig or, when that is empty, the in-cluster config of the
//     Pod's service account (which needs get, list and watch on that
//     ConfigMap, and create on Events). Every node runs the same config: an
//     edit of the ConfigMap is a new resourceVersion, tried and promoted on
//     its own, and a bad edit rolls back to the last-known-good version.
//   - --kubeconfig alone: the ConfigMap its Node assigns to the component
//     "kube-proxy", in the annotation dynconfig.io/config-source.kube-proxy
//     (the kubelet's dynconfig.io/config-source is never read), so that a
//     rollout can move nodes one at a time.
//   - --source-dir: a directory source (assignment.yaml and configmaps/, see
//     package source), for machines without a cluster and for tests.
//   - none of these, or --disable-remote-config: the local config only.
//
// # Instance config from the downward API
//
// What differs per node (the host name, the Pod IP to bind to) is not in
// the shared ConfigMap: it comes from --instance-config, a
// KubeProxyConfiguration fragment that an initContainer writes from the
// downward API before the main container starts:
//
//	initContainers:
//	- name: instance-config
//	  image: busybox
//	  env:
//	  - name: NODE_NAME
//	    valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
//	  - name: POD_IP
//	    valueFrom: {fieldRef: {fieldPath: status.podIP}}
//	  command: ["sh", "-c", "printf 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: %s\nbindAddress: %s\n' \"$NODE_NAME\" \"$POD_IP\" > /instance/instance.yaml"]
//	  volumeMounts: [{name: instance, mountPath: /instance}]
//	containers:
//	- name: kube-proxy-like
//	  args: ["--instance-config=/instance/instance.yaml", "--configmap=kube-system/kube-proxy",
//	         "--dynamic-config-dir=/var/lib/kube-proxy-like", "--node-name=$(NODE_NAME)"]
//	  env:
//	  - name: NODE_NAME
//	    valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
//	  volumeMounts: [{name: instance, mountPath: /instance}, {name: state, mountPath: /var/lib/kube-proxy-like}]
//	volumes:
//	- {name: instance, emptyDir: {}}
//	- {name: state, hostPath: {path: /var/lib/kube-proxy-like, type: DirectoryOrCreate}}
//
// The state dir is a hostPath so that checkpoints, the last-known-good
// pointer and the startups of the crash-loop detector survive the Pod.
//
// # What it guarantees
//
//   - An invalid local config (any layer, flags included) stops it before it
//     serves anything: exit code 1 and, last on stderr, an error starting
//     with "kube-proxy-like: " that names the file (or flag) and the field
//     path. A wrong command line (unknown flag, bad value, missing
//     --dynamic-config-dir, --configmap not NAMESPACE/NAME) exits 2.
//   - A new config is applied in process: the same process re-runs the
//     startup decision (decode, validate, roll back to last-known-good if
//     the new config is bad) and /configz serves the result; the PID does
//     not change. SIGTERM and SIGINT end it with exit code 0.
//   - When it serves, it prints one line "serving on HOST:PORT" to stdout,
//     and /configz returns {"kubeproxy.config.k8s.io": <the config in use>,
//     "configOK": <the last ConfigOK report>} as JSON.
//   - --status-file, when set, is replaced atomically with every ConfigOK
//     report, as JSON {"status", "reason", "message", "pid"}.
//
// # What it does not do
//
// It is a thin user of package app, which gives it its flags (logging
// through component-base: --v, --vmodule, --logging-format), --version, the
// exit codes and the endpoints. With an API server it reports its own
// condition on the Node, KubeProxyConfigOK
// (nodeapi.ConditionTypeFor("kube-proxy")), and its ConfigStatus in the
// annotation dynconfig.io/config-status.kube-proxy, next to the kubelet's
// ConfigOK, which it never touches; the condition is also in its log, its
// status file, /configz and /metrics (label component="kube-proxy"), and
// config changes and rollbacks are Node Events from "kube-proxy". It programs no rules, and its HTTP server has no
// authentication, so keep --address on loopback. It needs a unix system
// (the state dir is locked with flock).
package main
