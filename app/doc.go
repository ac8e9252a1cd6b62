// Package app is the skeleton of a component binary that takes its config
// from dynconfig. NewCommand turns a Component (the config type's profile,
// the flags that set config fields, and what the component does with a
// config) into a cobra command that behaves like a Kubernetes component;
// Main runs it. A third-party component's main is its Profile and a Run:
//
//	func main() {
//		app.Main(app.NewCommand(app.Component[MyConfig]{
//			Name:    "my-agent",
//			Short:   "Does my thing with the config dynconfig chooses",
//			Profile: MyProfile{},
//			Run: func(ctx context.Context, cfg *MyConfig, env app.Env) error {
//				return doMyThing(ctx, cfg) // until ctx ends
//			},
//		}))
//	}
//
// (examples/node-greeter is a whole one.)
//
// # The command
//
//   - Flags, listed by section in --help: config (--config, --config-dir,
//     --instance-config, --dynamic-config-dir and the component's config
//     flags), feature gate (--feature-gates through component-base's
//     featuregate, or a config field with cliflag.MapStringBool, see
//     Component.FeatureGatesPath), remote config (--kubeconfig,
//     --node-name, --configmap, --source-dir, --source-poll-interval,
//     --confirm-within, --disable-remote-config), serving (--address, --port,
//     --status-file), logging (component-base's logs/api/v1: --v,
//     --vmodule, --logging-format, ...; none of klog's legacy underscore
//     flags), global (--help, --version).
//   - Where the remote config comes from: --source-dir, a directory
//     source; else --configmap, one ConfigMap for every node; else
//     --kubeconfig, the Node's assignment annotation for the component
//     (nodeapi.AssignmentAnnotationFor); else none, the local config only. With an
//     API server, the Controller (dynconfig.Options.Cluster) reports the
//     component's condition and ConfigStatus on its Node and records Events.
//   - Exit codes: ExitOK (0) when it stopped on SIGTERM or SIGINT, to
//     restart onto a new config, or for --help and --version; ExitError (1)
//     for a failure, written last on stderr as "NAME: error"; ExitUsage (2)
//     for a wrong command line (unknown flag, bad value, argument, missing
//     required flag, unknown feature gate, bad logging flag), written as
//     "NAME: error" and a line pointing to --help.
//
// # What it guarantees
//
//   - Order of a run: validate the command line; apply the logging flags;
//     build the Controller; Bootstrap; Component.Start; serve; then the
//     Controller's Run next to Component.Run until a signal, a restart, or
//     the end of Run. Nothing is served, and nothing but logs with
//     --log-text-split-stream (or its json twin) is printed to stdout,
//     before Start returned. Logs go to stderr.
//   - One line "serving on HOST:PORT" on stdout once the endpoints serve
//     (with --port=0, the port the kernel chose).
//   - /healthz answers "ok" (500 once Run failed); /configz is
//     component-base's configz: {"<ConfigzKey>": <the config in use>,
//     "configOK": <the last condition report>}; /metrics is a registry of
//     its own with the Go and process collectors and the Controller's
//     metrics, labelled component=<Component>. With
//     --metrics-auth=delegated they are served over HTTPS, /metrics and
//     /configz only to a bearer token the API server authenticates, of a
//     user it authorizes to get the path (DelegatedAuth); /healthz stays
//     open.
//   - Restart or reload: without Component.Reload, a new config ends the
//     command with exit code 0 (the process manager starts it again on
//     it); with Reload, it is applied in process and /configz serves it.
//   - Health: a config is confirmed healthy (dynconfig's MarkHealthy) when
//     the component's health gate (Component.Health) passes for it, run
//     after Start and once the endpoints serve, and again for each config
//     Reload applies; without a gate, as soon as it serves. A gate of an
//     older config that passes late confirms nothing. The gate can be the
//     component's own code (wait until it is ready on cfg) or a built-in:
//     Poll (a check retried), HTTPGet (an HTTP probe, 200-399 is healthy,
//     as the kubelet's httpGet probe; Env.Address names the endpoints the
//     command serves), AllOf. A config is promoted only once confirmed.
//   - --confirm-within D (dynconfig.Options.ConfirmWithin): a config not
//     confirmed within D after it first ran is marked bad and rolled back
//     by the node itself, with or without the API server; the clock
//     survives restarts and reboots (examples/kubelet-like shows it).
//   - --status-file is replaced atomically with every condition report.
//   - Each command built has its own flags; its /configz entries are
//     removed when it returns, so tests can run it several times in one
//     process (one at a time: configz is one registry per process).
//
// # What it does not do
//
// The HTTP server has no authentication or TLS: keep --address on
// loopback. Logging flags are applied to klog once per process; a caller
// that puts a logger in the context (tests with ktesting) keeps it, and the
// flags are only validated.
package app
