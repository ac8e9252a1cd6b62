// The Controller: its Options, New, and Run with leader election.

package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

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
	// records on (a node reported trial or promotion, or nodes of the
	// current step are to be assigned, and nothing is to be reverted or
	// recorded but their Assigned Event) may wait to be written together
	// with the next one; the assignments wait with it (quiet). Default 2
	// seconds. Every other change is written at once.
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
		opts.StatusInterval = defaultStatusInterval
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
