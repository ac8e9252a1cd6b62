// Command dynconfig-rollout runs the ConfigRollout controller
// (package rollout/controller): it rolls ConfigMaps out to the nodes' dynconfig
// components step by step, halts and reverts on failures, and serves
// Prometheus metrics on --metrics-address. Run two replicas with
// --leader-elect (the default); only the one holding the Lease acts.
//
// Its command line is the one every dynconfig binary has (app.Skeleton):
// cobra, component-base's logging flags (--logging-format=json),
// --feature-gates, --version; the leader-election flags are
// component-base's (--leader-elect-resource-name, ...), the names of
// earlier releases (--lease-name, ...) are deprecated aliases.
//
// On --metrics-address it serves /metrics, /livez (the process runs and,
// while it holds the Lease, renews it in time), /readyz (it has read its
// Lease: it knows whether it leads or stands by; and, leading, its
// informers have synced) and /healthz (= /livez). With
// --metrics-auth=delegated it serves HTTPS, and /metrics (and pprof, when
// it shares the address) only to a bearer token the API server
// authenticates, of a user it authorizes to get the path (app.DelegatedAuth).
// With --profiling it serves Go's profiles under /debug/pprof/ on
// --profiling-address, loopback by default.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	componentbaseconfig "k8s.io/component-base/config"
	cboptions "k8s.io/component-base/config/options"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/rollout/controller"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// flags are the command line's values.
type flags struct {
	kubeconfig       string
	namespace        string
	nodeSelector     string
	le               componentbaseconfig.LeaderElectionConfiguration
	identity         string
	metricsAddress   string
	profiling        bool
	profilingAddress string
	workers          int
	knownBadNodes    int
	qps              float64
	burst            int
	heartbeat        time.Duration
	metricsAuth      app.MetricsAuthOptions
}

func main() {
	app.Main(newCommand())
}

// leaderElectionAliases are the flag names of earlier releases, kept as
// deprecated aliases of component-base's names.
var leaderElectionAliases = map[string]string{
	"lease-namespace": "leader-elect-resource-namespace",
	"lease-name":      "leader-elect-resource-name",
	"lease-duration":  "leader-elect-lease-duration",
	"renew-deadline":  "leader-elect-renew-deadline",
	"retry-period":    "leader-elect-retry-period",
}

// newCommand builds the command. Each call has its own flags.
func newCommand() *cobra.Command {
	s := app.NewSkeleton("dynconfig-rollout",
		"Rolls ConfigMaps out to the nodes' dynconfig components step by step (ConfigRollout)", "", nil)
	var f flags
	host, _ := os.Hostname()

	fs := s.Flags.FlagSet("controller")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")
	fs.StringVar(&f.namespace, "namespace", "", "Watch ConfigRollouts and ConfigMaps in this namespace only (default: all).")
	fs.StringVar(&f.nodeSelector, "node-selector", "", "Watch only the Nodes this label selector matches (default: all).")
	fs.IntVar(&f.workers, "workers", 1, "Rollouts planned at once.")
	fs.IntVar(&f.knownBadNodes, "known-bad-nodes", plan.DefaultKnownBadNodes,
		"How many nodes must report a ConfigMap bad (RolledBack, DeadEnd) before a new rollout of it is refused, unless its spec.allowKnownBad.")
	// A rollout makes one Node patch per node (two when it reverts), in
	// bursts: a batch of maxUnavailable nodes at once, then a trial. The
	// burst covers a 10% batch of a 5000-node fleet. Each assigned node's
	// component then patches its Node twice (trial, promoted), so a
	// rollout can use at most a third of the API server's PATCH rate:
	// 250/s suits an API server that sustains about 750 (one on 2 cores
	// sustained 170-420 under load in BenchmarkRolloutController, which
	// probes it); raise both for a larger control plane. API Priority and
	// Fairness queues these requests at the priority of a workload, not
	// of the system.
	fs.Float64Var(&f.qps, "kube-api-qps", 250, "API requests per second.")
	fs.IntVar(&f.burst, "kube-api-burst", 500, "API request burst.")
	fs.DurationVar(&f.heartbeat, "status-heartbeat-interval", controller.DefaultHeartbeatInterval,
		"Refresh status.lastReconcileTime of a rollout with work left at least this often (one status write each; dynconfigctl and the DynconfigRolloutNotReconciled alert call a rollout stale after 5m); 0 or less: only with other writes.")

	lfs := s.Flags.FlagSet("leader election")
	f.le = componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
		RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
		RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
		ResourceLock:      "leases",
		ResourceName:      "dynconfig-rollout",
		ResourceNamespace: envOr("POD_NAMESPACE", "kube-system"),
	}
	cboptions.BindLeaderElectionFlags(&f.le, lfs)
	lfs.StringVar(&f.identity, "leader-elect-identity", envOr("POD_NAME", host), "This replica's name in the Lease (default: $POD_NAME, else the host name).")
	lfs.StringVar(&f.identity, "identity", f.identity, "")
	_ = lfs.MarkDeprecated("identity", "use --leader-elect-identity")
	lfs.StringVar(&f.le.ResourceNamespace, "lease-namespace", f.le.ResourceNamespace, "")
	lfs.StringVar(&f.le.ResourceName, "lease-name", f.le.ResourceName, "")
	lfs.DurationVar(&f.le.LeaseDuration.Duration, "lease-duration", f.le.LeaseDuration.Duration, "")
	lfs.DurationVar(&f.le.RenewDeadline.Duration, "renew-deadline", f.le.RenewDeadline.Duration, "")
	lfs.DurationVar(&f.le.RetryPeriod.Duration, "retry-period", f.le.RetryPeriod.Duration, "")
	for old, name := range leaderElectionAliases {
		_ = lfs.MarkDeprecated(old, "use --"+name)
	}

	sfs := s.Flags.FlagSet("serving")
	sfs.StringVar(&f.metricsAddress, "metrics-address", ":8080", "Serve /metrics, /livez, /readyz and /healthz here (who may read /metrics: --metrics-auth); empty disables.")
	f.metricsAuth.AddFlags(sfs)
	sfs.BoolVar(&f.profiling, "profiling", false, "Serve Go's profiles under /debug/pprof/ on --profiling-address.")
	sfs.StringVar(&f.profilingAddress, "profiling-address", "", "Where --profiling serves (default: --metrics-address when that is a loopback address, else 127.0.0.1:6060).")
	s.Finish()

	s.Cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, err := s.SetUp(cmd.Context())
		if err != nil {
			return err
		}
		if err := f.validate(); err != nil {
			return app.UsageError(err)
		}
		return run(ctx, &f)
	}
	return s.Cmd
}

