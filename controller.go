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
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// Controller runs the config lifecycle of one component on one node:
// Bootstrap picks the config to start with, Run follows the assignment.
// Create it with New.
//
// The Controller only wires: the state dir is package checkpoint's, every
// decision is a pure function of package lkg (Decide at startup and on each
// change; Promotion, NextAction and AfterReloadFailure while running) and
// package crashloop, and the condition's wording is package status's.
type Controller[T any] struct {
	opts  Options[T]
	store *checkpoint.Store

	mu        sync.Mutex
	st        state
	published *status.Report // the last report the Reporter accepted
	healthC   chan struct{}  // closed by MarkHealthy for the config running now
	healthy   bool

	// startups and startupsErr are what Bootstrap recorded when the
	// record on disk is incomplete (startupsErr not nil): Run decides with
	// them rather than with the file, which lacks this start.
	startups    []time.Time
	startupsErr error
}

// state is what the last decision left behind, for Run.
type state struct {
	current       checkpoint.Pointer
	lastKnownGood *corev1.NodeConfigSource
	trial         components.Trial // current's
	decision      lkg.Decision
	report        status.Report
	syncFailed    bool // the last decision was made without a clear assignment
	running       lkg.Running
	// rollbackCheck is what Run found when it checked the rollback target
	// while another config runs: nil when it could be used, for target.
	rollbackCheck       error
	rollbackCheckTarget *corev1.NodeConfigSource
}

// New validates opts and returns a Controller. Nothing is read or locked
// until Bootstrap.
func New[T any](opts Options[T]) (*Controller[T], error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	return &Controller[T]{opts: opts, healthC: make(chan struct{})}, nil
}

// MarkHealthy tells the Controller that the component runs well on the
// config it runs now. With Options.RequireHealthy, a config becomes
// last-known-good only after its trial and this call; every config the
// component moves to (by a restart or a reload) needs its own call, made
// once Bootstrap returned it, or from Reload (before it returns) or after
// it for a reloaded config. Safe to call any number
// of times, from any goroutine.
func (c *Controller[T]) MarkHealthy() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.healthy {
		c.healthy = true
		close(c.healthC)
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
// take the state-dir lock (recreating any missing part of the layout);
// build and validate the local config (an invalid local config is an error:
// there is nothing to fall back to); record this startup; read the
// pointers and bad marks; read the assignment (bounded by
// StartupSyncTimeout) and checkpoint it if it is new; decide (load, decode
// and validate current, or roll back: lkg.Decide); record current's first
// run; report the ConfigOK condition; and return the config to run. Call it
// once, before Run. Garbage collection of old checkpoints waits for Run, so
// that no startup waits on it.
//
// Everything Bootstrap asks of the cluster (the assignment, its ConfigMap,
// the condition report, Events) shares one deadline,
// Options.StartupSyncTimeout from the call: against an API server that
// accepts connections and never answers, Bootstrap returns after about
// that long, with the last-known-good config, and what it could not report
// is reported by Run.
func (c *Controller[T]) Bootstrap(ctx context.Context) (*T, error) {
	logger := klog.FromContext(ctx)
	if c.store != nil {
		return nil, errors.New("dynconfig: Bootstrap called twice")
	}
	store, err := c.openStore(ctx)
	if err != nil {
		return nil, fmt.Errorf("dynconfig: %w", err)
	}
	// Everything Bootstrap asks of the cluster shares one deadline. (Waiting
	// for the state dir's lock, above, is the run role's of Options.External
	// and is not the cluster's.)
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartupSyncTimeout)
	defer cancel()
	c.store = store
	// The local config is the baseline last-known-good: it must be valid.
	localCfg, err := c.opts.Layers.Build(nil)
	if err != nil {
		return nil, fmt.Errorf("dynconfig: invalid local config: %w", err)
	}
	// Record this startup before anything is decided: a config adopted by
	// this process first runs after this record, so this start is never
	// counted as one of its crashes, whichever way it was adopted.
	startups, err := c.recordStartup()
	c.noteStateError(ctx, err, "Recording this startup")

	v := c.readState(ctx)
	v.startups = startups
	switch {
	case err == nil || errors.Is(err, checkpoint.ErrCorrupt):
		// The component's last recorded start: this one, or, for the run
		// role of Options.External, which records none, the pre-start
		// role's (none yet on a new state dir).
		if len(startups) > 0 {
			v.thisStart = startups[len(startups)-1]
		}
	default:
		// Counted anyway (what was read plus this start), but a crash loop
		// may go unseen: lkg.Decide does not run a current on trial.
		v.startupsErr = err
		c.startups, c.startupsErr = startups, err
	}
	var syncErr error
	switch {
	case c.decidesOffline(): // Options.External: from the state dir alone
	case !c.remoteEnabled():
		c.resetToLocal(ctx, v)
	default:
		syncErr = c.startupSync(ctx, v)
	}
	d, cfg, err := c.decide(ctx, v, syncErr, localCfg)
	if err != nil {
		return nil, err
	}
	if err := c.handOver(ctx, v, d); err != nil {
		return nil, err
	}
	c.startRunning(ctx, v, d)
	c.releaseState(ctx)
	c.report(ctx)
	r := c.snapshot().report
	logger.Info("Config chosen", "status", r.Status, "message", r.Message, "reason", r.Reason)
	return cfg, nil
}

