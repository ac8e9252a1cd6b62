package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// ExternalRole is the part a Controller plays for a component that runs in
// another process than the Controller (Options.External).
type ExternalRole int

const (
	// PreStart runs right before every start of the component (systemd
	// ExecStartPre=): it records the start, decides, hands the chosen
	// config to the component (External.Apply) and exits. It never reads
	// the cluster.
	PreStart ExternalRole = iota + 1
	// Follow runs beside the component for as long as the node runs
	// (RunExternal): it follows the assignment, checkpoints it, restarts
	// the component (External.Restarter) for the pre-start role to apply
	// it, promotes it once the component was healthy for a trial, and
	// reports ConfigOK and the ConfigStatus.
	Follow
)

// String names the role as the command line does.
func (r ExternalRole) String() string {
	switch r {
	case PreStart:
		return "prestart"
	case Follow:
		return "run"
	}
	return fmt.Sprintf("ExternalRole(%d)", int(r))
}

// Restarter restarts the component's process, e.g. a systemd unit over
// D-Bus. Restart returns once the restart was requested (it need not wait
// for the component to be up again); an error means it was not.
type Restarter interface {
	Restart(ctx context.Context) error
}

// RestarterFunc adapts a function to a Restarter.
type RestarterFunc func(ctx context.Context) error

// Restart calls f.
func (f RestarterFunc) Restart(ctx context.Context) error { return f(ctx) }

// Chosen is what the pre-start role hands to the component: the config it
// must start with.
type Chosen struct {
	// Source is the config to run; nil means the local config.
	Source *corev1.NodeConfigSource
	// Document is Source's payload, named after its ConfigMap and key; nil
	// for the local config.
	Document *Document
	// UsingLastKnownGood is true when Source is the rollback target, not
	// the config assigned.
	UsingLastKnownGood bool
}

