// Command node-greeter is a third-party component on package app: a config
// type of its own (NodeGreeterConfiguration, greeter.example.com/v1alpha1,
// in config.go with its Profile's defaults and validation) and a main of
// about 50 lines (main.go): the profile, one config flag, a Run that greets
// the node at the configured interval, and a Reload that swaps the config
// in process. Everything else (flags, logging, --version, exit codes,
// /healthz, /configz, /metrics, the Controller's wiring) is package app's.
//
//	node-greeter --dynamic-config-dir=/var/lib/node-greeter --kubeconfig=/etc/node-greeter/kubeconfig
//
// Its dynconfig component name is "node-greeter", so on its Node it has
// its own assignment annotation (dynconfig.io/config-source.node-greeter),
// its own condition (NodeGreeterConfigOK), its own ConfigStatus annotation
// (dynconfig.io/config-status.node-greeter) and its own Events' source,
// next to a kubelet's, which it never reads or writes. The ConfigMap's key
// is "greeter.yaml".
//
// # What it guarantees
//
// What package app guarantees: exit code 0 on SIGTERM or SIGINT, 1 on an
// invalid local config or a failure, 2 on a wrong command line; one line
// "serving on HOST:PORT" on stdout once it serves; a new config is applied
// in process, and a bad one rolls back to the last-known-good config.
//
// # What it does not do
//
// It greets in its log only. Its HTTP server has no authentication, so
// keep --address on loopback.
package main
