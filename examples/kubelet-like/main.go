package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynconfig/dynconfig/examples/internal/demo"
	"github.com/dynconfig/dynconfig/merge"
)

// componentVersion names the state dir's tracking dir: bad marks and
// startups recorded by another version of this program are not trusted.
const componentVersion = "kubelet-like-v1"

// main runs the command and exits with its code (demo.Execute): 0 when it
// stopped on a signal or to restart onto a new config, 1 on any error,
// which is written to stderr as one line.
func main() {
	demo.Main(newCommand)
}

// options are the command's flags that are not config fields.
type options struct {
	demo.Flags
}

// configFlagBindings maps the flags that set KubeletConfiguration fields to
// their field paths. Only flags set on the command line apply, on top of
// every layer.
func configFlagBindings() map[string]merge.FlagBinding {
	return map[string]merge.FlagBinding{
		"max-pods":      {Path: "maxPods"},
		"kube-api-qps":  {Path: "kubeAPIQPS"},
		"feature-gates": {Path: "featureGates", Merge: true},
	}
}

// newCommand builds the cobra command. Each call has its own flag set, so
// tests can run it several times in one process.
func newCommand() *cobra.Command {
	o := &options{}
	cmd := demo.NewCommand("kubelet-like",
		"A kubelet stand-in that takes its KubeletConfiguration from the cluster through dynconfig",
		"kubelet-like serves /healthz, /configz and /metrics with the KubeletConfiguration chosen by\n"+
			"dynconfig from its local layers and the config assigned to its node, and exits 0 to be\n"+
			"restarted when a new config is assigned.",
		func(ctx context.Context, fs *pflag.FlagSet, stdout io.Writer) error { return run(ctx, o, fs, stdout) })
	fs := cmd.Flags()
	o.AddLocalFlags(fs, "KubeletConfiguration", "An instance-specific KubeletConfiguration applied over the base and drop-ins as a strategic merge patch.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "A kubeconfig file: read the assignment from the Node and report ConfigOK on it.")
	fs.StringVar(&o.NodeName, "node-name", "", "The Node this process runs as. Default: the host name, lowercased.")
	fs.BoolVar(&o.DisableRemote, "disable-remote-config", false, "Ignore any assignment and run the local config (resets current and last-known-good to local).")
	o.AddServingFlags(fs, 10248)
	fs.Int32("max-pods", 0, "Config field maxPods; overrides every config layer when set.")
	fs.Int32("kube-api-qps", 0, "Config field kubeAPIQPS; overrides every config layer when set.")
	fs.Var(demo.FeatureGates{}, "feature-gates", "Config field featureGates, as A=true,B=false; merged by gate over every config layer when set.")
	_ = cmd.MarkFlagRequired("dynamic-config-dir")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "source-dir")
	demo.AddKlogFlags(fs)
	return cmd
}
