package dynconfig_test

import (
	"context"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
)

// Example embeds the Controller in a kubelet-like component (the README's
// example, kept compiling here). It is not run: it needs a cluster.
func Example() {
	if err := embed(context.Background()); err != nil {
		klog.ErrorS(err, "Component failed")
		os.Exit(1)
	}
}

// embed is the README's snippet: every error is handled.
func embed(ctx context.Context) error {
	var client kubernetes.Interface // from clientcmd and --kubeconfig
	node, version := "node-1", "v1.37.0"

	c, err := dynconfig.New(dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Component: "kubelet",         // ConfigOK, dynconfig.io/config-source, dynconfig.io/config-status
		Profile:   kubelet.Profile{}, // the codec, defaults, validation and payload key, given once
		Local: dynconfig.LocalConfig{
			InitFile: "/etc/kubernetes/kubelet.yaml", DropInDir: "/etc/kubernetes/kubelet.conf.d",
			InstanceFile: "/etc/kubernetes/kubelet-instance.yaml",
		},
		StateDir: "/var/lib/kubelet/dynamic-config", ComponentVersion: version,
		Cluster:    &dynconfig.Cluster{Client: client, NodeName: node}, // assignment, condition, status, Events
		Registerer: prometheus.DefaultRegisterer,                       // metrics labelled component="kubelet"
	})
	if err != nil {
		return err // every option is checked, typed nils included
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx) // lock, local config, startup, decide, report ConfigOK
	if err != nil {
		return err // an invalid local config: nothing to fall back to
	}
	go runComponent(cfg) // the component itself; call c.MarkHealthy() once it is healthy
	return c.Run(ctx)    // follow the assignment; exit(0) to restart on a new config
}

func runComponent(*kubeletv1beta1.KubeletConfiguration) {}