// view is one read of the state dir, for one decision. Each file is read
// once; checkpoints are loaded at most once.
type view struct {
	current    checkpoint.Pointer
	currentErr error // damaged or unreadable: the desired config is unclear until a sync
	lkg        checkpoint.Pointer
	lkgErr     error
	marks      checkpoint.BadMarks
	marksErr   error // an I/O error (a corrupt file reads as no marks)
	startups   []time.Time
	// startupsErr: the startups could not be read or this start could not
	// be recorded, so crash restarts cannot all be counted.
	startupsErr error
	// thisStart is this process's recorded startup time, when it is on
	// disk: a current first run at startup records it as its first run.
	thisStart time.Time
	loads     map[checkpoint.Key]loaded
}

type loaded struct {
	cm  *corev1.ConfigMap
	err error
}

// readState reads the pointers and the bad marks.
func (c *Controller[T]) readState(ctx context.Context) *view {
	v := &view{loads: map[checkpoint.Key]loaded{}}
	v.current, v.currentErr = c.store.Current()
	c.noteStateError(ctx, v.currentErr, "Reading the current pointer; the desired config is unclear until the assignment is read")
	v.lkg, v.lkgErr = c.store.LastKnownGood()
	c.noteStateError(ctx, v.lkgErr, "Reading the last-known-good pointer; the local config is the rollback target")
	v.marks, v.marksErr = c.store.BadMarks()
	if errors.Is(v.marksErr, checkpoint.ErrCorrupt) {
		c.noteStateError(ctx, v.marksErr, "Reading the bad marks; they are lost")
		v.marksErr = nil
	}
	return v
}

// load reads a checkpoint once per view. A corrupt checkpoint has been
// moved to the quarantine by the store; it is reported here.
func (c *Controller[T]) load(ctx context.Context, v *view, key checkpoint.Key) (*corev1.ConfigMap, error) {
	if l, ok := v.loads[key]; ok {
		return l.cm, l.err
	}
	cm, err := c.store.Load(key)
	if errors.Is(err, checkpoint.ErrCorrupt) {
		c.noteStateError(ctx, err, "Loading a checkpoint")
	}
	v.loads[key] = loaded{cm: cm, err: err}
	return cm, err
}

// noteStateError reports a state-dir problem: always the log; for a file
// moved to the quarantine also a metric and an Event that say where it went.
func (c *Controller[T]) noteStateError(ctx context.Context, err error, what string) {
	if err == nil {
		return
	}
	klog.FromContext(ctx).Error(err, what)
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) || ce.MovedTo == "" {
		return
	}
	c.opts.Metrics.IncQuarantined()
	c.warn(ctx, status.EventReasonStateFileQuarantined, fmt.Sprintf("corrupt state file %s moved to %s: %v", ce.Path, ce.MovedTo, ce.Err))
}

func (c *Controller[T]) warn(ctx context.Context, reason, message string) {
	if c.opts.Events == nil {
		return
	}
	if err := c.opts.Events.RecordWarning(ctx, reason, message); err != nil {
		klog.FromContext(ctx).Error(err, "Recording an event", "reason", reason)
	}
}

