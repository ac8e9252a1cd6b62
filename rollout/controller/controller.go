package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// ErrLostLease is what Run returns when the controller lost its Lease while
// its context was still live: the process should exit and start over.
var ErrLostLease = errors.New("lost the rollout controller's Lease")

// Options configures a Controller.
type Options struct {
	// Client talks to the API server for Nodes, ConfigMaps, Events and the
	// Lease. Required.
	Client kubernetes.Interface
	// Dynamic talks to the API server for ConfigRollouts. Required.
	Dynamic dynamic.Interface
	// Namespace limits the ConfigRollouts (and their ConfigMaps) watched;
	// "" watches every namespace.
	Namespace string
	// NodeLabelSelector limits the Nodes watched at all (a label selector
	// string); "" watches every Node. A rollout's own nodeSelector is
	// applied on top.
	NodeLabelSelector string
	// LeaderElection, when set, runs the controller only while it holds
	// the Lease it names.
	LeaderElection *LeaderElection
	// Registerer receives the metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Workers is how many rollouts are planned at once. Default 1.
	Workers int
	// PatchParallelism is how many Node patches one plan makes at once
	// (the client's rate limit still applies). Default 64 (it was 16): a
	// step's batch goes out in a few round trips instead of batch/16.
	PatchParallelism int
	// Resync plans every rollout at least this often. Default 5 minutes.
	Resync time.Duration
	// StatusInterval is how long a status change that only moves node
	// records on (a node reported trial or promotion, and nothing is to
	// be assigned, reverted or recorded as an Event) may wait to be
	// written together with the next one. Default 1 second. Every other
	// change is written at once.
	StatusInterval time.Duration
	// HeartbeatInterval is how often status.lastReconcileTime of a rollout
	// with work left is refreshed when nothing else is written (one status
	// write per interval; heartbeat.go). Default DefaultHeartbeatInterval;
	// negative: only with other writes.
	HeartbeatInterval time.Duration
	// Clock is the time source. Default: the real clock.
	Clock clock.Clock
	// EventSink receives the Events; default: the API server's Events of
	// Client.
	EventSink record.EventSink
	// Plan decides each step; default plan.Plan. Tests give a planner
	// that fails on purpose.
	Plan func(plan.Input) plan.Result
	// SyncPatience is how long the informers may take to sync before the
	// controller asks the API server why they have not, and says so
	// (again each SyncPatience). Default 20 seconds.
	SyncPatience time.Duration
	// KnownBadNodes is how many nodes must report a ConfigMap bad before
	// a new rollout of it is refused (plan.Input.KnownBadNodes). 0:
	// plan.DefaultKnownBadNodes.
	KnownBadNodes int
}

