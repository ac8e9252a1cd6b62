package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/merge"
)

// componentVersion names the state dir's tracking dir: bad marks and
// startups recorded by another version of this program are not trusted.
const componentVersion = "kube-proxy-like-v1"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the command with args and returns the process exit code: 0
// when it stopped on a signal, 1 on any error, which is written to stderr.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	klog.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "kube-proxy-like: %v\n", err)
		return 1
	}
	return 0
}

// options are the command's flags that are not config fields.
type options struct {
	configFile     string
	configDir      string
	instanceConfig string
	stateDir       string
	configMap      string
	kubeconfig     string
	nodeName       string
	disableRemote  bool
	sourceDir      string
	sourcePoll     time.Duration
	address        string
	port           int
	statusFile     string
}

// configFlagBindings maps the flags that set KubeProxyConfiguration fields
// to their field paths. Only flags set on the command line apply, on top of
// every layer.
func configFlagBindings() map[string]merge.FlagBinding {
	return map[string]merge.FlagBinding{
		"hostname-override": {Path: "hostnameOverride"},
		"cluster-cidr":      {Path: "clusterCIDR"},
		"feature-gates":     {Path: "featureGates", Merge: true},
	}
}

// newCommand builds the cobra command. Each call has its own flag set.
func newCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "kube-proxy-like",
		Short: "A kube-proxy stand-in that takes its KubeProxyConfiguration from a ConfigMap through dynconfig",
		Long: "kube-proxy-like serves /healthz, /configz and /metrics with the KubeProxyConfiguration chosen by\n" +
			"dynconfig from its local layers and a shared ConfigMap, and applies a new config in process.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.Flags(), cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.configFile, "config", "", "The init config file (a KubeProxyConfiguration). A remote config replaces it.")
	fs.StringVar(&o.configDir, "config-dir", "", "A directory of *.conf drop-ins applied over the base config in lexical order, as JSON merge patches.")
	fs.StringVar(&o.instanceConfig, "instance-config", "", "An instance-specific KubeProxyConfiguration (e.g. written from the downward API) applied as a strategic merge patch.")
	fs.StringVar(&o.stateDir, "dynamic-config-dir", "", "The state dir: checkpoints, current and last-known-good pointers, tracking files. Required.")
	fs.StringVar(&o.configMap, "configmap", "", "The shared config: ConfigMap NAMESPACE/NAME, key config.conf, read from the API server.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "A kubeconfig file for --configmap. Default: the in-cluster config.")
	fs.StringVar(&o.nodeName, "node-name", "", "The Node that Events are about. Default: the host name, lowercased.")
	fs.BoolVar(&o.disableRemote, "disable-remote-config", false, "Ignore the remote config and run the local config (resets current and last-known-good to local).")
	fs.StringVar(&o.sourceDir, "source-dir", "", "Read the assignment from a directory source (assignment.yaml and configmaps/) instead of the API server.")
	fs.DurationVar(&o.sourcePoll, "source-poll-interval", time.Second, "How often the directory source looks for changes.")
	fs.StringVar(&o.address, "address", "127.0.0.1", "The IP address to serve /healthz, /configz and /metrics on.")
	fs.IntVar(&o.port, "port", 10249, "The port to serve on; 0 picks a free one (the bound address is printed).")
	fs.StringVar(&o.statusFile, "status-file", "", "A file replaced atomically with every ConfigOK report, as JSON.")
	fs.String("hostname-override", "", "Config field hostnameOverride; overrides every config layer when set.")
	fs.String("cluster-cidr", "", "Config field clusterCIDR; overrides every config layer when set.")
	fs.Var(featureGates{}, "feature-gates", "Config field featureGates, as A=true,B=false; merged by gate over every config layer when set.")
	_ = cmd.MarkFlagRequired("dynamic-config-dir")
	cmd.MarkFlagsMutuallyExclusive("configmap", "source-dir")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "source-dir")

	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return cmd
}

// parseConfigMapRef splits --configmap NAMESPACE/NAME. The names themselves
// are validated by source.NewFixed.
func parseConfigMapRef(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--configmap %q: want NAMESPACE/NAME", s)
	}
	return namespace, name, nil
}

// featureGates is the value of --feature-gates: "A=true,B=false", which
// is also how String renders it (merge.Pipeline.FlagOverrides parses that
// form for map fields).
type featureGates map[string]bool

// String renders the gates as "A=true,B=false", sorted by name.
func (g featureGates) String() string {
	kv := make([]string, 0, len(g))
	for k, v := range g {
		kv = append(kv, k+"="+strconv.FormatBool(v))
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// Set adds the gates of s; it may be given several times.
func (g featureGates) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not NAME=true or NAME=false", item)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("gate %s: %q is not a boolean", k, v)
		}
		g[k] = b
	}
	return nil
}

// Type names the value in help text.
func (featureGates) Type() string { return "mapStringBool" }

var _ pflag.Value = featureGates{}