// resetToLocal points current and last-known-good at the local config
// (remote config disabled).
func (c *Controller[T]) resetToLocal(ctx context.Context, v *view) {
	if v.currentErr != nil || v.current.Source != nil {
		if err := c.store.SetCurrent(nil); err != nil {
			klog.FromContext(ctx).Error(err, "Resetting current to the local config")
		}
		v.current, v.currentErr = c.store.Current()
	}
	if v.lkgErr != nil || v.lkg.Source != nil {
		if err := c.store.SetLastKnownGood(nil); err != nil {
			klog.FromContext(ctx).Error(err, "Resetting last-known-good to the local config")
		}
		v.lkg, v.lkgErr = c.store.LastKnownGood()
	}
}

// startupSync reads the assignment and, when it names a config other than
// current, checkpoints it and makes it current. It returns the error that
// made the desired config unclear, if any.
func (c *Controller[T]) startupSync(ctx context.Context, v *view) error {
	sctx, cancel := context.WithTimeout(ctx, c.opts.StartupSyncTimeout)
	defer cancel()
	a, err := c.opts.Remote.Assigned(sctx)
	if err != nil {
		return err
	}
	_, err = c.adopt(ctx, v, a)
	return err
}

// adopt checkpoints a's ConfigMap and makes a's source current when it is
// another config than current (uid, resourceVersion and payload key), or
// when current's pointer is damaged. It reports whether current changed.
func (c *Controller[T]) adopt(ctx context.Context, v *view, a source.Assignment) (bool, error) {
	src := a.Source
	if src != nil && src.ConfigMap == nil {
		src = nil
	}
	if v.currentErr == nil && lkg.Same(v.current.Source, src) {
		if src == nil {
			return false, nil
		}
		key, _ := checkpoint.KeyFromSource(src)
		if _, err := c.load(ctx, v, key); err == nil {
			return false, nil
		}
		// Same config, but its checkpoint is gone or damaged: save it
		// again without touching the pointer (its trial goes on).
		if _, err := c.store.Save(a.ConfigMap); err != nil {
			return false, fmt.Errorf("checkpoint %s: %w", key, err)
		}
		delete(v.loads, key)
		return false, nil
	}
	if src != nil {
		if _, err := c.store.Save(a.ConfigMap); err != nil {
			return false, fmt.Errorf("checkpoint ConfigMap %s/%s: %w", a.ConfigMap.Namespace, a.ConfigMap.Name, err)
		}
		key, _ := checkpoint.KeyFromSource(src)
		delete(v.loads, key)
	}
	if err := c.store.SetCurrent(src); err != nil {
		return false, err
	}
	v.current, v.currentErr = c.store.Current()
	klog.FromContext(ctx).Info("New config assigned", "current", describe(src))
	return true, nil
}

// currentConfig is what the decision needs of current's checkpoint.
type currentConfig struct {
	trial    components.Trial  // from its annotations, else the default
	cm       *corev1.ConfigMap // nil when it could not be loaded
	loadErr  error             // the checkpoint is missing or corrupt
	trialErr error             // its trial annotations are invalid
}

// loadCurrent loads the checkpoint of src (current) and reads its trial
// settings from its annotations.
func (c *Controller[T]) loadCurrent(ctx context.Context, v *view, src *corev1.NodeConfigSource) currentConfig {
	cur := currentConfig{trial: c.opts.DefaultTrial}
	key, ok := checkpoint.KeyFromSource(src)
	if !ok {
		return cur
	}
	cur.cm, cur.loadErr = c.load(ctx, v, key)
	if cur.loadErr != nil {
		return cur
	}
	if t, err := components.TrialFromAnnotations(cur.cm.Annotations, c.opts.DefaultTrial); err != nil {
		cur.trialErr = err
	} else {
		cur.trial = t
	}
	return cur
}

