package dynconfig_test

import (
	"context"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// Example embeds the Controller in a kubelet-like component (the README's
// example, kept compiling here). It is not run: it needs a cluster.
func Example() {
	ctx := context.Background()
	var client kubernetes.Interface // from clientcmd and --kubeconfig
	node, version := "node-1", "v1.37.0"

	pipeline, _ := kubelet.NewPipeline(merge.Options{})
	layers, _ := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{
		InitFile:     "/etc/kubernetes/kubelet.yaml",
		DropInDir:    "/etc/kubernetes/kubelet.conf.d",
		InstanceFile: "/etc/kubernetes/kubelet-instance.yaml",
	})
	remote, _ := source.NewNode(source.NodeOptions{Client: client, NodeName: node, PayloadKey: "kubelet"})
	reporter, _ := status.NewNodeReporter(status.NodeReporterOptions{Client: client, NodeName: node})
	c, err := dynconfig.New(dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Profile: kubelet.Profile{}, Layers: layers,
		StateDir: "/var/lib/kubelet/dynamic-config", ComponentVersion: version,
		Remote: remote, Reporter: reporter,
	})
	if err != nil {
		klog.Fatal(err)
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx) // lock, local config, startup, decide, report ConfigOK
	if err != nil {
		klog.ErrorS(err, "Invalid local config: nothing to fall back to")
		os.Exit(1)
	}
	go runComponent(cfg)
	_ = c.Run(ctx) // follow the assignment; exits 0 to restart on a new config
}

func runComponent(*kubeletv1beta1.KubeletConfiguration) {}