// External makes a Controller manage a component whose process is another
// one: the stock kubelet, which dynconfig cannot link into, configured by a
// file that dynconfig writes (package kubeletdropin). The lifecycle stays
// the one of the in-process Controller, split over two roles that share the
// state dir:
//
//   - PreStart runs before every start of the component. It takes the state
//     dir, records the start (the crash-loop rule counts the component's
//     starts, not the Controller's), decides with lkg.Decide from the state
//     dir alone (it never reads the cluster, so a reboot with the API server
//     down decides the same way), records current's first run, calls Apply
//     with the chosen config, and releases the dir.
//   - Follow runs beside the component (RunExternal). It never records a
//     start. It decides from the state dir exactly as PreStart did, so it
//     knows what the component runs; reports it; follows the assignment,
//     checkpoints a new config and makes it current; and when the config to
//     run is not the one running, it calls Restarter, waits for the
//     pre-start role to record the component's next start, and starts over.
//     A config that is current but never ran (current's first run is not
//     recorded: a Follow crashed between setting current and restarting)
//     is also restarted for. It promotes current once the component ran it
//     for a full trial and Healthy passed on it, and starts over whenever
//     the pre-start role recorded a start it did not ask for (a crash).
//
// # Sharing the state dir
//
// The state dir's lock (checkpoint.Open: an exclusive, non-blocking flock)
// stays the one mutual exclusion; no new file or lock is added. Neither
// role holds it while it waits: PreStart holds it from its Open to its exit
// (a few milliseconds of file work; it is bounded by its caller's context),
// Follow only for one step at a time (its startup decision, one sync, one
// promotion, one garbage collection) and never across a restart, a wait
// or a health probe. A role that finds the dir locked tries again every
// 50 ms: PreStart gives up after LockTimeout, and its caller then lets the
// component start on the file it already has; Follow waits until its
// context ends, logging every LockTimeout. Since flocks die with their
// process, a crash of either role frees the dir at once; since every write
// is atomic and durable (package checkpoint), a crash loses at most the
// step in progress, which the next step or start does again: a start
// recorded before a crash stays counted, and a current set before a crash
// is restarted for by the next Follow.
type External struct {
	// Role is the part this Controller plays. Required.
	Role ExternalRole
	// Apply (PreStart, required) hands the chosen config to the component,
	// e.g. writes or removes its drop-in file, atomically and durably. It is
	// called with the state dir held, before current's first run is
	// recorded: an error means the component does not run the config, and
	// Bootstrap returns the error.
	Apply func(ctx context.Context, chosen Chosen) error
	// Restarter (Follow, required) restarts the component so that its
	// pre-start role applies the new decision.
	Restarter Restarter
	// Healthy (Follow) tells whether the component runs well now. Once it
	// returns nil after a start, RunExternal calls MarkHealthy; with it set
	// a config is promoted only after its trial and a nil Healthy
	// (RequireHealthy is set for you).
	Healthy func(ctx context.Context) error
	// PromotionHeld (Follow), when set, is asked once current's trial is
	// over and everything else lets it be promoted: true holds the
	// promotion, and it is asked again every PollInterval. The stock
	// kubelet's run role holds while a rollout with health gates has not
	// passed the Node yet (nodeapi.Claim.PromotionHeld), so that a config
	// the fleet rejects never becomes the node's last-known-good. Holding
	// never reverts anything and never marks anything bad.
	PromotionHeld func(ctx context.Context) bool
	// BeforeRestart (Follow), when set, is called before the Restarter each
	// time the component is to restart onto another config (plan says
	// which), with the state dir held (a pre-start role that runs meanwhile
	// gives up waiting for it and starts the component on what it ran),
	// and with a context that neither the sync step's deadline nor a
	// shutdown ends: it bounds its own time. For a newly assigned config
	// (plan.Rollback false) its error holds the restart:
	//   - an *lkg.ConfigError refuses the config without trying it: current
	//     is marked bad and rolled back, as a config that fails validation
	//     is (the error, which should name the field, is the mark's cause);
	//   - any other error means the config cannot be applied here now (the
	//     stock kubelet's Node could not be drained for it): current goes
	//     back to the config the component runs, nothing is marked bad,
	//     ConfigOK is False with the error as its reason, the ConfigStatus
	//     names the assignment with phase nodeapi.PhaseNotApplied, and the
	//     assignment is not tried again until it changes or RunExternal
	//     starts again.
	// For a rollback, and for a restart that finishes one a crash of the run
	// role interrupted (plan.Rollback true), the error is logged and the
	// restart goes ahead: nothing holds a rollback back.
	BeforeRestart func(ctx context.Context, plan RestartPlan) error
	// Settled (Follow), when set, is called once the component runs its
	// last-known-good config (or the local config with no last-known-good)
	// and Healthy passed on it: after a promotion, and after a start on the
	// rollback target once healthy. It is called from RunExternal's poll,
	// never with the state dir held; an error is logged and it is called
	// again at the next poll, nil ends the calls until the component
	// starts again. The stock kubelet's run role uncordons the Node there
	// if it cordoned it.
	Settled func(ctx context.Context) error
	// LockTimeout bounds PreStart's wait for the state dir, and is how often
	// Follow logs that it is still waiting. Default: 10s.
	LockTimeout time.Duration
	// PollInterval is how often Follow looks for a start of the component
	// and probes Healthy. Default: 2s.
	PollInterval time.Duration
	// StartTimeout is how long Follow waits, after a restart, for the
	// pre-start role to record the component's next start before it
	// decides again (and restarts again if the component still does not
	// run the config). Default: 2m.
	StartTimeout time.Duration

	// notApplied is RunExternal's memory of the assignment BeforeRestart
	// held: it outlives the Controllers of one RunExternal.
	notApplied *notAppliedMemo
}

// RestartPlan is what Follow is about to restart the component for
// (External.BeforeRestart).
type RestartPlan struct {
	// To is the config the component is to run after the restart, with its
	// payload (nil Source: the local config).
	To Chosen
	// Rollback is true when To is not a config newly assigned but the
	// rollback target, or when the restart finishes one that a crash of
	// the run role interrupted: BeforeRestart cannot hold it.
	Rollback bool
}