// decide runs lkg.Decide over v, carries out its side effects on the state
// dir (a bad mark, a reset of last-known-good), records the outcome in the
// Controller's state, and returns the decision and the config it chose.
// localCfg, when not nil, is the local config already built.
func (c *Controller[T]) decide(ctx context.Context, v *view, syncErr error, localCfg *T) (lkg.Decision, *T, error) {
	if v.currentErr != nil && syncErr == nil {
		syncErr = fmt.Errorf("current pointer unreadable: %w", v.currentErr)
	}
	cur := v.current.Source
	if v.currentErr != nil {
		cur = nil
	}
	var lastKnownGood *corev1.NodeConfigSource
	if v.lkgErr == nil {
		lastKnownGood = v.lkg.Source
	}
	cc := c.loadCurrent(ctx, v, cur)
	trial := cc.trial
	now := c.opts.Clock.Now()
	in := lkg.Input{
		SyncError:     syncErr,
		MarksError:    v.marksErr,
		Current:       cur,
		LastKnownGood: lastKnownGood,
		// A config that is last-known-good has passed its trial: its
		// restarts are not its crash loop.
		CurrentCrashLooping: !lkg.Same(cur, lastKnownGood) && crashloop.CrashLooping(crashloop.Input{
			Startups: v.startups, Since: v.current.FirstRun, Now: now, Trial: trial.Duration, Threshold: trial.CrashLoopThreshold,
		}),
		CrashCountError: v.startupsErr,
	}
	if v.lkgErr != nil {
		in.LastKnownGoodError = fmt.Errorf("last-known-good pointer unreadable: %w", v.lkgErr)
	}
	if _, mark, ok := v.marks.Lookup(cur); ok {
		in.CurrentBad = &lkg.Entry{Time: mark.Time, Reason: mark.Reason, CrashLoop: mark.IsCrashLoop()}
		in.LastKnownGoodCrashLooping = crashloop.CrashLooping(crashloop.Input{
			Startups: v.startups, Since: mark.Time, Now: now, Trial: trial.Duration, Threshold: trial.CrashLoopThreshold,
		})
	}
	var curCfg, lkgCfg *T
	in.LoadCurrent = func() error {
		if cc.loadErr != nil {
			return &lkg.ConfigError{Stage: lkg.StageLoad, Err: cc.loadErr}
		}
		if cc.trialErr != nil {
			return &lkg.ConfigError{Stage: lkg.StageValidate, Err: cc.trialErr}
		}
		cfg, err := c.build(cur, cc.cm)
		curCfg = cfg
		return err
	}
	in.LoadLastKnownGood = func() error {
		key, _ := checkpoint.KeyFromSource(lastKnownGood)
		cm, err := c.load(ctx, v, key)
		if err != nil {
			return &lkg.ConfigError{Stage: lkg.StageLoad, Err: err}
		}
		cfg, err := c.build(lastKnownGood, cm)
		lkgCfg = cfg
		return err
	}
	d, err := lkg.Decide(in)
	if err != nil {
		return lkg.Decision{}, nil, fmt.Errorf("dynconfig: %w", err)
	}
	c.apply(ctx, d, cur)
	if d.ResetLastKnownGood {
		lastKnownGood = nil
	}
	report := reportFor(d, cur, lastKnownGood, c.local())
	c.mu.Lock()
	report = withRollbackCheck(report, lastKnownGood, c.st.rollbackCheckTarget, c.st.rollbackCheck)
	c.mu.Unlock()
	c.observe(ctx, d, cur, lastKnownGood, report)

	c.mu.Lock()
	c.st.current = v.current
	c.st.lastKnownGood = lastKnownGood
	c.st.trial = trial
	c.st.decision = d
	c.st.report = report
	c.st.syncFailed = syncErr != nil
	c.mu.Unlock()

	switch {
	case d.Run == nil && localCfg != nil:
		return d, localCfg, nil
	case d.Run == nil:
		cfg, err := c.opts.Layers.Build(nil)
		if err != nil {
			return d, nil, fmt.Errorf("dynconfig: invalid local config: %w", err)
		}
		return d, cfg, nil
	case lkg.Same(d.Run, cur) && curCfg != nil:
		return d, curCfg, nil
	default:
		return d, lkgCfg, nil
	}
}

// apply carries out a decision's side effects on the state dir. A failed
// write is logged, not fatal: the decision stands for this process, and the
// next start decides again.
func (c *Controller[T]) apply(ctx context.Context, d lkg.Decision, cur *corev1.NodeConfigSource) {
	logger := klog.FromContext(ctx)
	if d.Cause != nil {
		logger.Error(d.Cause, "Not running current config", "problem", d.Problem.String(), "current", describe(cur))
	}
	if d.LastKnownGoodUnusable != nil {
		logger.Error(d.LastKnownGoodUnusable, "Last-known-good config unusable; running the local config")
	}
	if d.MarkBad {
		err := c.store.MarkBad(cur, checkpoint.BadMark{Reason: problemReason(d, cur), Problem: d.Problem.String()})
		c.noteStateError(ctx, err, "Marking current bad")
	}
	if d.ResetLastKnownGood {
		if err := c.store.SetLastKnownGood(nil); err != nil {
			logger.Error(err, "Resetting last-known-good to the local config")
		} else {
			logger.Info("Last-known-good reset to the local config")
		}
	}
}

