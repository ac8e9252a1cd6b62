// Package demo holds what the example components kubelet-like and
// kube-proxy-like share around a dynconfig Controller: the command skeleton
// (Main, NewCommand, Execute), their common command-line flags and the
// --feature-gates flag type, the local config layers those flags name, the
// ConfigOK reporters (log, status file, /configz) with the metrics
// registry, and the HTTP server of /healthz, /configz and /metrics. What
// differs between the two (config type, remote source, restart or reload,
// demo hooks) stays in each command.
//
// # What it guarantees
//
//   - Execute turns a command's error into exit code 1 and one last line
//     "NAME: error" on stderr, and success into exit code 0; Main exits
//     with that code, and SIGINT or SIGTERM cancel the command's context.
//   - Flags registered with NewCommand, AddLocalFlags and AddServingFlags
//     are listed in help in the order they were added.
//   - StatusFile replaces its file atomically with every report, so a
//     reader sees one whole report: the last one written.
//   - ReporterChain sends every report to each of its Reporters, in order,
//     whatever the earlier ones returned, and joins their errors;
//     NewReporting's chain is the log, then /configz, then the status file.
//   - /configz answers 503 until a config is set, then
//     {"KEY": <config>, "configOK": <last report or null>} with the config
//     first; /healthz answers "ok"; /metrics is the Prometheus exposition of
//     the gatherer. Methods other than GET are refused.
//   - Server.Shutdown is bounded by ShutdownTimeout even when the context
//     that started the component is already done.
//
// # What it does not do
//
// It is for the examples only (it is internal to them): the HTTP server has
// no authentication, errors name the examples' flags (--status-file,
// --address/--port, --node-name), and nothing here decides which config
// runs; that is the Controller's job.
package demo
