package dynconfig

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

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
		// Say so on the Node too: the process (or, for Options.External,
		// the run role beside the component) does not go on, and without a
		// report the Node would keep an old condition.
		r := status.Report{Status: corev1.ConditionFalse, Reason: status.LocalInvalidReason(err), Message: status.LocalInvalidMessage}
		r.Config = &nodeapi.ConfigStatus{Phase: nodeapi.PhaseLocal, Error: r.Reason}
		c.publish(ctx, r)
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
	if v.currentErr == nil && c.sameImmutable(ctx, v, src, a.ConfigMap) {
		klog.FromContext(ctx).V(2).Info("The assigned ConfigMap is immutable and only its metadata changed: it is the config already current",
			"current", describe(v.current.Source), "resourceVersion", src.ConfigMap.ResourceVersion)
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

// sameImmutable reports whether the assignment src (its ConfigMap cm) is
// the current config under a new resourceVersion that cannot be a new
// config: the same namespace, name, UID and payload key, and both cm and
// the checkpoint current was made from are immutable, with the same data.
// An immutable ConfigMap's data cannot change, so its new resourceVersion
// is an edit of its labels or annotations; restarting the component,
// checkpointing it again and starting a new trial for it would disrupt the
// node for nothing. The trial settings (dynconfig.io/ annotations) stay
// those of the checkpoint: an immutable ConfigMap is one config, settings
// included, and a new trial is rolled out as a new ConfigMap. A checkpoint
// made before the ConfigMap was made immutable is not trusted to hold the
// same data, and a mutable ConfigMap keeps the rule that every
// resourceVersion is a new config.
func (c *Controller[T]) sameImmutable(ctx context.Context, v *view, src *corev1.NodeConfigSource, cm *corev1.ConfigMap) bool {
	cur := v.current.Source
	if src == nil || src.ConfigMap == nil || cur == nil || cur.ConfigMap == nil || cm == nil {
		return false
	}
	a, b := *src.ConfigMap, *cur.ConfigMap
	a.ResourceVersion, b.ResourceVersion = "", ""
	if a != b || cm.Immutable == nil || !*cm.Immutable {
		return false
	}
	key, ok := checkpoint.KeyFromSource(cur)
	if !ok {
		return false
	}
	old, err := c.load(ctx, v, key)
	if err != nil || old.Immutable == nil || !*old.Immutable {
		return false
	}
	return apiequality.Semantic.DeepEqual(old.Data, cm.Data) && apiequality.Semantic.DeepEqual(old.BinaryData, cm.BinaryData)
}
