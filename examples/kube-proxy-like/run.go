package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/examples/internal/demo"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// run is the component: it chooses its config with a dynconfig Controller,
// serves it, and follows the remote config until ctx ends, swapping the
// served config in process on every change.
func run(ctx context.Context, o *options, fs *pflag.FlagSet, stdout io.Writer) error {
	logger := klog.FromContext(ctx).WithName("kube-proxy-like")
	ctx = klog.NewContext(ctx, logger)
	profile := kubeproxy.Profile{}

	pipeline, err := kubeproxy.NewPipeline(merge.Options{Logger: logger})
	if err != nil {
		return err
	}
	layers, err := demo.LocalLayers(pipeline, &o.Flags, fs, configFlagBindings())
	if err != nil {
		return err
	}

	z := newConfigz()
	rep, err := demo.NewReporting(z, o.StatusFile)
	if err != nil {
		return err
	}
	opts := dynconfig.Options[kubeproxyv1alpha1.KubeProxyConfiguration]{
		Profile:             profile,
		Layers:              layers,
		StateDir:            o.StateDir,
		ComponentVersion:    componentVersion,
		DisableRemoteConfig: o.DisableRemote,
		Reporter:            rep.Reporters,
		Metrics:             rep.Metrics,
		Reload: func(ctx context.Context, cfg *kubeproxyv1alpha1.KubeProxyConfiguration) error {
			z.SetConfig(cfg)
			klog.FromContext(ctx).Info("Reloaded the config in process", "clusterCIDR", cfg.ClusterCIDR, "hostnameOverride", cfg.HostnameOverride)
			return nil
		},
	}
	switch {
	case o.configMap != "":
		remote, events, node, err := configMapSource(o, profile.PayloadKey())
		if err != nil {
			return err
		}
		opts.Remote, opts.Events = remote, events
		// Its own condition on the Node, next to the kubelet's ConfigOK.
		rep.Reporters = append(rep.Reporters, node)
		opts.Reporter = rep.Reporters
	case o.SourceDir != "":
		dir, err := source.NewDir(source.DirOptions{Path: o.SourceDir, PayloadKey: profile.PayloadKey(), PollInterval: o.SourcePoll})
		if err != nil {
			return fmt.Errorf("--source-dir: %w", err)
		}
		opts.Remote = dir
	case o.Kubeconfig != "":
		return errors.New("--kubeconfig needs --configmap")
	}

	c, err := dynconfig.New(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx)
	if err != nil {
		return err
	}
	z.SetConfig(cfg)

	srv, err := demo.Listen(o.Address, o.Port, demo.NewHandler(z, rep.Registry))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serving on %s\n", srv.Addr())
	logger.Info("Serving", "address", srv.Addr().String())

	runErr := c.Run(ctx)
	shutErr := srv.Shutdown(ctx)
	logger.Info("Stopped")
	return errors.Join(runErr, shutErr)
}

// newConfigz returns what /configz serves, under kube-proxy's own key.
func newConfigz() *demo.Configz[kubeproxyv1alpha1.KubeProxyConfiguration] {
	return demo.NewConfigz[kubeproxyv1alpha1.KubeProxyConfiguration]("kubeproxy.config.k8s.io")
}

// componentName is this component's name: its condition on the Node is
// status.ConditionTypeFor(componentName), KubeProxyConfigOK.
const componentName = "kube-proxy"

// configMapSource builds the API-server side from --configmap and
// --kubeconfig (or the in-cluster config): the fixed ConfigMap source, the
// Node Event recorder and the reporter of this component's own condition.
func configMapSource(o *options, payloadKey string) (source.Remote, dynconfig.EventRecorder, dynconfig.Reporter, error) {
	namespace, name, err := parseConfigMapRef(o.configMap)
	if err != nil {
		return nil, nil, nil, err
	}
	nodeName, err := demo.NodeName(o.NodeName)
	if err != nil {
		return nil, nil, nil, err
	}
	// An empty --kubeconfig means the in-cluster config.
	client, err := demo.NewClient(o.Kubeconfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--kubeconfig %q: %w", o.Kubeconfig, err)
	}
	remote, err := source.NewFixed(source.FixedOptions{Client: client, Namespace: namespace, Name: name, PayloadKey: payloadKey})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--configmap: %w", err)
	}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: client, NodeName: nodeName, Component: "kube-proxy-like"})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--node-name: %w", err)
	}
	node, err := status.NewNodeReporter(status.NodeReporterOptions{Client: client, NodeName: nodeName,
		ConditionType: status.ConditionTypeFor(componentName)})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--node-name: %w", err)
	}
	return remote, events, node, nil
}
