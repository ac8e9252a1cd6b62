package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// DemoCrashGate is the feature gate that makes the process exit 1 right
// after Bootstrap: a demo hook for a config that crashes the component.
const DemoCrashGate = "DemoCrashAtStartup"

// DemoCrashEnv, set to "1", makes the process exit 1 right after Bootstrap
// whatever its config: a demo hook for a crash that is not the config's
// fault.
const DemoCrashEnv = "DYNCONFIG_DEMO_CRASH"

// shutdownTimeout bounds the graceful stop of the HTTP server.
const shutdownTimeout = 5 * time.Second

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
	flags, err := pipeline.FlagOverrides(fs, configFlagBindings())
	if err != nil {
		return err
	}
	layers, err := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{
		InitFile:     o.configFile,
		DropInDir:    o.configDir,
		InstanceFile: o.instanceConfig,
		Flags:        flags,
	})
	if err != nil {
		return err
	}

	z := &configz{}
	reporters := reporterChain{logReporter{}, z}
	if o.statusFile != "" {
		reporters = append(reporters, &statusFile{path: o.statusFile, pid: os.Getpid()})
	}
	registry := prometheus.NewRegistry()
	metrics, err := status.NewMetrics(registry)
	if err != nil {
		return err
	}

	// runCtx ends Run: on a signal (through ctx), or when the Controller
	// asks for a restart onto a new config.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var restarting atomic.Bool
	opts := dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Profile:             kubelet.Profile{},
		Layers:              layers,
		StateDir:            o.stateDir,
		ComponentVersion:    componentVersion,
		DisableRemoteConfig: o.disableRemote,
		Metrics:             metrics,
		RequireHealthy:      true,
		Restart: func() {
			restarting.Store(true)
			cancel()
		},
	}
	switch {
	case o.kubeconfig != "":
		remote, node, events, err := apiServerSource(o)
		if err != nil {
			return err
		}
		opts.Remote, opts.Events = remote, events
		reporters = append(reporters, node)
	case o.sourceDir != "":
		dir, err := source.NewDir(source.DirOptions{Path: o.sourceDir, PayloadKey: kubelet.PayloadKey, PollInterval: o.sourcePoll})
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
	if cfg.FeatureGates[DemoCrashGate] {
		return fmt.Errorf("%w: the config in use enables feature gate %s", errDemoCrash, DemoCrashGate)
	}
	if os.Getenv(DemoCrashEnv) == "1" {
		return fmt.Errorf("%w: %s=1 in the environment", errDemoCrash, DemoCrashEnv)
	}
	z.setConfig(cfg)

	ln, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("--address/--port: %w", err)
	}
	srv := &http.Server{Handler: newHandler(z, registry), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving on %s\n", ln.Addr())
	logger.Info("Serving", "address", ln.Addr().String(), "maxPods", cfg.MaxPods)
	c.MarkHealthy()

	runErr := c.Run(runCtx)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer scancel()
	shutErr := srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		shutErr = errors.Join(shutErr, err)
	}
	if restarting.Load() {
		logger.Info("Exiting with code 0 to restart onto the new config")
	} else {
		logger.Info("Stopped")
	}
	return errors.Join(runErr, shutErr)
}

// apiServerSource builds the API-server side from --kubeconfig: the Node
// annotation source, the Node status reporter and the Event recorder.
func apiServerSource(o *options) (source.Remote, dynconfig.Reporter, dynconfig.EventRecorder, error) {
	nodeName := o.nodeName
	if nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--node-name not set and the host name is unknown: %w", err)
		}
		nodeName = strings.ToLower(host)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
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
