package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/status"
)

// Controller runs the config lifecycle of one component on one node:
// Bootstrap picks the config to start with, Run follows the assignment.
// Create it with New.
type Controller[T any] struct {
	opts Options[T]

	store    *checkpoint.Store
	startups *crashloop.Tracker
	bad      *lkg.Tracker

	// bootLoads holds the checkpoints read during Bootstrap, so the trial
	// lookup, the startup sync and the decision read each one once. Nil
	// outside Bootstrap.
	bootLoads map[checkpoint.Key]*corev1.ConfigMap

	mu        sync.Mutex
	state     state
	published *status.Report // the last report the Reporter accepted
	healthy   chan struct{}  // closed by MarkHealthy
	markOnce  sync.Once
}

// state is what the last decision left behind, for Run.
type state struct {
	current       checkpoint.Pointer
	lastKnownGood *corev1.NodeConfigSource
	decision      lkg.Decision
	trial         components.Trial
	report        status.Report
	syncFailed    bool // the startup decision was made without a clear assignment
	promoted      bool
}

// New validates opts and returns a Controller. Nothing is read or locked
// until Bootstrap.
func New[T any](opts Options[T]) (*Controller[T], error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	return &Controller[T]{opts: opts, healthy: make(chan struct{})}, nil
}

// MarkHealthy tells the Controller that the component runs well on its
// config. With Options.RequireHealthy, current becomes last-known-good only
// after this call and the trial period. Safe to call any number of times,
// from any goroutine.
func (c *Controller[T]) MarkHealthy() { c.markOnce.Do(func() { close(c.healthy) }) }

func (c *Controller[T]) isHealthy() bool {
	if !c.opts.RequireHealthy {
		return true
	}
	select {
	case <-c.healthy:
		return true
	default:
		return false
	}
}

// Close releases the state dir. The Controller cannot be used afterwards.
func (c *Controller[T]) Close() error {
	if c.store == nil {
		return nil
	}
	return c.store.Close()
}

func (c *Controller[T]) remoteEnabled() bool {
	return c.opts.Remote != nil && !c.opts.DisableRemoteConfig
}

// Bootstrap decides which config the component starts with, in this order:
// take the state-dir lock; build and validate the local config (an invalid
// local config is an error: there is nothing to fall back to); read the
// assignment (bounded by StartupSyncTimeout) and checkpoint it if it is
// new; record this startup; read the pointers and bad marks; load, decode
// and validate current, or roll back; report the ConfigOK condition; and
// return the config to run. Call it once, before Run.
func (c *Controller[T]) Bootstrap(ctx context.Context) (*T, error) {
	logger := klog.FromContext(ctx)
	if c.store != nil {
		return nil, errors.New("dynconfig: Bootstrap called twice")
	}
	store, err := checkpoint.Open(checkpoint.Options{
		Dir: c.opts.StateDir, ComponentVersion: c.opts.ComponentVersion, Clock: c.opts.Clock, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("dynconfig: %w", err)
	}
	c.store = store
	c.bootLoads = map[checkpoint.Key]*corev1.ConfigMap{}
	defer func() { c.bootLoads = nil }()
	c.startups, err = crashloop.New(crashloop.Options{Dir: store.TrackingDir(), Clock: c.opts.Clock})
	if err != nil {
		return nil, fmt.Errorf("dynconfig: %w", err)
	}
	c.bad, err = lkg.NewTracker(lkg.TrackerOptions{Dir: store.TrackingDir(), Clock: c.opts.Clock})
	if err != nil {
		return nil, fmt.Errorf("dynconfig: %w", err)
	}
	// The local config is the baseline last-known-good: it must be valid.
	if _, err := c.opts.Layers.Build(nil); err != nil {
		return nil, fmt.Errorf("dynconfig: invalid local config: %w", err)
	}

	// Record this startup before the assignment is read: a config adopted
	// by this process (assigned while the component was down) is judged by
	// the restarts that follow, like one adopted by a running process.
	c.recordStartup(ctx)
	var syncErr error
	if !c.remoteEnabled() {
		if err := c.resetToLocal(); err != nil {
			return nil, err
		}
	} else {
		syncErr = c.startupSync(ctx)
	}
	cfg, err := c.evaluate(ctx, syncErr)
	if err != nil {
		return nil, err
	}
	c.report(ctx)
	logger.Info("Config chosen", "status", c.state.report.Status, "message", c.state.report.Message, "reason", c.state.report.Reason)
	return cfg, nil
}

// resetToLocal points current and last-known-good at the local config.
func (c *Controller[T]) resetToLocal() error {
	for _, p := range []struct {
		get func() (checkpoint.Pointer, error)
		set func(*corev1.NodeConfigSource) error
	}{{c.store.Current, c.store.SetCurrent}, {c.store.LastKnownGood, c.store.SetLastKnownGood}} {
		ptr, err := p.get()
		if err == nil && ptr.Source == nil {
			continue
		}
		if err := p.set(nil); err != nil {
			return fmt.Errorf("dynconfig: %w", err)
		}
	}
	return nil
}

// startupSync reads the assignment and, when it names a config other than
// current, checkpoints it and makes it current. It returns the error that
// made the desired config unclear, if any.
func (c *Controller[T]) startupSync(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, c.opts.StartupSyncTimeout)
	defer cancel()
	a, err := c.opts.Remote.Assigned(sctx)
	if err != nil {
		return err
	}
	_, err = c.adopt(ctx, a.Source, a.ConfigMap)
	return err
}

