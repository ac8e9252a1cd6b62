package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
)

// run is the component's life once the command line is valid: build the
// Controller from the flags, Bootstrap, Start, serve, then run the
// Controller and the component's Run until a signal or a restart.
func run[T any](ctx context.Context, c *Component[T], o *options, fg featuregate.FeatureGate, fs *pflag.FlagSet,
	bindings map[string]merge.FlagBinding, stdout io.Writer) error {
	logger := klog.FromContext(ctx)

	pipeline, err := merge.New[T](c.Profile, merge.Options{Logger: logger})
	if err != nil {
		return err
	}
	overrides, err := pipeline.FlagOverrides(fs, bindings)
	if err != nil {
		return UsageError(err)
	}

	reg := NewRegistry()
	opts := dynconfig.Options[T]{
		Component: c.Component,
		Profile:   c.Profile,
		Local: dynconfig.LocalConfig{
			InitFile: o.configFile, DropInDir: o.configDir, InstanceFile: o.instanceConfig, Flags: overrides,
		},
		Merge:               merge.Options{Logger: logger},
		StateDir:            o.stateDir,
		ComponentVersion:    c.ComponentVersion,
		DisableRemoteConfig: o.disableRemote,
		Registerer:          reg,
		RequireHealthy:      c.RequireHealthy || c.Health != nil,
		ConfirmWithin:       o.confirmWithin,
	}
	env := Env{FeatureGates: fg}
	switch {
	case o.sourceDir != "":
		dir, err := source.NewDir(source.DirOptions{Path: o.sourceDir, PayloadKey: c.Profile.PayloadKey(), PollInterval: o.sourcePoll})
		if err != nil {
			return fmt.Errorf("--source-dir: %w", err)
		}
		opts.Remote = dir
	case o.kubeconfig != "" || o.configMap != "":
		cluster, err := newCluster(o, c.NewClient)
		if err != nil {
			return err
		}
		opts.Cluster = cluster
		env.NodeName = cluster.NodeName
	case !o.disableRemote:
		// Nothing to take a config from, and not asked to run locally: a
		// unit or a Pod that forgot --kubeconfig would otherwise report
		// True on its local config forever while nodes are assigned
		// configs it never sees.
		logger.Error(nil, "No config source: neither --kubeconfig, --configmap nor --source-dir is set, so this component runs its local config only, never reads the config assigned to its Node and reports its condition on no Node; pass --kubeconfig and --node-name (in a Pod: a kubeconfig for its ServiceAccount token, see deploy/daemonset), or --disable-remote-config to run locally on purpose",
			"component", c.Component, "inPod", os.Getenv("KUBERNETES_SERVICE_HOST") != "")
	}
	if env.NodeName == "" {
		if env.NodeName, err = nodeName(o.nodeName); err != nil {
			return err
		}
	}

	z, err := registerConfigz[T](c.ConfigzKey, c.Profile.GroupVersionKind())
	if err != nil {
		return err
	}
	defer z.unreg()
	chain := ReporterChain{LogReporter{ConditionType: nodeapi.ConditionTypeFor(c.Component)}, z}
	if sf := newStatusFile(o.statusFile); sf != nil {
		chain = append(chain, sf)
	}
	opts.Reporter = append(chain, c.Reporters...)

	// runCtx ends the Controller's Run and the component's: on a signal
	// (through ctx), or when the Controller asks for a restart.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var restarting atomic.Bool
	opts.Restart = func() {
		restarting.Store(true)
		cancel()
	}
	var ctrl *dynconfig.Controller[T]
	// The health gate of the config that runs (health.go); the served
	// address joins env once the endpoints serve.
	health := &healthRunner[T]{gate: c.Health}
	defer health.stop()
	if c.Reload != nil {
		opts.Reload = func(ctx context.Context, cfg *T) error {
			// Bound to the config being reloaded (the Controller counts a
			// mark made inside Reload, or after it, for it).
			mark := ctrl.MarkHealthyFunc()
			health.stop()
			if err := c.Reload(ctx, cfg); err != nil {
				return err
			}
			if err := z.SetConfig(cfg); err != nil {
				return err
			}
			klog.FromContext(ctx).Info("Reloaded the config in process")
			// Applied and served, as after a restart's Start: the
			// reloaded config's own health gate.
			health.start(runCtx, cfg, env, mark)
			return nil
		}
	}

	created, err := dynconfig.New(opts)
	if err != nil {
		return err
	}
	ctrl = created
	defer ctrl.Close()
	cfg, err := ctrl.Bootstrap(ctx)
	if err != nil {
		return err
	}
	if c.Start != nil {
		if err := c.Start(ctx, cfg, env); err != nil {
			return err
		}
	}
	if err := z.SetConfig(cfg); err != nil {
		return err
	}

	var compErr atomic.Pointer[error]
	h, tlsConfig, err := o.metricsAuth.Guard(NewHandler(func() error {
		if p := compErr.Load(); p != nil {
			return *p
		}
		return nil
	}, reg), clusterClient(opts.Cluster), o.address, "/healthz")
	if err != nil {
		return err
	}
	srv, err := listen(o.address, o.port, h, tlsConfig)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serving on %s\n", srv.ln.Addr())
	logger.Info("Serving", "address", srv.ln.Addr().String())
	env.Address = srv.ln.Addr().String()
	health.start(runCtx, cfg, env, ctrl.MarkHealthyFunc())

	// The component's Run next to the Controller's: the first to end ends
	// the other.
	compDone := make(chan error, 1)
	go func() {
		var err error
		if c.Run != nil {
			err = c.Run(runCtx, cfg, env)
			// Ending when asked to is not a failure.
			if runCtx.Err() != nil && errors.Is(err, context.Canceled) {
				err = nil
			}
		} else {
			<-runCtx.Done()
		}
		if err != nil {
			compErr.Store(&err)
		}
		cancel()
		compDone <- err
	}()
	runErr := ctrl.Run(runCtx)
	cancel()
	err = <-compDone
	shutErr := srv.shutdown(ctx)
	if restarting.Load() {
		logger.Info("Exiting with code 0 to restart onto the new config")
	} else {
		logger.Info("Stopped")
	}
	return errors.Join(err, runErr, shutErr)
}

// newCluster builds the API-server side from --kubeconfig (or, for
// --configmap, the in-cluster config when --kubeconfig is empty),
// --node-name and --configmap.
func newCluster(o *options, newClient func(string) (kubernetes.Interface, error)) (*dynconfig.Cluster, error) {
	name, err := nodeName(o.nodeName)
	if err != nil {
		return nil, err
	}
	cluster := &dynconfig.Cluster{NodeName: name}
	if o.configMap != "" {
		ref, err := parseConfigMapRef(o.configMap)
		if err != nil {
			return nil, UsageError(err)
		}
		cluster.ConfigMap = &ref
	}
	if newClient == nil {
		newClient = defaultClient
	}
	if cluster.Client, err = newClient(o.kubeconfig); err != nil {
		return nil, fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
	}
	return cluster, nil
}

// defaultClient is client-go's clientset for the kubeconfig file at path,
// or for the in-cluster config when path is empty.
func defaultClient(path string) (kubernetes.Interface, error) {
	var restConfig *rest.Config
	var err error
	if path == "" {
		if restConfig, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("not in a cluster: %w", err)
		}
	} else if restConfig, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(restConfig)
}

// clusterClient is the API client of c, nil without one.
func clusterClient(c *dynconfig.Cluster) kubernetes.Interface {
	if c == nil {
		return nil
	}
	return c.Client
}
