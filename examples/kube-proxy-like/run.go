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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// shutdownTimeout bounds the graceful stop of the HTTP server.
const shutdownTimeout = 5 * time.Second

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
	opts := dynconfig.Options[kubeproxyv1alpha1.KubeProxyConfiguration]{
		Profile:             profile,
		Layers:              layers,
		StateDir:            o.stateDir,
		ComponentVersion:    componentVersion,
		DisableRemoteConfig: o.disableRemote,
		Reporter:            reporters,
		Metrics:             metrics,
		Reload: func(ctx context.Context, cfg *kubeproxyv1alpha1.KubeProxyConfiguration) error {
			z.setConfig(cfg)
			klog.FromContext(ctx).Info("Reloaded the config in process", "clusterCIDR", cfg.ClusterCIDR, "hostnameOverride", cfg.HostnameOverride)
			return nil
		},
	}
	switch {
	case o.configMap != "":
		remote, events, err := configMapSource(o, profile.PayloadKey())
		if err != nil {
			return err
		}
		opts.Remote, opts.Events = remote, events
	case o.sourceDir != "":
		dir, err := source.NewDir(source.DirOptions{Path: o.sourceDir, PayloadKey: profile.PayloadKey(), PollInterval: o.sourcePoll})
		if err != nil {
			return fmt.Errorf("--source-dir: %w", err)
		}
		opts.Remote = dir
	case o.kubeconfig != "":
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
	z.setConfig(cfg)

	ln, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("--address/--port: %w", err)
	}
	srv := &http.Server{Handler: newHandler(z, registry), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving on %s\n", ln.Addr())
	logger.Info("Serving", "address", ln.Addr().String())

	runErr := c.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		shutErr = errors.Join(shutErr, err)
	}
	logger.Info("Stopped")
	return errors.Join(runErr, shutErr)
}

// configMapSource builds the API-server side from --configmap and
// --kubeconfig (or the in-cluster config): the fixed ConfigMap source and
// the Node Event recorder.
func configMapSource(o *options, payloadKey string) (source.Remote, dynconfig.EventRecorder, error) {
	namespace, name, err := parseConfigMapRef(o.configMap)
	if err != nil {
		return nil, nil, err
	}
	nodeName := o.nodeName
	if nodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, nil, fmt.Errorf("--node-name not set and the host name is unknown: %w", err)
		}
		nodeName = strings.ToLower(host)
	}
	// An empty --kubeconfig means the in-cluster config.
	restConfig, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
	}
	remote, err := source.NewFixed(source.FixedOptions{Client: client, Namespace: namespace, Name: name, PayloadKey: payloadKey})
	if err != nil {
		return nil, nil, fmt.Errorf("--configmap: %w", err)
	}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: client, NodeName: nodeName, Component: "kube-proxy-like"})
	if err != nil {
		return nil, nil, fmt.Errorf("--node-name: %w", err)
	}
	return remote, events, nil
}