// LeaderElection names the Lease and its timings.
type LeaderElection struct {
	// Namespace and Name of the Lease. Required.
	Namespace, Name string
	// Identity of this replica (the Lease holder). Required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's
	// leaderelection; defaults 15s, 10s, 2s. New refuses what client-go's
	// leader election would: LeaseDuration must exceed RenewDeadline, and
	// RenewDeadline must exceed RetryPeriod times its jitter factor
	// (leaderelection.JitterFactor, 1.2).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Controller runs ConfigRollouts.
type Controller struct {
	opts    Options
	metrics *metrics
	scheme  *runtime.Scheme
	// What Stats returns.
	assigns, reverts, statusWrites, reconcileNanos atomic.Int64
	preflightAsks                                  atomic.Int64
	planNanos, writeNanos, patchNanos              atomic.Int64
	// running: this replica runs the controller (it leads, or leader
	// election is off); synced: and its informers have synced.
	running, synced atomic.Bool
}

// Ready says whether this replica is ready to serve its purpose: a
// standby (leader election on, not leading) always is; one that runs the
// controller is once its informers have synced. It is what /readyz serves.
func (c *Controller) Ready() error {
	if c.running.Load() && !c.synced.Load() {
		return errors.New("controller: running, but its informers have not synced yet")
	}
	return nil
}

// Stats are counts since the Controller was created, across leadership
// terms (the same as its metrics, without a Prometheus registry).
type Stats struct {
	// Assignments and Reverts are the Node patches that succeeded;
	// PreflightAsks the pre-flight requests written (plan.Patch.Preflight).
	Assignments, Reverts, PreflightAsks int64
	// StatusWrites are the ConfigRollout status updates that succeeded.
	StatusWrites int64
	// ReconcileTime is the time spent planning and writing, in all; of
	// it, PlanTime reading the caches and planning, StatusWriteTime
	// waiting for status updates and PatchTime for Node patches.
	ReconcileTime, PlanTime, StatusWriteTime, PatchTime time.Duration
}

// Stats returns the Controller's counts.
func (c *Controller) Stats() Stats {
	return Stats{
		Assignments: c.assigns.Load(), Reverts: c.reverts.Load(), PreflightAsks: c.preflightAsks.Load(), StatusWrites: c.statusWrites.Load(),
		ReconcileTime: time.Duration(c.reconcileNanos.Load()), PlanTime: time.Duration(c.planNanos.Load()),
		StatusWriteTime: time.Duration(c.writeNanos.Load()), PatchTime: time.Duration(c.patchNanos.Load()),
	}
}

// New checks opts and returns a Controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil {
		return nil, errors.New("Options.Client: required")
	}
	if opts.Dynamic == nil {
		return nil, errors.New("Options.Dynamic: required")
	}
	if _, err := labels.Parse(opts.NodeLabelSelector); err != nil {
		return nil, fmt.Errorf("Options.NodeLabelSelector: %w", err)
	}
	if le := opts.LeaderElection; le != nil {
		if le.Namespace == "" || le.Name == "" {
			return nil, errors.New("Options.LeaderElection: Namespace and Name are required")
		}
		if le.Identity == "" {
			return nil, errors.New("Options.LeaderElection.Identity: required")
		}
		if le.LeaseDuration == 0 {
			le.LeaseDuration = 15 * time.Second
		}
		if le.RenewDeadline == 0 {
			le.RenewDeadline = 10 * time.Second
		}
		if le.RetryPeriod == 0 {
			le.RetryPeriod = 2 * time.Second
		}
		if err := checkLeaseTimings(le); err != nil {
			return nil, err
		}
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("Options.Workers: must not be negative, got %d", opts.Workers)
	}
	if opts.Workers == 0 {
		opts.Workers = 1
	}
	if opts.PatchParallelism < 0 {
		return nil, fmt.Errorf("Options.PatchParallelism: must not be negative, got %d", opts.PatchParallelism)
	}
	if opts.PatchParallelism == 0 {
		opts.PatchParallelism = defaultPatchParallelism
	}
	if opts.Resync < 0 {
		return nil, fmt.Errorf("Options.Resync: must not be negative, got %v", opts.Resync)
	}
	if opts.Resync == 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.StatusInterval < 0 {
		return nil, fmt.Errorf("Options.StatusInterval: must not be negative, got %v", opts.StatusInterval)
	}
	if opts.StatusInterval == 0 {
		opts.StatusInterval = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Plan == nil {
		opts.Plan = plan.Plan
	}
	if opts.KnownBadNodes < 0 {
		return nil, fmt.Errorf("Options.KnownBadNodes: must not be negative, got %d", opts.KnownBadNodes)
	}
	if opts.SyncPatience < 0 {
		return nil, fmt.Errorf("Options.SyncPatience: must not be negative, got %v", opts.SyncPatience)
	}
	if opts.SyncPatience == 0 {
		opts.SyncPatience = 20 * time.Second
	}
	if opts.EventSink == nil {
		opts.EventSink = &typedcorev1.EventSinkImpl{Interface: opts.Client.CoreV1().Events("")}
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return &Controller{opts: opts, metrics: m, scheme: scheme}, nil
}

// checkLeaseTimings refuses the timings client-go's leader election
// refuses (leaderelection.NewLeaderElector), at New rather than at the
// first term: all positive, LeaseDuration > RenewDeadline > RetryPeriod *
// leaderelection.JitterFactor.
func checkLeaseTimings(le *LeaderElection) error {
	switch {
	case le.LeaseDuration < 0 || le.RenewDeadline < 0 || le.RetryPeriod < 0:
		return fmt.Errorf("Options.LeaderElection: timings must not be negative: LeaseDuration %v, RenewDeadline %v, RetryPeriod %v",
			le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
	case le.LeaseDuration <= le.RenewDeadline:
		return fmt.Errorf("Options.LeaderElection: LeaseDuration (%v) must be greater than RenewDeadline (%v)", le.LeaseDuration, le.RenewDeadline)
	case le.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(le.RetryPeriod)):
		return fmt.Errorf("Options.LeaderElection: RenewDeadline (%v) must be greater than RetryPeriod (%v) times the jitter factor %v (%v)",
			le.RenewDeadline, le.RetryPeriod, leaderelection.JitterFactor, time.Duration(leaderelection.JitterFactor*float64(le.RetryPeriod)))
	}
	return nil
}

// Run runs the controller until ctx ends (then it returns nil) or, with
// leader election, until the Lease is lost (ErrLostLease). Without leader
// election it runs at once.
func (c *Controller) Run(ctx context.Context) error {
	le := c.opts.LeaderElection
	if le == nil {
		return c.run(ctx)
	}
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.opts.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	// The elector's context ends only once the workers stopped, so the
	// Lease is released after the last write of this replica.
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	var leading atomic.Bool
	runDone := make(chan struct{})
	var runErr error
	stop := context.AfterFunc(ctx, func() {
		if leading.Load() {
			<-runDone
		}
		leCancel()
	})
	defer stop()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: le.Name, ReleaseOnCancel: true,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				leading.Store(true)
				defer close(runDone)
				logger.Info("Holding the Lease; starting", "lease", klog.KRef(le.Namespace, le.Name), "identity", le.Identity)
				runCtx, cancel := context.WithCancel(lctx)
				defer cancel()
				stopRun := context.AfterFunc(ctx, cancel)
				defer stopRun()
				runErr = c.run(runCtx)
			},
			OnStoppedLeading: func() {
				logger.Info("No longer holding the Lease", "lease", klog.KRef(le.Namespace, le.Name), "identity", le.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(leCtx)
	if leading.Load() {
		<-runDone
	}
	if ctx.Err() != nil {
		return nil
	}
	if runErr != nil {
		return runErr
	}
	return ErrLostLease
}

// worker state of one run (one leadership term).
type runner struct {
	c          *Controller
	queue      workqueue.TypedRateLimitingInterface[string]
	nodes      cache.SharedIndexInformer
	nodeCache  cache.MutationCache
	rollouts   cache.SharedIndexInformer
	roCache    cache.MutationCache
	configMaps cache.SharedIndexInformer
	recorder   record.EventRecorder
	// lastWrite is when each rollout's status was last written.
	lastWrite sync.Map
	// statuses caches what the nodes' status annotations decode to, by
	// annotation key and value: every plan reads every node, most of
	// them unchanged since the last plan, and most nodes of a fleet
	// publish the same value (decoded once for all of them). At most
	// maxStatusValues; full, it starts over. badStatuses are the values
	// that did not decode, by node name and key (the error names the
	// node).
	statusMu    sync.Mutex
	statuses    map[statusValue]*nodeapi.ConfigStatus
	badStatuses map[string]map[string]parsedStatus
	// memo remembers decoded claims and assignments across plans.
	memo plan.Memo
	// routes say which rollouts a Node event concerns, by rollout key.
	routeMu sync.RWMutex
	routes  map[string]route
	// gates runs the health gates of spec.analysis (analysis.go).
	gates *analyzer
	// pace spaces the plans of each rollout (pacing.go).
	pace pacer
	// budgets reads the PodDisruptionBudgets and pods (disruption.go).
	budgets *budgets
}

func (c *Controller) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	o := c.opts
	c.running.Store(true)
	defer func() {
		c.synced.Store(false)
		c.running.Store(false)
	}()
	factory := informers.NewSharedInformerFactoryWithOptions(o.Client, o.Resync,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = o.NodeLabelSelector }))
	nodes := factory.Core().V1().Nodes().Informer()
	// Cache what is read of a Node, not the Node: a real one is several
	// KiB (images, managedFields), and the cache holds the whole fleet.
	if err := nodes.SetTransform(CachedNode); err != nil {
		return fmt.Errorf("Node informer: %w", err)
	}
	cmFactory := informers.NewSharedInformerFactoryWithOptions(o.Client, o.Resync, informers.WithNamespace(o.Namespace))
	configMaps := cmFactory.Core().V1().ConfigMaps().Informer()
	// Only the keys matter: drop the data from the cache.
	if err := configMaps.SetTransform(stripConfigMapData); err != nil {
		return fmt.Errorf("ConfigMap informer: %w", err)
	}
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.Dynamic, o.Resync, o.Namespace, nil)
	rollouts := dynFactory.ForResource(v1alpha1.GroupVersionResource()).Informer()

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(o.EventSink)
	defer broadcaster.Shutdown()

	r := &runner{
		c: c,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "configrollouts"}),
		nodes:      nodes,
		rollouts:   rollouts,
		configMaps: configMaps,
		recorder:   broadcaster.NewRecorder(c.scheme, corev1.EventSource{Component: "dynconfig-rollout"}),
		routes:     map[string]route{},
	}
	r.gates = newAnalyzer(o.Client, o.Clock, r.queue.Add)
	r.nodeCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, nodes.GetStore(),
		cache.MutationCacheOptions{TTL: 10 * time.Minute, MaxCacheSize: 100000})
	r.roCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, rollouts.GetStore(),
		cache.MutationCacheOptions{TTL: 10 * time.Minute, MaxCacheSize: 10000})
	defer r.queue.ShutDown()

	if _, err := rollouts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.roCache.OnAddOrUpdate(obj.(runtime.Object)); r.setRoute(obj); r.enqueue(obj) },
		UpdateFunc: func(_, obj any) {
			r.roCache.OnAddOrUpdate(obj.(runtime.Object))
			r.setRoute(obj)
			// A rollout that ends (or finishes reverting) may let a
			// refused one start: plan them all (they are few).
			r.enqueueAll()
		},
		DeleteFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				r.roCache.OnDelete(u)
				r.dropRoute(u.GetNamespace(), u.GetName())
				r.lastWrite.Delete(u.GetNamespace() + "/" + u.GetName())
				r.gates.forget(u.GetNamespace() + "/" + u.GetName())
				c.metrics.forget(u.GetNamespace(), u.GetName())
			}
			r.enqueueAll() // a deleted rollout may have blocked another
		},
	}); err != nil {
		return err
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			r.nodeCache.OnAddOrUpdate(obj.(runtime.Object))
			if n, ok := obj.(*nodeFacts); ok {
				r.enqueueForNode(&n.ObjectMeta)
			}
		},
		UpdateFunc: func(old, obj any) {
			r.nodeCache.OnAddOrUpdate(obj.(runtime.Object))
			on, nn := old.(*nodeFacts), obj.(*nodeFacts)
			if !maps.Equal(on.Annotations, nn.Annotations) || !maps.Equal(on.Labels, nn.Labels) {
				r.enqueueForNode(&on.ObjectMeta, &nn.ObjectMeta)
			}
			if !sameConditions(on.Conditions, nn.Conditions) {
				r.gates.nodeChanged(on.node(), nn.node())
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*nodeFacts); ok {
				r.nodeCache.OnDelete(n)
				r.forgetStatus(n.Name)
				r.enqueueForNode(&n.ObjectMeta)
			}
		},
	}); err != nil {
		return err
	}
	cmHandler := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			r.enqueueFor(cm.Namespace, cm.Name)
		}
	}
	if _, err := configMaps.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: cmHandler, UpdateFunc: func(_, obj any) { cmHandler(obj) }, DeleteFunc: cmHandler,
	}); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	cmFactory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cmFactory.Shutdown()
	defer dynFactory.Shutdown()
	stopBudgets, err := r.startBudgets(ctx)
	if err != nil {
		return err
	}
	defer stopBudgets()
	if !r.waitForSync(ctx, nodes.HasSynced, configMaps.HasSynced, rollouts.HasSynced) {
		return nil
	}
	c.synced.Store(true)
	logger.Info("Rollout controller running", "workers", o.Workers, "namespace", o.Namespace)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() { wait.UntilWithContext(ctx, r.work, time.Second) })
	}
	wg.Go(func() { r.gates.run(ctx) })
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
	return nil
}