// adopt checkpoints cm and makes src current when src differs from current
// (or its checkpoint is missing). It reports whether current changed.
func (c *Controller[T]) adopt(ctx context.Context, src *corev1.NodeConfigSource, cm *corev1.ConfigMap) (bool, error) {
	cur, err := c.store.Current()
	if err == nil && lkg.Key(cur.Source) == lkg.Key(src) {
		if src == nil {
			return false, nil
		}
		key, _ := checkpoint.KeyFromSource(src)
		if _, err := c.load(key); err == nil {
			return false, nil
		}
		// Same config, but its checkpoint is gone or damaged (failed loads
		// are not remembered): save it again without moving the trial clock.
		if _, err := c.store.Save(cm); err != nil {
			return false, fmt.Errorf("checkpoint %s: %w", key, err)
		}
		return false, nil
	}
	if src != nil {
		if _, err := c.store.Save(cm); err != nil {
			return false, fmt.Errorf("checkpoint ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	if err := c.store.SetCurrent(src); err != nil {
		return false, err
	}
	klog.FromContext(ctx).Info("New config assigned", "current", describe(src))
	return true, nil
}

// recordStartup appends this startup to the startups file, trimmed to the
// current config's threshold+1 entries.
func (c *Controller[T]) recordStartup(ctx context.Context) {
	logger := klog.FromContext(ctx)
	trial := c.opts.DefaultTrial
	if cur, err := c.store.Current(); err == nil {
		if key, ok := checkpoint.KeyFromSource(cur.Source); ok {
			if cm, err := c.load(key); err == nil {
				if t, err := components.TrialFromAnnotations(cm.Annotations, c.opts.DefaultTrial); err == nil {
					trial = t
				}
			}
		}
	}
	if err := c.startups.RecordStartup(trial.CrashLoopThreshold); err != nil {
		logger.Error(err, "Recording this startup")
	}
}

// load reads a checkpoint, once per Bootstrap. Callers only read the
// ConfigMap it returns.
func (c *Controller[T]) load(key checkpoint.Key) (*corev1.ConfigMap, error) {
	if cm, ok := c.bootLoads[key]; ok {
		return cm, nil
	}
	cm, err := c.store.Load(key)
	if err == nil && c.bootLoads != nil {
		c.bootLoads[key] = cm
	}
	return cm, err
}

// evaluate runs the startup decision over the state dir and applies it.
func (c *Controller[T]) evaluate(ctx context.Context, syncErr error) (*T, error) {
	logger := klog.FromContext(ctx)
	cur, err := c.store.Current()
	if err != nil {
		logger.Error(err, "Current pointer unreadable; using last-known-good")
		if syncErr == nil {
			syncErr = fmt.Errorf("current pointer unreadable: %w", err)
		}
		cur = checkpoint.Pointer{}
	}
	lkgPtr, err := c.store.LastKnownGood()
	if err != nil {
		logger.Error(err, "Last-known-good pointer unreadable; the local config is the rollback target")
		lkgPtr = checkpoint.Pointer{}
	}

	// Load current's checkpoint once: its annotations carry the trial
	// settings, and its payload is the config.
	trial := c.opts.DefaultTrial
	var curCM *corev1.ConfigMap
	var curLoadErr, trialErr error
	if key, ok := checkpoint.KeyFromSource(cur.Source); ok {
		curCM, curLoadErr = c.load(key)
		if curLoadErr == nil {
			if t, err := components.TrialFromAnnotations(curCM.Annotations, c.opts.DefaultTrial); err != nil {
				trialErr = err
			} else {
				trial = t
			}
		}
	}
	startups, err := c.startups.Startups()
	if err != nil {
		logger.Error(err, "Startups file unreadable; treated as empty")
	}
	now := c.opts.Clock.Now()
	in := lkg.Input{
		SyncError:     syncErr,
		Current:       cur.Source,
		LastKnownGood: lkgPtr.Source,
		CurrentCrashLooping: crashloop.CrashLooping(crashloop.Input{
			Startups: startups, CurrentSetTime: cur.SetTime, Now: now, Trial: trial.Duration, Threshold: trial.CrashLoopThreshold,
		}),
		TrialPassed: !cur.SetTime.IsZero() && now.Sub(cur.SetTime) > trial.Duration && c.isHealthy(),
	}
	if key := lkg.Key(cur.Source); key != "" {
		e, ok, err := c.bad.Entry(key)
		if err != nil {
			logger.Error(err, "Bad-config file unreadable; treated as empty")
		}
		if ok {
			in.CurrentBad = &e
			in.LastKnownGoodCrashLooping = crashloop.CrashLooping(crashloop.Input{
				Startups: startups, CurrentSetTime: e.Time, Now: now, Trial: trial.Duration, Threshold: trial.CrashLoopThreshold,
			})
		}
	}
	var curCfg, lkgCfg *T
	in.LoadCurrent = func() error {
		if curLoadErr != nil {
			return &lkg.ConfigError{Stage: lkg.StageLoad, Err: curLoadErr}
		}
		if trialErr != nil {
			return &lkg.ConfigError{Stage: lkg.StageValidate, Err: trialErr}
		}
		cfg, err := c.build(cur.Source, curCM)
		curCfg = cfg
		return err
	}
	in.LoadLastKnownGood = func() error {
		key, _ := checkpoint.KeyFromSource(lkgPtr.Source)
		cm, err := c.load(key)
		if err != nil {
			return &lkg.ConfigError{Stage: lkg.StageLoad, Err: err}
		}
		cfg, err := c.build(lkgPtr.Source, cm)
		lkgCfg = cfg
		return err
	}
	d, err := lkg.Decide(in)
	if err != nil {
		return nil, fmt.Errorf("dynconfig: %w", err)
	}
	if err := c.apply(ctx, d, cur, lkgPtr); err != nil {
		return nil, err
	}

	report := reportFor(d, cur.Source, lkgPtr.Source, c.local())
	c.observe(ctx, d, cur.Source, lkgPtr.Source, report)
	c.mu.Lock()
	c.state = state{current: cur, lastKnownGood: lkgPtr.Source, decision: d, trial: trial, report: report,
		syncFailed: syncErr != nil, promoted: d.PromoteCurrent || (d.Run != nil && lkg.Key(d.Run) == lkg.Key(lkgPtr.Source))}
	c.mu.Unlock()

	switch {
	case d.Run == nil:
		return c.opts.Layers.Build(nil)
	case lkg.Key(d.Run) == lkg.Key(cur.Source) && curCfg != nil:
		return curCfg, nil
	default:
		return lkgCfg, nil
	}
}

// observe exports a decision: metrics always, a rollback event when a
// config has just been found bad.
func (c *Controller[T]) observe(ctx context.Context, d lkg.Decision, cur, lastKnownGood *corev1.NodeConfigSource, r status.Report) {
	m := c.opts.Metrics
	m.SetAssigned(cur)
	m.SetActive(d.Run)
	switch {
	case d.PromoteCurrent:
		m.SetLastKnownGood(cur)
	case d.ResetLastKnownGood:
		m.SetLastKnownGood(nil)
	default:
		m.SetLastKnownGood(lastKnownGood)
	}
	if d.Problem != lkg.ProblemNone {
		m.IncError(d.Problem.String())
	}
	if d.MarkBad {
		m.IncRollback()
		if c.opts.Events != nil {
			if err := c.opts.Events.RecordRolledBack(ctx, r.Reason+"; "+r.Message); err != nil {
				klog.FromContext(ctx).Error(err, "Recording the rollback event")
			}
		}
	}
}

// apply carries out a decision's side effects on the state dir.
func (c *Controller[T]) apply(ctx context.Context, d lkg.Decision, cur checkpoint.Pointer, lkgPtr checkpoint.Pointer) error {
	logger := klog.FromContext(ctx)
	if d.Cause != nil {
		logger.Error(d.Cause, "Not running current config", "problem", d.Problem.String(), "current", describe(cur.Source))
	}
	if d.LastKnownGoodUnusable != nil {
		logger.Error(d.LastKnownGoodUnusable, "Last-known-good config unusable; running the local config", "lastKnownGood", describe(lkgPtr.Source))
	}
	if d.MarkBad {
		if err := c.bad.MarkBad(lkg.Key(cur.Source), problemReason(d, cur.Source)); err != nil {
			var corrupt *lkg.CorruptError
			if !errors.As(err, &corrupt) {
				return fmt.Errorf("dynconfig: mark %s bad: %w", describe(cur.Source), err)
			}
			logger.Error(err, "Replaced a corrupt bad-config file")
		}
	}
	if d.Problem == lkg.ProblemLoadFailed {
		// A damaged checkpoint is not the config's fault: drop it so the next
		// sync downloads it again.
		if key, ok := checkpoint.KeyFromSource(cur.Source); ok {
			var corrupt *checkpoint.CorruptError
			if _, err := c.store.Load(key); errors.As(err, &corrupt) {
				if err := c.store.Remove(key); err != nil {
					logger.Error(err, "Removing a corrupt checkpoint")
				}
			}
		}
	}
	switch {
	case d.PromoteCurrent:
		if err := c.store.SetLastKnownGood(cur.Source); err != nil {
			return fmt.Errorf("dynconfig: promote %s: %w", describe(cur.Source), err)
		}
		logger.Info("Current config promoted to last-known-good", "config", describe(cur.Source))
	case d.ResetLastKnownGood:
		if err := c.store.SetLastKnownGood(nil); err != nil {
			return fmt.Errorf("dynconfig: reset last-known-good: %w", err)
		}
		logger.Info("Last-known-good reset to the local config")
	}
	if removed, err := c.store.GC(); err != nil {
		logger.Error(err, "Checkpoint GC")
	} else if len(removed) > 0 {
		logger.V(2).Info("Removed unreferenced checkpoints", "keys", removed)
	}
	return nil
}

// build decodes the payload of cm named by src and merges it with the
// instance layers, classifying failures for lkg.Decide.
func (c *Controller[T]) build(src *corev1.NodeConfigSource, cm *corev1.ConfigMap) (*T, error) {
	key := src.ConfigMap.KubeletConfigKey
	if key == "" {
		key = c.opts.Profile.PayloadKey()
	}
	payload, ok := cm.Data[key]
	if !ok {
		return nil, &lkg.ConfigError{Stage: lkg.StageDecode, Err: fmt.Errorf("configmap %s/%s has no key %q", cm.Namespace, cm.Name, key)}
	}
	cfg, err := c.opts.Layers.Build(&Document{
		Name: fmt.Sprintf("configmap %s/%s key %s", cm.Namespace, cm.Name, key),
		Data: []byte(payload),
	})
	if err == nil {
		return cfg, nil
	}
	var ce *lkg.ConfigError
	if errors.As(err, &ce) {
		return nil, err
	}
	return nil, &lkg.ConfigError{Stage: lkg.StageValidate, Err: err}
}

func (c *Controller[T]) local() status.Local {
	if c.opts.Layers.HasInitConfig() {
		return status.LocalInit
	}
	return status.LocalDefault
}

// report publishes the current state's condition; failures are logged
// (Run reports again on its next sync).
func (c *Controller[T]) report(ctx context.Context) {
	c.mu.Lock()
	r := c.state.report
	c.mu.Unlock()
	c.publish(ctx, r)
}

// publish sends r unless it is what the last successful publish sent: the
// heartbeat moves when the component (re)starts or the condition changes,
// not on every resync, which keeps a node's requests per change low.
func (c *Controller[T]) publish(ctx context.Context, r status.Report) {
	if c.opts.Reporter == nil {
		return
	}
	c.mu.Lock()
	same := c.published != nil && *c.published == r
	c.mu.Unlock()
	if same {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.StartupSyncTimeout)
	defer cancel()
	if err := c.opts.Reporter.ReportConfigOK(rctx, r); err != nil {
		klog.FromContext(ctx).Error(err, "Reporting the ConfigOK condition")
		c.mu.Lock()
		c.published = nil
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	c.published = &r
	c.mu.Unlock()
}

// Run follows the assignment until ctx ends: on a change it checkpoints the
// new config, makes it current and restarts the component (or reloads it);
// it promotes current to last-known-good when its trial passes; it reports
// sync failures in the condition without changing the config. Call it after
// Bootstrap. It returns nil when ctx ends.
func (c *Controller[T]) Run(ctx context.Context) error {
	if c.store == nil {
		return errors.New("dynconfig: Run called before Bootstrap")
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	if c.remoteEnabled() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.opts.Remote.Run(ctx, notify); err != nil {
				klog.FromContext(ctx).Error(err, "Assignment watch stopped")
			}
		}()
		// No sync of our own here: every Remote calls changed once when it
		// starts watching, which also covers a failed startup sync.
	}
	defer wg.Wait()

	resync := c.opts.Clock.NewTimer(c.jitter())
	defer resync.Stop()
	for {
		trialC, stopTrial := c.trialTimer()
		syncDue := false
		select {
		case <-ctx.Done():
			stopTrial()
			return nil
		case <-changed:
			syncDue = true
		case <-resync.C():
			resync.Reset(c.jitter())
			syncDue = true
		case <-trialC:
		case <-c.healthyC():
		}
		stopTrial()
		if syncDue && c.remoteEnabled() {
			if err := c.sync(ctx); errors.Is(err, errRestarted) {
				return nil
			} else if err != nil {
				return err
			}
		}
		c.maybePromote(ctx)
	}
}

func (c *Controller[T]) jitter() time.Duration {
	p := c.opts.ResyncPeriod
	return p + time.Duration(rand.Int64N(int64(p)/10+1))
}

// healthyC fires once when MarkHealthy is first called, if it matters.
func (c *Controller[T]) healthyC() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.opts.RequireHealthy || c.state.promoted {
		return nil
	}
	return c.healthy
}

// trialTimer returns a channel that fires when current's trial ends, or nil
// when no promotion is pending.
func (c *Controller[T]) trialTimer() (<-chan time.Time, func()) {
	c.mu.Lock()
	s := c.state
	c.mu.Unlock()
	if s.promoted || s.decision.Run == nil || s.decision.UsingLastKnownGood || s.current.SetTime.IsZero() {
		return nil, func() {}
	}
	wait := s.current.SetTime.Add(s.trial.Duration).Sub(c.opts.Clock.Now()) + time.Millisecond
	if wait < 0 {
		wait = 0
	}
	t := c.opts.Clock.NewTimer(wait)
	return t.C(), func() { t.Stop() }
}

// maybePromote makes current last-known-good when its trial is over and the
// component is healthy (if it opted in).
func (c *Controller[T]) maybePromote(ctx context.Context) {
	c.mu.Lock()
	s := c.state
	c.mu.Unlock()
	if s.promoted || s.decision.Run == nil || s.decision.UsingLastKnownGood || s.current.SetTime.IsZero() {
		return
	}
	if c.opts.Clock.Since(s.current.SetTime) <= s.trial.Duration || !c.isHealthy() {
		return
	}
	logger := klog.FromContext(ctx)
	if err := c.store.SetLastKnownGood(s.current.Source); err != nil {
		logger.Error(err, "Promoting current to last-known-good")
		return
	}
	c.mu.Lock()
	c.state.promoted = true
	c.state.lastKnownGood = s.current.Source
	c.mu.Unlock()
	c.opts.Metrics.SetLastKnownGood(s.current.Source)
	logger.Info("Current config promoted to last-known-good", "config", describe(s.current.Source))
	if _, err := c.store.GC(); err != nil {
		logger.Error(err, "Checkpoint GC")
	}
}

// sync reads the assignment and acts on it. A failure to read it is
// reported and changes nothing; a new assignment is checkpointed and made
// current, then the component restarts or reloads.
func (c *Controller[T]) sync(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	a, err := c.opts.Remote.Assigned(ctx)
	c.mu.Lock()
	s := c.state
	c.mu.Unlock()
	if err != nil {
		c.opts.Metrics.IncError(lkg.ProblemSyncFailed.String())
		logger.Error(err, "Sync failed; config unchanged")
		c.publish(ctx, status.Report{
			Status:  corev1.ConditionUnknown,
			Reason:  status.SyncFailedReason(err),
			Message: s.report.Message,
		})
		return nil
	}
	changed, err := c.adopt(ctx, a.Source, a.ConfigMap)
	if err != nil {
		logger.Error(err, "Adopting the new assignment; config unchanged")
		c.publish(ctx, status.Report{Status: corev1.ConditionUnknown, Reason: status.SyncFailedReason(err), Message: s.report.Message})
		return nil
	}
	c.opts.Metrics.SetAssigned(a.Source)
	if !changed && !s.syncFailed {
		// Nothing new; make sure the condition is the decision's, not an
		// earlier sync failure's.
		c.publish(ctx, s.report)
		return nil
	}
	if changed && c.opts.Events != nil {
		msg := status.ConfigChangedMessage(a.Source)
		if c.opts.Reload != nil {
			msg = status.ConfigReloadMessage(a.Source)
		}
		if err := c.opts.Events.RecordConfigChanged(ctx, msg); err != nil {
			logger.Error(err, "Recording the config-changed event")
		}
	}
	return c.restart(ctx)
}

// errRestarted tells Run that Options.Restart was called: the process is
// going away, and the state Run holds is stale.
var errRestarted = errors.New("restarted")

// restart applies the new current: in process through Reload, or by ending
// the process for its manager to restart.
func (c *Controller[T]) restart(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if c.opts.Reload == nil {
		logger.Info("Restarting to apply the new config")
		klog.Flush()
		if c.opts.Restart != nil {
			c.opts.Restart()
			return errRestarted
		}
		os.Exit(0)
	}
	cfg, err := c.evaluate(ctx, nil)
	if err != nil {
		return err
	}
	c.report(ctx)
	if err := c.opts.Reload(ctx, cfg); err != nil {
		logger.Error(err, "Reloading the new config")
	}
	return nil
}

// describe names a source in logs.
func describe(src *corev1.NodeConfigSource) string { return status.DescribeSource(src) }
