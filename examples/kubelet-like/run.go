package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/examples/internal/demo"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// DemoCrashProviderID, as the providerID of the config in use, makes the
// process exit 1 right after Bootstrap: a demo hook for a config that
// crashes the component. (A field the kubelet accepts with any value, so
// only the config's trial can reveal it.)
const DemoCrashProviderID = "demo://crash-at-startup"

// DemoCrashEnv, set to "1", makes the process exit 1 right after Bootstrap
// whatever its config: a demo hook for a crash that is not the config's
// fault.
const DemoCrashEnv = "DYNCONFIG_DEMO_CRASH"

// errDemoCrash is the deliberate startup failure of the demo hooks.
var errDemoCrash = errors.New("demo hook: crashing at startup")

// run is the component: it chooses its config with a dynconfig Controller,
// serves it, and follows the assignment until ctx ends or a new config
// needs a restart. Both end in a nil error (exit 0).
func run(ctx context.Context, o *options, fs *pflag.FlagSet, stdout io.Writer) error {
	logger := klog.FromContext(ctx).WithName("kubelet-like")
	ctx = klog.NewContext(ctx, logger)

	pipeline, err := kubelet.NewPipeline(merge.Options{Logger: logger})
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
	reporters := rep.Reporters

	// runCtx ends Run: on a signal (through ctx), or when the Controller
	// asks for a restart onto a new config.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var restarting atomic.Bool
	opts := dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Profile:             kubelet.Profile{},
		Layers:              layers,
		StateDir:            o.StateDir,
		ComponentVersion:    componentVersion,
		DisableRemoteConfig: o.DisableRemote,
		Metrics:             rep.Metrics,
		RequireHealthy:      true,
		Restart: func() {
			restarting.Store(true)
			cancel()
		},
	}
	switch {
	case o.Kubeconfig != "":
		remote, node, events, err := apiServerSource(o)
		if err != nil {
			return err
		}
		opts.Remote, opts.Events = remote, events
		reporters = append(reporters, node)
	case o.SourceDir != "":
		dir, err := source.NewDir(source.DirOptions{Path: o.SourceDir, PayloadKey: kubelet.PayloadKey, PollInterval: o.SourcePoll})
		if err != nil {
			return fmt.Errorf("--source-dir: %w", err)
		}
		opts.Remote = dir
	}
	opts.Reporter = reporters

	c, err := dynconfig.New(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx)
	if err != nil {
		return err
	}
	if cfg.ProviderID == DemoCrashProviderID {
		return fmt.Errorf("%w: the config in use has providerID %s", errDemoCrash, DemoCrashProviderID)
	}
	if os.Getenv(DemoCrashEnv) == "1" {
		return fmt.Errorf("%w: %s=1 in the environment", errDemoCrash, DemoCrashEnv)
	}
	z.SetConfig(cfg)

	srv, err := demo.Listen(o.Address, o.Port, demo.NewHandler(z, rep.Registry))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serving on %s\n", srv.Addr())
	logger.Info("Serving", "address", srv.Addr().String(), "maxPods", cfg.MaxPods)
	c.MarkHealthy()

	runErr := c.Run(runCtx)
	shutErr := srv.Shutdown(ctx)
	if restarting.Load() {
		logger.Info("Exiting with code 0 to restart onto the new config")
	} else {
		logger.Info("Stopped")
	}
	return errors.Join(runErr, shutErr)
}

// newConfigz returns what /configz serves, under the kubelet's own key.
func newConfigz() *demo.Configz[kubeletv1beta1.KubeletConfiguration] {
	return demo.NewConfigz[kubeletv1beta1.KubeletConfiguration]("kubeletconfig")
}

// apiServerSource builds the API-server side from --kubeconfig: the Node
// annotation source, the Node status reporter and the Event recorder.
func apiServerSource(o *options) (source.Remote, dynconfig.Reporter, dynconfig.EventRecorder, error) {
	nodeName, err := demo.NodeName(o.NodeName)
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := demo.NewClient(o.Kubeconfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
	}
	remote, err := source.NewNode(source.NodeOptions{Client: client, NodeName: nodeName, PayloadKey: kubelet.PayloadKey})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--node-name: %w", err)
	}
	node, err := status.NewNodeReporter(status.NodeReporterOptions{Client: client, NodeName: nodeName})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--node-name: %w", err)
	}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: client, NodeName: nodeName, Component: "kubelet-like"})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--node-name: %w", err)
	}
	return remote, node, events, nil
}