// completeExternal validates and defaults Options.External.
func (o *Options[T]) completeExternal() []error {
	e := o.External
	if e == nil {
		return nil
	}
	var errs []error
	switch e.Role {
	case PreStart:
		if e.Apply == nil {
			errs = append(errs, errors.New("Options.External.Apply is required for the pre-start role"))
		}
	case Follow:
		if e.Restarter == nil || isNil(e.Restarter) {
			errs = append(errs, errors.New("Options.External.Restarter is required for the run role"))
		}
		if o.Reload != nil {
			errs = append(errs, errors.New("Options.Reload cannot be used with Options.External: the component is another process"))
		}
		if e.Healthy != nil {
			o.RequireHealthy = true
		}
		if e.notApplied == nil {
			e.notApplied = &notAppliedMemo{}
		}
	default:
		errs = append(errs, fmt.Errorf("Options.External.Role %v is not PreStart or Follow", e.Role))
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"LockTimeout", &e.LockTimeout, 10 * time.Second}, {"PollInterval", &e.PollInterval, 2 * time.Second}, {"StartTimeout", &e.StartTimeout, 2 * time.Minute}} {
		switch {
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("Options.External.%s must not be negative, got %v", d.name, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	return errs
}

func (c *Controller[T]) role() ExternalRole {
	if c.opts.External == nil {
		return 0
	}
	return c.opts.External.Role
}

// decidesOffline reports whether Bootstrap decides from the state dir
// alone: both external roles do, unless remote config is disabled (then
// current and last-known-good are reset to local as usual).
func (c *Controller[T]) decidesOffline() bool {
	return c.opts.External != nil && !c.opts.DisableRemoteConfig
}

// openStore opens the state dir. An external role retries while the other
// role holds it: PreStart for at most LockTimeout, Follow until ctx ends.
func (c *Controller[T]) openStore(ctx context.Context) (*checkpoint.Store, error) {
	logger := klog.FromContext(ctx)
	opts := checkpoint.Options{
		Dir: c.opts.StateDir, ComponentVersion: c.opts.ComponentVersion, Clock: c.opts.Clock, Logger: logger,
	}
	s, err := checkpoint.Open(opts)
	if c.opts.External == nil || !errors.Is(err, checkpoint.ErrLocked) {
		return s, err
	}
	start := time.Now()
	lastLog := start
	// The real clock: this waits for another process, not for the
	// lifecycle's time.
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, false, func(context.Context) (bool, error) {
		s, err = checkpoint.Open(opts)
		if !errors.Is(err, checkpoint.ErrLocked) {
			return true, err
		}
		waited := time.Since(start)
		if c.role() == PreStart && waited >= c.opts.External.LockTimeout {
			return false, fmt.Errorf("waited %v for the state dir: %w", waited.Round(time.Millisecond), err)
		}
		if time.Since(lastLog) >= c.opts.External.LockTimeout {
			lastLog = time.Now()
			logger.Info("Still waiting for the state dir's lock", "waited", waited.Round(time.Second))
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// recordStartup records a start of the component and returns the
// startups. Follow is not the component: it only reads them.
func (c *Controller[T]) recordStartup() ([]time.Time, error) {
	if c.role() == Follow {
		return c.store.Startups()
	}
	return c.store.RecordStartup()
}

// handOver runs after the startup decision d, before it is recorded as
// running. PreStart gives the config to the component. Follow checks that
// the component runs d's config: when d runs current and current's first
// run was never recorded, no pre-start role ever started the component on
// it, so Follow restarts the component and Bootstrap returns errRestarted.
func (c *Controller[T]) handOver(ctx context.Context, v *view, d lkg.Decision) error {
	switch c.role() {
	case PreStart:
		ch, err := c.chosen(ctx, v, d.Run, d.UsingLastKnownGood)
		if err != nil {
			return fmt.Errorf("dynconfig: loading the config to hand over: %w", err)
		}
		if err := c.opts.External.Apply(ctx, ch); err != nil {
			return fmt.Errorf("dynconfig: handing the config to the component: %w", err)
		}
	case Follow:
		if d.Run != nil && !d.UsingLastKnownGood && v.current.FirstRun.IsZero() {
			klog.FromContext(ctx).Info("Current config never ran; restarting the component", "current", describe(d.Run))
			c.holdRestart(ctx, v, d, v.current, true)
			return c.restart(ctx)
		}
	}
	return nil
}

// releaseState closes the state dir after Bootstrap in an external role:
// the other role must be able to take it while this one waits.
func (c *Controller[T]) releaseState(ctx context.Context) {
	if c.opts.External == nil || c.store == nil {
		return
	}
	if err := c.store.Close(); err != nil {
		klog.FromContext(ctx).Error(err, "Releasing the state dir")
	}
}

// locked runs one step of Run. In the Follow role it takes the state dir
// for the step and releases it after; if the dir cannot be taken (ctx
// ended), the step runs on the closed store and fails as a write failure
// does, which every step handles without spinning.
func (c *Controller[T]) locked(ctx context.Context, step func(context.Context)) {
	if c.opts.External == nil {
		step(ctx)
		return
	}
	if s, err := c.openStore(ctx); err == nil {
		c.store = s
	} else {
		klog.FromContext(ctx).Error(err, "Taking the state dir")
	}
	defer c.releaseState(ctx)
	step(ctx)
}

// syncLocked is sync under locked, bounded by StartupSyncTimeout.
func (c *Controller[T]) syncLocked(ctx context.Context) error {
	// Bounded, so that a slow API server cannot keep the pre-start role
	// out of the state dir for long; a timeout is a failed sync.
	sctx, cancel := context.WithTimeout(ctx, c.opts.StartupSyncTimeout)
	defer cancel()
	var err error
	c.locked(sctx, func(ctx context.Context) { err = c.sync(ctx) })
	return err
}

// restartExternal releases the state dir, for the pre-start role to take
// it, and asks the Restarter to restart the component. A failed request is
// logged: RunExternal sees no new start and decides again.
func (c *Controller[T]) restartExternal(ctx context.Context) error {
	c.setRestarting(true)
	c.releaseState(ctx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.External.StartTimeout)
	defer cancel()
	if err := c.opts.External.Restarter.Restart(rctx); err != nil {
		klog.FromContext(ctx).Error(err, "Restarting the component")
	}
	return errRestarted
}

// RunExternal runs the Follow role of opts (Options.External.Role must be
// Follow) until ctx ends: it creates a Controller, bootstraps it (deciding
// what the component runs, reporting it), runs it, and starts over with a
// new Controller each time the component restarted, whether the Controller
// restarted it for a new config or the pre-start role recorded a start
// Follow did not ask for (a crash, a reboot, an operator's restart). It
// probes External.Healthy after each start until it passes, and then calls
// MarkHealthy. It returns nil when ctx ends, or the error of New for
// invalid options; other failures are logged and retried.
func RunExternal[T any](ctx context.Context, opts Options[T]) error {
	logger := klog.FromContext(ctx)
	if opts.External == nil || opts.External.Role != Follow {
		return errors.New("dynconfig: RunExternal needs Options.External with Role Follow")
	}
	ext := *opts.External
	opts.External = &ext
	// One Metrics for every Controller of the loop: a Registerer accepts
	// each metric once.
	if opts.Metrics == nil && opts.Registerer != nil {
		name := opts.Component
		if name == "" {
			name = nodeapi.DefaultComponent
		}
		m, err := status.NewMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"component": name}, opts.Registerer))
		if err != nil {
			return fmt.Errorf("dynconfig: Options.Registerer: %w", err)
		}
		opts.Metrics, opts.Registerer = m, nil
	}
	restarter := ext.Restarter
	var restartAsked time.Time
	ext.Restarter = RestarterFunc(func(ctx context.Context) error {
		restartAsked = time.Now()
		return restarter.Restart(ctx)
	})
	for ctx.Err() == nil {
		c, err := New(opts)
		if err != nil {
			return err
		}
		restartAsked = time.Time{}
		seen := lastStartup(c.opts.StateDir, c.opts.ComponentVersion)
		if _, err := c.Bootstrap(ctx); err != nil && !errors.Is(err, errRestarted) {
			_ = c.Close()
			logger.Error(err, "Deciding what the component runs; trying again", "after", ext.StartTimeout)
			sleep(ctx, ext.StartTimeout)
			continue
		}
		if restartAsked.IsZero() {
			runFollow(ctx, c, seen)
		}
		_ = c.Close()
		if !restartAsked.IsZero() {
			waitForStart(ctx, c.opts, restartAsked)
		}
	}
	return nil
}

// runFollow runs c until ctx ends, c restarts the component, or the
// component started again on its own: a start after seen was recorded. It
// probes Healthy until it passes.
func runFollow[T any](ctx context.Context, c *Controller[T], seen time.Time) {
	logger := klog.FromContext(ctx)
	ext := c.opts.External
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		healthy := ext.Healthy == nil
		settled := ext.Settled == nil
		t := time.NewTicker(ext.PollInterval)
		defer t.Stop()
		for {
			if !healthy {
				pctx, pcancel := context.WithTimeout(rctx, ext.PollInterval)
				err := ext.Healthy(pctx)
				pcancel()
				if err == nil {
					healthy = true
					logger.Info("Component healthy")
					c.MarkHealthy()
				} else {
					logger.V(2).Info("Component not healthy yet", "err", err)
				}
			}
			if healthy && !settled {
				settled = c.settle(rctx)
			}
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			if last := lastStartup(c.opts.StateDir, c.opts.ComponentVersion); last.After(seen) {
				logger.Info("The component started again; deciding again", "start", last)
				cancel()
				return
			}
		}
	}()
	if err := c.Run(rctx); err != nil {
		logger.Error(err, "Following the assignment")
	}
	cancel()
	<-done
}

// settle calls External.Settled when the component runs its
// last-known-good and no restart has begun (BeforeRestart drains before
// a restart: Settled, which undoes a drain, must not run under it or
// after it until the component started again). It reports whether
// Settled was called and succeeded.
func (c *Controller[T]) settle(ctx context.Context) bool {
	c.settleMu.Lock()
	defer c.settleMu.Unlock()
	c.mu.Lock()
	restarting := c.restarting
	c.mu.Unlock()
	if restarting {
		return false
	}
	if s := c.snapshot(); s.running.Since.IsZero() || !lkg.Same(s.running.Source, s.lastKnownGood) {
		return false
	}
	if err := c.opts.External.Settled(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "The component runs its last-known-good healthily; Settled failed, trying again")
		return false
	}
	return true
}

// waitForStart waits until a start of the component after asked is
// recorded, for at most StartTimeout.
func waitForStart[T any](ctx context.Context, opts Options[T], asked time.Time) {
	ext := opts.External
	wctx, cancel := context.WithTimeout(ctx, ext.StartTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, ext.PollInterval/4+time.Millisecond, true, func(context.Context) (bool, error) {
		return !lastStartup(opts.StateDir, opts.ComponentVersion).Before(asked), nil
	})
	if err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(nil, "The component did not record a start after the restart; is its pre-start role installed (systemd ExecStartPre)? Deciding again",
			"waited", ext.StartTimeout)
	}
}

// lastStartup returns the latest start recorded in dir for
// componentVersion, read without the lock (checkpoint.Inspect); zero when
// none can be read.
func lastStartup(dir, componentVersion string) time.Time {
	snap, err := checkpoint.Inspect(dir)
	if err != nil {
		return time.Time{}
	}
	ts, ok := snap.Version(componentVersion)
	if !ok {
		return time.Time{}
	}
	var last time.Time
	for _, t := range ts.Startups {
		if t.After(last) {
			last = t
		}
	}
	return last
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
