package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/merge"
)

// componentVersion names the state dir's tracking dir: bad marks and
// startups recorded by another version of this program are not trusted.
const componentVersion = "kube-proxy-like-v1"

// componentName is this component's dynconfig name: its condition on the
// Node is KubeProxyConfigOK and its assignment annotation
// dynconfig.io/config-source.kube-proxy.
const componentName = "kube-proxy"

// main runs the command and exits with its code (app.Execute): 0 when it
// stopped on a signal, 1 on any error, 2 on a wrong command line.
func main() {
	app.Main(newCommand())
}

// configFlags registers the flags that set KubeProxyConfiguration fields
// and returns their field paths. Only flags set on the command line apply,
// on top of every layer.
func configFlags(fs *pflag.FlagSet) map[string]merge.FlagBinding {
	fs.String("hostname-override", "", "Config field hostnameOverride; overrides every config layer when set.")
	fs.String("cluster-cidr", "", "Config field clusterCIDR; overrides every config layer when set.")
	return map[string]merge.FlagBinding{
		"hostname-override": {Path: "hostnameOverride"},
		"cluster-cidr":      {Path: "clusterCIDR"},
	}
}

// newCommand builds the cobra command. Each call has its own flag set.
func newCommand() *cobra.Command {
	return app.NewCommand(component())
}

// component describes kube-proxy-like to package app.
func component() app.Component[kubeproxyv1alpha1.KubeProxyConfiguration] {
	return app.Component[kubeproxyv1alpha1.KubeProxyConfiguration]{
		Name:      "kube-proxy-like",
		Component: componentName,
		Short:     "A kube-proxy stand-in that takes its KubeProxyConfiguration from a ConfigMap through dynconfig",
		Long: "kube-proxy-like serves /healthz, /configz and /metrics with the KubeProxyConfiguration chosen by\n" +
			"dynconfig from its local layers and a shared ConfigMap (--configmap) or its Node's assignment,\n" +
			"and applies a new config in process.",
		ComponentVersion: componentVersion,
		Profile:          kubeproxy.Profile{},
		ConfigzKey:       "kubeproxy.config.k8s.io",
		DefaultPort:      10249,
		ConfigFlags:      configFlags,
		FeatureGatesPath: "featureGates",
		Reload: func(ctx context.Context, cfg *kubeproxyv1alpha1.KubeProxyConfiguration) error {
			klog.FromContext(ctx).Info("Applying the config", "clusterCIDR", cfg.ClusterCIDR, "hostnameOverride", cfg.HostnameOverride)
			return nil
		},
	}
}
