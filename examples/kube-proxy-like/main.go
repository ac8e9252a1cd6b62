package main

import (
	"context"
	"io"

	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynconfig/dynconfig/examples/internal/demo"
	"github.com/dynconfig/dynconfig/merge"
)

// componentVersion names the state dir's tracking dir: bad marks and
// startups recorded by another version of this program are not trusted.
const componentVersion = "kube-proxy-like-v1"

// main runs the command and exits with its code (demo.Execute): 0 when it
// stopped on a signal, 1 on any error, which is written to stderr.
func main() {
	demo.Main(newCommand)
}

// options are the command's flags that are not config fields.
type options struct {
	demo.Flags
	configMap string
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
	cmd := demo.NewCommand("kube-proxy-like",
		"A kube-proxy stand-in that takes its KubeProxyConfiguration from a ConfigMap through dynconfig",
		"kube-proxy-like serves /healthz, /configz and /metrics with the KubeProxyConfiguration chosen by\n"+
			"dynconfig from its local layers and a shared ConfigMap, and applies a new config in process.",
		func(ctx context.Context, fs *pflag.FlagSet, stdout io.Writer) error { return run(ctx, o, fs, stdout) })
	fs := cmd.Flags()
	o.AddLocalFlags(fs, "KubeProxyConfiguration", "An instance-specific KubeProxyConfiguration (e.g. written from the downward API) applied as a strategic merge patch.")
	fs.StringVar(&o.configMap, "configmap", "", "The shared config: ConfigMap NAMESPACE/NAME, key config.conf, read from the API server.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "A kubeconfig file for --configmap. Default: the in-cluster config.")
	fs.StringVar(&o.NodeName, "node-name", "", "The Node that Events are about. Default: the host name, lowercased.")
	fs.BoolVar(&o.DisableRemote, "disable-remote-config", false, "Ignore the remote config and run the local config (resets current and last-known-good to local).")
	o.AddServingFlags(fs, 10249)
	fs.String("hostname-override", "", "Config field hostnameOverride; overrides every config layer when set.")
	fs.String("cluster-cidr", "", "Config field clusterCIDR; overrides every config layer when set.")
	fs.Var(demo.FeatureGates{}, "feature-gates", "Config field featureGates, as A=true,B=false; merged by gate over every config layer when set.")
	_ = cmd.MarkFlagRequired("dynamic-config-dir")
	cmd.MarkFlagsMutuallyExclusive("configmap", "source-dir")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "source-dir")
	demo.AddKlogFlags(fs)
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