// waitForSync waits for the informers until ctx ends (false). Every
// SyncPatience it asks the API server why they have not synced and says
// what to do: the CRD is not installed, or the controller's identity may
// not list what it must (client-go's reflector only logs the raw error,
// and retries).
func (r *runner) waitForSync(ctx context.Context, synced ...cache.InformerSynced) bool {
	logger := klog.FromContext(ctx)
	for {
		waitCtx, cancel := context.WithTimeout(ctx, r.c.opts.SyncPatience)
		ok := cache.WaitForCacheSync(waitCtx.Done(), synced...)
		cancel()
		switch {
		case ok:
			return true
		case ctx.Err() != nil:
			return false
		}
		o := r.c.opts
		_, err := o.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(o.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		switch {
		case apierrors.IsNotFound(err):
			logger.Error(err, "ConfigRollouts are not served: the CRD is not installed; waiting for it",
				"crd", "configrollouts.dynconfig.io", "install", "kubectl apply -f deploy/rollout/dynconfig.io_configrollouts.yaml")
		case apierrors.IsForbidden(err):
			logger.Error(err, "This identity may not list ConfigRollouts; waiting for its grants",
				"namespace", o.Namespace, "grants", "deploy/overlays/one-namespace/rbac.yaml with --namespace (or deploy/overlays/cluster-wide/rbac.yaml)")
		case err != nil:
			logger.Error(err, "Listing ConfigRollouts failed; waiting")
		default:
			for _, probe := range []struct {
				what string
				list func() error
			}{
				{"Nodes", func() error {
					_, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: o.NodeLabelSelector})
					return err
				}},
				{"ConfigMaps", func() error {
					_, err := o.Client.CoreV1().ConfigMaps(o.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
					return err
				}},
			} {
				if err := probe.list(); err != nil {
					logger.Error(err, "Listing "+probe.what+" failed; waiting", "namespace", o.Namespace)
				}
			}
		}
	}
}

// stripConfigMapData keeps a ConfigMap's keys, not its values.
func stripConfigMapData(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID, ResourceVersion: cm.ResourceVersion,
	}, Immutable: cm.Immutable}
	if len(cm.Data) > 0 {
		out.Data = make(map[string]string, len(cm.Data))
		for k := range cm.Data {
			out.Data[k] = ""
		}
	}
	return out, nil
}
