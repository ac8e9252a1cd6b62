package app

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version"

	"github.com/dynconfig/dynconfig/nodeapi"

	"k8s.io/apimachinery/pkg/types"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// options are the values of the flags every component command has.
type options struct {
	configFile     string
	configDir      string
	instanceConfig string
	stateDir       string

	kubeconfig    string
	nodeName      string
	configMap     string
	sourceDir     string
	sourcePoll    time.Duration
	disableRemote bool
	confirmWithin time.Duration

	address     string
	port        int
	statusFile  string
	metricsAuth MetricsAuthOptions

	// configGates holds --feature-gates when it is a config field; the
	// merge flag binding reads the flag, not this map.
	configGates map[string]bool
	logging     *logsapi.LoggingConfiguration
}

func newOptions(defaultPort int) *options {
	return &options{port: defaultPort, sourcePoll: time.Second, address: "127.0.0.1",
		logging: logsapi.NewLoggingConfiguration()}
}

// addConfigFlags registers the flags of the local config layers.
func (o *options) addConfigFlags(fs *pflag.FlagSet, kind string) {
	fs.StringVar(&o.configFile, "config", "", "The init config file (a "+kind+", YAML or JSON). A remote config replaces it; the other layers apply over either.")
	fs.StringVar(&o.configDir, "config-dir", "", "A directory of *.conf drop-ins applied over the base config in lexical order, as JSON merge patches.")
	fs.StringVar(&o.instanceConfig, "instance-config", "", "An instance-specific "+kind+" (e.g. written from the downward API) applied over the base and drop-ins as a strategic merge patch.")
	fs.StringVar(&o.stateDir, "dynamic-config-dir", "", "The state dir: checkpoints, current and last-known-good pointers, tracking files. Required; one process per dir.")
}

// addRemoteFlags registers the flags that say where the remote config comes
// from.
func (o *options) addRemoteFlags(fs *pflag.FlagSet, component string) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "A kubeconfig file for the API server. Alone, the Node named --node-name assigns the config in its "+
		nodeapi.AssignmentAnnotationFor(component)+" annotation; the component reports its condition and status on that Node and records Events.")
	fs.StringVar(&o.nodeName, "node-name", "", "The Node this process runs on. Default: the host name, lowercased.")
	fs.StringVar(&o.configMap, "configmap", "", "NAMESPACE/NAME of the one ConfigMap every node of this component runs, instead of the Node's assignment; read with --kubeconfig, or the in-cluster config when that is empty.")
	fs.StringVar(&o.sourceDir, "source-dir", "", "Read the assignment from a directory source (assignment.yaml and configmaps/) instead of the API server.")
	fs.DurationVar(&o.sourcePoll, "source-poll-interval", time.Second, "How often the directory source looks for changes.")
	fs.DurationVar(&o.confirmWithin, "confirm-within", 0, "Confirm or revert: a remote config not confirmed healthy within this time after it first ran (by the component's health gate, or once it serves) is marked bad and rolled back by the node itself, with or without the API server. The clock survives restarts and reboots. 0: no deadline.")
	fs.BoolVar(&o.disableRemote, "disable-remote-config", false, "Ignore any remote config and run the local config (resets current and last-known-good to local).")
}

// addServingFlags registers the flags of the HTTP endpoints and the status
// file.
func (o *options) addServingFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.address, "address", o.address, "The IP address to serve /healthz, /configz and /metrics on (without --metrics-auth=delegated, no authentication: keep it on loopback).")
	fs.IntVar(&o.port, "port", o.port, "The port to serve on; 0 picks a free one. The bound address is printed to stdout as \"serving on HOST:PORT\".")
	fs.StringVar(&o.statusFile, "status-file", "", "A file replaced atomically with every condition report, as JSON {status, reason, message, pid}.")
	o.metricsAuth.AddFlags(fs)
}

// validate checks the flag values that cobra does not: each error names
// its flag.
func (o *options) validate() error {
	var errs []error
	if o.configMap != "" {
		if _, err := parseConfigMapRef(o.configMap); err != nil {
			errs = append(errs, err)
		}
	}
	if o.sourcePoll <= 0 {
		errs = append(errs, fmt.Errorf("--source-poll-interval %v: must be positive", o.sourcePoll))
	}
	if o.confirmWithin < 0 {
		errs = append(errs, fmt.Errorf("--confirm-within %v: must not be negative", o.confirmWithin))
	}
	if o.port < 0 || o.port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: must be between 0 and 65535", o.port))
	}
	if err := o.metricsAuth.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parseConfigMapRef splits --configmap NAMESPACE/NAME. The names themselves
// are validated by the source.
func parseConfigMapRef(s string) (types.NamespacedName, error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--configmap %q: want NAMESPACE/NAME", s)
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// nodeName returns flag, the value of --node-name, or when it is empty the
// host name, lowercased.
func nodeName(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("--node-name not set and the host name is unknown: %w", err)
	}
	return strings.ToLower(host), nil
}

// unsetGitVersion is component-base's version when the binary was built
// without -ldflags.
const unsetGitVersion = "v0.0.0-master+$Format:%H$"

// unsetGitCommit is component-base's commit when the binary was built
// without -ldflags; the build info's vcs.revision replaces it.
const unsetGitCommit = "$Format:%H$"

// versionInfo returns component-base's version.Get() with its GitVersion
// replaced by v when set, else by the main module's version when the build
// recorded one, else "v0.0.0-dev" when -ldflags did not set it; and its
// GitCommit, when -ldflags did not set it, by the build's vcs.revision.
func versionInfo(v string) apimachineryversion.Info {
	info := version.Get()
	bi, ok := debug.ReadBuildInfo()
	switch {
	case v != "":
		info.GitVersion = v
	case ok && bi.Main.Version != "" && bi.Main.Version != "(devel)":
		info.GitVersion = bi.Main.Version
	case info.GitVersion == unsetGitVersion:
		info.GitVersion = "v0.0.0-dev"
	}
	if info.GitCommit == unsetGitCommit {
		info.GitCommit = ""
		if ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					info.GitCommit = s.Value
				}
			}
		}
	}
	return info
}

// versionFlag is --version: a bool flag to cobra (which prints the
// command's version template and stops when it is true) that also takes
// "raw", as component-base's verflag does, and then prints the whole
// version.Info.
type versionFlag struct {
	cmd  *cobra.Command
	info apimachineryversion.Info
	on   bool
}

// String implements pflag.Value.
func (v *versionFlag) String() string { return strconv.FormatBool(v.on) }

// Type is "bool", so that cobra reads the flag with GetBool.
func (v *versionFlag) Type() string { return "bool" }

// IsBoolFlag lets the flag stand alone.
func (v *versionFlag) IsBoolFlag() bool { return true }

// Set implements pflag.Value: true, false or raw.
func (v *versionFlag) Set(s string) error {
	if s == "raw" {
		v.on = true
		v.cmd.SetVersionTemplate(fmt.Sprintf("%#v\n", v.info))
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true, false or raw")
	}
	v.on = b
	return nil
}