// observe exports a decision: metrics always, Events when a config has just
// been found bad and when the node is in a dead end.
func (c *Controller[T]) observe(ctx context.Context, d lkg.Decision, cur, lastKnownGood *corev1.NodeConfigSource, r status.Report) {
	m := c.opts.Metrics
	m.SetAssigned(cur)
	m.SetActive(d.Run)
	m.SetLastKnownGood(lastKnownGood)
	m.SetDeadEnd(d.DeadEnd)
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
	if d.DeadEnd {
		c.mu.Lock()
		already := c.st.decision.DeadEnd
		c.mu.Unlock()
		if !already {
			c.warn(ctx, status.EventReasonConfigDeadEnd, r.Reason+"; "+r.Message)
		}
	}
}

// resetHealth makes the config about to run need its own MarkHealthy. It
// is called before the component gets the config (Bootstrap returns it,
// Reload applies it), so that a MarkHealthy made while applying it counts.
func (c *Controller[T]) resetHealth() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.healthy = false
	c.healthC = make(chan struct{})
}

// startRunning records that this process now runs d's config: its trial
// uptime starts now, and when it is current its first run is recorded
// (crash-loop counting starts there). Its health was reset (resetHealth)
// before the component got it.
func (c *Controller[T]) startRunning(ctx context.Context, v *view, d lkg.Decision) {
	now := c.opts.Clock.Now()
	if !d.UsingLastKnownGood && d.Run != nil && v.current.FirstRun.IsZero() {
		if p, err := c.store.RecordFirstRunAt(v.thisStart); err != nil {
			c.noteStateError(ctx, err, "Recording the first run of current")
		} else {
			v.current = p
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.current = v.current
	c.st.running = lkg.Running{Source: d.Run, Since: now}
}

// snapshot returns a copy of the state, with the running config's health.
func (c *Controller[T]) snapshot() state {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.running.Healthy = c.healthy
	return s
}

// build decodes the payload of cm named by src and merges it with the
// instance layers, classifying failures for lkg.Decide.
func (c *Controller[T]) build(src *corev1.NodeConfigSource, cm *corev1.ConfigMap) (*T, error) {
	key := nodeapi.PayloadKeyOf(src, c.opts.Profile.PayloadKey())
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

// report publishes the current state's condition.
func (c *Controller[T]) report(ctx context.Context) { c.publish(ctx, c.snapshot().report) }

// publish sends r unless it is what the last successful publish sent: the
// heartbeat moves when the component (re)starts or the condition changes,
// not on every resync, which keeps a node's requests per change low.
// Failures are logged (Run reports again on its next sync).
func (c *Controller[T]) publish(ctx context.Context, r status.Report) {
	if c.opts.Reporter == nil {
		return
	}
	if r.Config == nil {
		r.Config = configStatus(c.snapshot(), r)
	}
	c.mu.Lock()
	same := c.published != nil && c.published.Equal(r)
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
// new config, makes it current, decides again, and restarts the component
// (or reloads it) when the config to run is not the one running; it
// promotes current to last-known-good once the component has run it for a
// full trial (lkg.Promotion); it reports sync failures in the condition
// without changing the config; it removes checkpoints nothing references.
// Call it after Bootstrap. It returns nil when ctx ends, or after
// Options.Restart returns.
func (c *Controller[T]) Run(ctx context.Context) error {
	if c.store == nil {
		return errors.New("dynconfig: Run called before Bootstrap")
	}
	c.locked(ctx, c.collectGarbage)
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
		c.checkRollbackTarget(ctx)
		pv := c.promotion()
		if pv.Promote {
			c.locked(ctx, c.promote)
			continue
		}
		// Wait on a timer only while the trial runs, and on MarkHealthy's
		// channel only while it matters: nothing here can spin.
		var trialC <-chan time.Time
		stopTrial := func() {}
		if pv.After > 0 {
			t := c.opts.Clock.NewTimer(pv.After)
			trialC, stopTrial = t.C(), func() { t.Stop() }
		}
		var healthC <-chan struct{}
		if pv.WaitHealthy {
			c.mu.Lock()
			healthC = c.healthC
			c.mu.Unlock()
		}
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
		case <-healthC:
		}
		stopTrial()
		if syncDue && c.remoteEnabled() {
			if err := c.syncLocked(ctx); errors.Is(err, errRestarted) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
}

func (c *Controller[T]) jitter() time.Duration {
	p := c.opts.ResyncPeriod
	return p + time.Duration(rand.Int64N(int64(p)/10+1))
}

// checkRollbackTarget loads, decodes and validates the last-known-good
// config while another config runs, off the startup path, so that a
// damaged rollback target is found while there is time to repair it, not
// on the day a rollback needs it. A problem is reported in the condition's
// message, by an Event (once per target), and by a metric. It runs each
// time Run wakes (a resync, a change, the end of a trial): one checkpoint
// read while a remote target is not the config running, nothing otherwise.
func (c *Controller[T]) checkRollbackTarget(ctx context.Context) {
	s := c.snapshot()
	target := s.lastKnownGood
	key, remote := checkpoint.KeyFromSource(target)
	var err error
	if remote && !lkg.Same(target, s.running.Source) {
		var cm *corev1.ConfigMap
		if cm, err = c.store.Load(key); err == nil {
			_, err = c.build(target, cm)
		} else if errors.Is(err, checkpoint.ErrCorrupt) {
			c.noteStateError(ctx, err, "Checking the last-known-good checkpoint")
		}
	}
	if err == nil && !remote && s.rollbackCheck == nil {
		return
	}
	c.opts.Metrics.SetLastKnownGoodUnusable(err != nil)
	c.mu.Lock()
	known := s.rollbackCheck != nil && lkg.Same(s.rollbackCheckTarget, target)
	c.st.rollbackCheck, c.st.rollbackCheckTarget = err, target
	if !remote {
		c.st.rollbackCheckTarget = nil
	}
	before := c.st.report
	c.st.report = withRollbackCheck(stripRollbackCheck(before), target, target, err)
	changed := !before.Equal(c.st.report)
	c.mu.Unlock()
	if err != nil {
		klog.FromContext(ctx).Error(err, "The last-known-good config could not be used if a rollback needed it", "lastKnownGood", describe(target))
		if !known {
			c.warn(ctx, status.EventReasonLastKnownGoodUnusable, rollbackCheckMessage(target, err))
		}
	}
	if changed {
		c.report(ctx)
	}
}

// promotion applies lkg.Promotion to the running state.
func (c *Controller[T]) promotion() lkg.PromotionVerdict {
	s := c.snapshot()
	return lkg.Promotion(lkg.PromotionInput{
		Current:        s.current.Source,
		LastKnownGood:  s.lastKnownGood,
		Running:        s.running,
		Trial:          s.trial.Duration,
		RequireHealthy: c.opts.RequireHealthy,
		Now:            c.opts.Clock.Now(),
	})
}

// promote makes current last-known-good.
func (c *Controller[T]) promote(ctx context.Context) {
	logger := klog.FromContext(ctx)
	cur := c.snapshot().current.Source
	if err := c.store.SetLastKnownGood(cur); err != nil {
		logger.Error(err, "Promoting current to last-known-good")
		// Try again at the next resync, not in a loop.
		c.mu.Lock()
		c.st.running.Since = c.opts.Clock.Now().Add(-c.st.trial.Duration).Add(c.opts.ResyncPeriod)
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	c.st.lastKnownGood = cur
	c.mu.Unlock()
	c.opts.Metrics.SetLastKnownGood(cur)
	logger.Info("Current config promoted to last-known-good", "config", describe(cur))
	// Collect before reporting: whoever sees the node promoted sees the
	// state dir without the checkpoints the promotion let go.
	c.collectGarbage(ctx)
	c.report(ctx) // the phase moves from Trial to Promoted
}

// collectGarbage removes the checkpoints that no pointer references.
func (c *Controller[T]) collectGarbage(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if removed, err := c.store.GC(); err != nil {
		logger.Error(err, "Checkpoint garbage collection")
	} else if len(removed) > 0 {
		logger.V(2).Info("Removed unreferenced checkpoints", "keys", removed)
	}
}

// sync reads the assignment and acts on it. A failure to read it is
// reported and changes nothing; a new assignment is checkpointed and made
// current, and the component moves to the config the new decision chose:
// not at all when that config already runs, else by a reload or a restart.
func (c *Controller[T]) sync(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	a, err := c.opts.Remote.Assigned(ctx)
	s := c.snapshot()
	if err != nil {
		c.opts.Metrics.IncError(lkg.ProblemSyncFailed.String())
		logger.Error(err, "Sync failed; config unchanged")
		c.publish(ctx, syncFailedReport(s, err))
		return nil
	}
	v := c.readState(ctx)
	changed, err := c.adopt(ctx, v, a)
	if err != nil {
		logger.Error(err, "Adopting the new assignment; config unchanged")
		c.publish(ctx, syncFailedReport(s, err))
		return nil
	}
	c.opts.Metrics.SetAssigned(a.Source)
	if !changed && !s.syncFailed {
		// Nothing new; make sure the condition is the decision's, not an
		// earlier sync failure's.
		c.publish(ctx, s.report)
		return nil
	}
	if c.startupsErr != nil {
		v.startups, v.startupsErr = c.startups, c.startupsErr
	} else if v.startups, err = c.store.Startups(); err != nil {
		c.noteStateError(ctx, err, "Reading the startups")
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			v.startupsErr = err
		}
	}
	d, cfg, err := c.decide(ctx, v, nil, nil)
	if err != nil {
		return err
	}
	action := lkg.NextAction(s.running.Source, d, c.opts.Reload != nil)
	if changed && action != lkg.ActionNone && lkg.Same(d.Run, a.Source) && c.opts.Events != nil {
		msg := status.ConfigChangedMessage(a.Source)
		if action == lkg.ActionReload {
			msg = status.ConfigReloadMessage(a.Source)
		}
		if err := c.opts.Events.RecordConfigChanged(ctx, msg); err != nil {
			logger.Error(err, "Recording the config-changed event")
		}
	}
	switch action {
	case lkg.ActionNone:
		c.report(ctx)
		c.collectGarbage(ctx)
		return nil
	case lkg.ActionReload:
		return c.reload(ctx, v, d, cfg)
	}
	return c.restart(ctx)
}

// reload applies the decision's config in process. When Reload fails for
// current, current is marked bad and the rollback target is reloaded; when
// that fails too, or the config that failed was the rollback target, the
// process restarts (lkg.AfterReloadFailure).
func (c *Controller[T]) reload(ctx context.Context, v *view, d lkg.Decision, cfg *T) error {
	logger := klog.FromContext(ctx)
	c.resetHealth()
	err := c.opts.Reload(ctx, cfg)
	if err == nil {
		c.startRunning(ctx, v, d)
		c.report(ctx)
		c.collectGarbage(ctx)
		return nil
	}
	logger.Error(err, "Reloading the config failed", "config", describe(d.Run))
	if lkg.AfterReloadFailure(d.Run, v.current.Source).Restart {
		return c.restart(ctx)
	}
	cur := v.current.Source
	mark := checkpoint.BadMark{Reason: status.ApplyFailedReason(uidOf(cur)), Problem: lkg.ProblemApplyFailed.String()}
	if err := c.store.MarkBad(cur, mark); err != nil {
		c.noteStateError(ctx, err, "Marking current bad")
	}
	c.opts.Metrics.IncError(lkg.ProblemApplyFailed.String())
	c.opts.Metrics.IncRollback()
	if c.opts.Events != nil {
		if err := c.opts.Events.RecordRolledBack(ctx, mark.Reason); err != nil {
			logger.Error(err, "Recording the rollback event")
		}
	}
	v2 := c.readState(ctx)
	v2.startups, v2.startupsErr = v.startups, v.startupsErr
	d2, cfg2, err := c.decide(ctx, v2, nil, nil)
	if err != nil {
		return err
	}
	c.resetHealth()
	if err := c.opts.Reload(ctx, cfg2); err != nil {
		logger.Error(err, "Reloading the rollback target failed too", "config", describe(d2.Run))
		return c.restart(ctx)
	}
	c.startRunning(ctx, v2, d2)
	c.report(ctx)
	c.collectGarbage(ctx)
	return nil
}

// errRestarted tells Run that Options.Restart was called: the process is
// going away, and the state Run holds is stale.
var errRestarted = errors.New("restarted")

// restart ends the process for its manager to start it again on the new
// decision.
func (c *Controller[T]) restart(ctx context.Context) error {
	klog.FromContext(ctx).Info("Restarting to apply the new config")
	klog.Flush()
	if c.opts.External != nil {
		return c.restartExternal(ctx)
	}
	if c.opts.Restart != nil {
		c.opts.Restart()
		return errRestarted
	}
	os.Exit(0)
	return errRestarted
}

// describe names a source in logs.
func describe(src *corev1.NodeConfigSource) string { return nodeapi.DescribeSource(src) }