// validate checks what the flag types do not; each error names its flag.
func (f *flags) validate() error {
	if f.le.ResourceLock != "leases" {
		return fmt.Errorf("--leader-elect-resource-lock %q: only leases is supported", f.le.ResourceLock)
	}
	if f.le.LeaderElect {
		switch {
		case f.identity == "":
			return errors.New("--leader-elect-identity: required with --leader-elect (the host name is unknown)")
		case f.le.ResourceName == "" || f.le.ResourceNamespace == "":
			return errors.New("--leader-elect-resource-name and --leader-elect-resource-namespace: required with --leader-elect")
		case f.le.LeaseDuration.Duration <= f.le.RenewDeadline.Duration:
			return fmt.Errorf("--leader-elect-lease-duration %v must be greater than --leader-elect-renew-deadline %v",
				f.le.LeaseDuration.Duration, f.le.RenewDeadline.Duration)
		case f.le.RenewDeadline.Duration <= f.le.RetryPeriod.Duration:
			return fmt.Errorf("--leader-elect-renew-deadline %v must be greater than --leader-elect-retry-period %v",
				f.le.RenewDeadline.Duration, f.le.RetryPeriod.Duration)
		}
	}
	if f.workers < 1 {
		return fmt.Errorf("--workers %d: must be at least 1", f.workers)
	}
	return f.metricsAuth.Validate()
}

func run(ctx context.Context, f *flags) error {
	logger := klog.FromContext(ctx)
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
		Registerer: reg, Workers: f.workers, HeartbeatInterval: f.heartbeat, KnownBadNodes: f.knownBadNodes,
	}
	if f.heartbeat <= 0 {
		opts.HeartbeatInterval = -1
	}
	var health *leaseHealth
	if f.le.LeaderElect {
		opts.LeaderElection = &controller.LeaderElection{
			Namespace: f.le.ResourceNamespace, Name: f.le.ResourceName, Identity: f.identity,
			LeaseDuration: f.le.LeaseDuration.Duration, RenewDeadline: f.le.RenewDeadline.Duration, RetryPeriod: f.le.RetryPeriod.Duration,
		}
		health = watchLease(ctx, client, opts.LeaderElection)
	}
	c, err := controller.New(opts)
	if err != nil {
		return err
	}
	profAddr := ""
	if f.profiling {
		profAddr = profilingAddress(f.profilingAddress, f.metricsAddress)
	}
	if f.metricsAddress != "" {
		mux := metricsMux(reg, health, c.Ready)
		if profAddr == f.metricsAddress {
			pprofMux(mux)
		}
		h, tlsConfig, err := guard(&f.metricsAuth, client, mux, f.metricsAddress)
		if err != nil {
			return err
		}
		srv, err := serve(ctx, f.metricsAddress, h, tlsConfig)
		if err != nil {
			return fmt.Errorf("--metrics-address %s: %w", f.metricsAddress, err)
		}
		defer srv.Close()
	}
	if profAddr != "" && profAddr != f.metricsAddress {
		srv, err := serve(ctx, profAddr, pprofMux(http.NewServeMux()), nil)
		if err != nil {
			return fmt.Errorf("--profiling-address %s: %w", profAddr, err)
		}
		defer srv.Close()
	}
	if profAddr != "" {
		logger.Info("Serving profiles", "address", profAddr)
	}
	return c.Run(ctx)
}

