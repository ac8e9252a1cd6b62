package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
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
	// restarting is set once a restart of an external component has begun
	// (External.BeforeRestart called, or the Restarter asked): from then
	// on this Controller never calls External.Settled. settleMu orders
	// BeforeRestart and Settled: never both at once (settle in external.go).
	restarting bool
	settleMu   sync.Mutex
	// newerReported is the last state error of a newer format reported
	// as a StateNewerFormat Event (noteStateError), so it is said once.
	newerReported string

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
	confirm             confirmState // current's confirmation deadline (confirm.go)
	// preflight is the answer to the Node's pre-flight request, nil when
	// there is none (preflight.go).
	preflight *nodeapi.PreflightResult
	// notApplied is the assignment External.BeforeRestart held, while the
	// decision runs what ran before without a problem (notapplied.go).
	notApplied *corev1.NodeConfigSource
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
	// applyErr: the component refused to apply current in process (its
	// Reload failed); the decision marks current bad and rolls back.
	applyErr error
	// thisStart is this process's recorded startup time, when it is on
	// disk: a current first run at startup records it as its first run.
	thisStart time.Time
	loads     map[checkpoint.Key]loaded
}

type loaded struct {
	cm  *corev1.ConfigMap
	err error
}

// noteStateError reports a state-dir problem: always the log; for a file
// moved to the quarantine also a metric and an Event that say where it went.
func (c *Controller[T]) noteStateError(ctx context.Context, err error, what string) {
	if err == nil {
		return
	}
	klog.FromContext(ctx).Error(err, what)
	if errors.Is(err, checkpoint.ErrNewerFormat) {
		// Not damage (checkpoint's compatibility policy), but the
		// component no longer runs what the file says: say why, once.
		msg := err.Error()
		c.mu.Lock()
		first := c.newerReported != msg
		c.newerReported = msg
		c.mu.Unlock()
		if first {
			c.warn(ctx, status.EventReasonStateNewerFormat, fmt.Sprintf("%s: %v; this version runs its assignment or its local config instead, and leaves the file's checkpoints alone", what, err))
		}
		return
	}
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

// currentConfig is what the decision needs of current's checkpoint.
type currentConfig struct {
	trial    components.Trial  // from its annotations, else the default
	cm       *corev1.ConfigMap // nil when it could not be loaded
	loadErr  error             // the checkpoint is missing or corrupt
	trialErr error             // its trial annotations are invalid
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

// errRestarted tells Run that Options.Restart was called: the process is
// going away, and the state Run holds is stale.
var errRestarted = errors.New("restarted")

// describe names a source in logs.
func describe(src *corev1.NodeConfigSource) string { return nodeapi.DescribeSource(src) }
