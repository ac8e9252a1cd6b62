// Command dynconfig-rollout runs the ConfigRollout controller
// (package rollout/controller): it rolls ConfigMaps out to the nodes' dynconfig
// components step by step, halts and reverts on failures, and serves
// Prometheus metrics on --metrics-address. Run two replicas with
// --leader-elect (the default); only the one holding the Lease acts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/rollout/controller"
)

type flags struct {
	kubeconfig     string
	namespace      string
	nodeSelector   string
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	identity       string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	metricsAddress string
	profiling      bool
	workers        int
	qps            float64
	burst          int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dynconfig-rollout: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dynconfig-rollout", flag.ContinueOnError)
	klog.InitFlags(fs)
	var f flags
	host, _ := os.Hostname()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&f.namespace, "namespace", "", "watch ConfigRollouts in this namespace only (default: all)")
	fs.StringVar(&f.nodeSelector, "node-selector", "", "watch only the Nodes this label selector matches (default: all)")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "act only while holding the Lease --lease-namespace/--lease-name")
	fs.StringVar(&f.leaseNamespace, "lease-namespace", envOr("POD_NAMESPACE", "kube-system"), "namespace of the Lease")
	fs.StringVar(&f.leaseName, "lease-name", "dynconfig-rollout", "name of the Lease")
	fs.StringVar(&f.identity, "identity", envOr("POD_NAME", host), "this replica's name in the Lease")
	fs.DurationVar(&f.leaseDuration, "lease-duration", 15*time.Second, "how long a Lease holds without renewal")
	fs.DurationVar(&f.renewDeadline, "renew-deadline", 10*time.Second, "how long the leader tries to renew before it gives up")
	fs.DurationVar(&f.retryPeriod, "retry-period", 2*time.Second, "how often to try to take or renew the Lease")
	fs.StringVar(&f.metricsAddress, "metrics-address", ":8080", "serve /metrics and /healthz here; empty disables")
	fs.BoolVar(&f.profiling, "profiling", false, "also serve Go's profiles under /debug/pprof/ on --metrics-address")
	fs.IntVar(&f.workers, "workers", 1, "rollouts planned at once")
	// A rollout makes one Node patch per node (two when it reverts), in
	// bursts: a batch of maxUnavailable nodes at once, then a trial. The
	// burst covers a 10% batch of a 5000-node fleet; the rate bounds the
	// steps with no trial to wait for (BenchmarkRolloutController: at
	// 1000 nodes 1.7 s a step at 100/s, 0.8 s at 250/s, where the API
	// server becomes the bound). API Priority and Fairness queues these
	// requests at the priority of a workload, not of the system.
	fs.Float64Var(&f.qps, "kube-api-qps", 250, "API requests per second")
	fs.IntVar(&f.burst, "kube-api-burst", 500, "API request burst")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if f.leaderElect && f.identity == "" {
		return errors.New("--identity: required with --leader-elect (the hostname is unknown)")
	}
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	cfg = rest.AddUserAgent(cfg, "dynconfig-rollout")
	// Nodes and Events in protobuf, as kube-controller-manager does; the
	// dynamic client of ConfigRollouts speaks JSON whatever this says.
	typed := rest.CopyConfig(cfg)
	typed.ContentType = "application/vnd.kubernetes.protobuf"
	typed.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(typed)
	if err != nil {
		return fmt.Errorf("create API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create dynamic API client: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := controller.Options{
		Client: client, Dynamic: dyn, Namespace: f.namespace, NodeLabelSelector: f.nodeSelector,
		Registerer: reg, Workers: f.workers,
	}
	if f.leaderElect {
		opts.LeaderElection = &controller.LeaderElection{
			Namespace: f.leaseNamespace, Name: f.leaseName, Identity: f.identity,
			LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
		}
	}
	c, err := controller.New(opts)
	if err != nil {
		return err
	}
	if f.metricsAddress != "" {
		ln, err := net.Listen("tcp", f.metricsAddress)
		if err != nil {
			return fmt.Errorf("--metrics-address %s: %w", f.metricsAddress, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		if f.profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Metrics server stopped")
			}
		}()
		defer srv.Close()
	}
	return c.Run(ctx)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}