// profilingAddress is where --profiling serves: the flag, else the
// metrics address when it is loopback, else 127.0.0.1:6060.
func profilingAddress(flag, metrics string) string {
	if flag != "" {
		return flag
	}
	if host, _, err := net.SplitHostPort(metrics); err == nil {
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return metrics
		}
	}
	return "127.0.0.1:6060"
}

// serve listens on addr and serves h until ctx ends or the server is
// closed.
func serve(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "HTTP server stopped", "address", addr)
		}
	}()
	return srv, nil
}

// guard puts h behind --metrics-auth: with delegated, the API server
// authenticates and authorizes each request but the health checks', over
// TLS.
func guard(o *app.MetricsAuthOptions, client kubernetes.Interface, h http.Handler, addr string) (http.Handler, *tls.Config, error) {
	host, _, _ := net.SplitHostPort(addr)
	if host == "" {
		host, _ = os.Hostname()
	}
	return o.Guard(h, client, host, "/livez", "/readyz", "/healthz")
}

// metricsMux serves /metrics and the health checks; pprof is added by
// run when it shares the address. /readyz needs the Lease read (health)
// and, on the replica that runs the controller, its informers synced
// (controllerReady, controller.Controller.Ready; nil: not checked).
func metricsMux(reg *prometheus.Registry, health *leaseHealth, controllerReady func() error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	live := func(w http.ResponseWriter, _ *http.Request) {
		if err := health.live(time.Now()); err != nil {
			http.Error(w, "leaderElection: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
	mux.HandleFunc("/livez", live)
	mux.HandleFunc("/healthz", live)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		err := health.ready()
		if err == nil && controllerReady != nil {
			err = controllerReady()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// pprofMux adds Go's profiles to mux.
func pprofMux(mux *http.ServeMux) *http.ServeMux {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// leaseHealth follows this replica's Lease with an informer on that one
// object: the leader-election health check of /livez and the "leader or
// standby" of /readyz. A nil *leaseHealth (no leader election) is always
// live and ready.
type leaseHealth struct {
	identity      string
	leaseDuration time.Duration
	synced        cache.InformerSynced
	lease         atomic.Pointer[coordinationv1.Lease]
}

// watchLease starts following the Lease of le until ctx ends.
func watchLease(ctx context.Context, client kubernetes.Interface, le *controller.LeaderElection) *leaseHealth {
	h := &leaseHealth{identity: le.Identity, leaseDuration: le.LeaseDuration}
	if h.leaseDuration == 0 {
		h.leaseDuration = 15 * time.Second
	}
	lw := cache.NewListWatchFromClient(client.CoordinationV1().RESTClient(), "leases", le.Namespace,
		fields.OneTermEqualSelector("metadata.name", le.Name))
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	set := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			h.lease.Store(l)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) { h.lease.Store(nil) },
	})
	h.synced = inf.HasSynced
	go inf.Run(ctx.Done())
	return h
}

// live fails when this replica holds the Lease by the API server's record
// but has not renewed it for a lease duration and a grace of 20 s: its
// elector is stuck, and a restart lets the standby take over. A standby,
// or a replica that cannot read its Lease, is live.
func (h *leaseHealth) live(now time.Time) error {
	if h == nil {
		return nil
	}
	l := h.lease.Load()
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != h.identity || l.Spec.RenewTime == nil {
		return nil
	}
	if late := now.Sub(l.Spec.RenewTime.Time); late > h.leaseDuration+20*time.Second {
		return fmt.Errorf("holding the Lease %s/%s but last renewed it %v ago", l.Namespace, l.Name, late.Round(time.Second))
	}
	return nil
}

// ready is nil once this replica has read its Lease (or learnt there is
// none yet): it then either leads or stands by, and can take over.
func (h *leaseHealth) ready() error {
	if h == nil {
		return nil
	}
	if !h.synced() {
		return errors.New("leaderElection: the Lease has not been read yet")
	}
	return nil
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
