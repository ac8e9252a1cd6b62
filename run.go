package dynconfig

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/status"
)

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
		cv, err := c.confirmStep(ctx) // Options.ConfirmWithin
		if errors.Is(err, errRestarted) {
			return nil
		} else if err != nil {
			return err
		}
		pv := c.promotion()
		if pv.Promote && c.promotionHeld(ctx) {
			pv = lkg.PromotionVerdict{After: c.opts.External.PollInterval}
		} else if pv.Promote {
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
		if pv.WaitHealthy || cv.Pending {
			c.mu.Lock()
			healthC = c.healthC
			c.mu.Unlock()
		}
		confirmC, stopConfirm := c.confirmTimer(cv)
		syncDue := false
		select {
		case <-ctx.Done():
			stopTrial()
			stopConfirm()
			return nil
		case <-changed:
			syncDue = true
		case <-resync.C():
			resync.Reset(c.jitter())
			syncDue = true
		case <-trialC:
		case <-healthC:
		case <-confirmC:
		}
		stopTrial()
		stopConfirm()
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
		// An external role holds the state dir only for a step: take it
		// for this read (on the dir it released, the read would fail with
		// ErrClosed and call a sound target unusable).
		c.locked(ctx, func(ctx context.Context) { cm, err = c.store.Load(key) })
		switch {
		case errors.Is(err, checkpoint.ErrClosed):
			// The dir could not be taken (ctx ended): nothing was
			// learned of the target; the next wake checks again.
			return
		case err == nil:
			_, err = c.build(target, cm)
		case errors.Is(err, checkpoint.ErrCorrupt):
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

// promotionHeld asks External.PromotionHeld (within PollInterval) whether
// the promotion due now waits.
func (c *Controller[T]) promotionHeld(ctx context.Context) bool {
	e := c.opts.External
	if e == nil || e.PromotionHeld == nil {
		return false
	}
	hctx, cancel := context.WithTimeout(ctx, e.PollInterval)
	defer cancel()
	if !e.PromotionHeld(hctx) {
		return false
	}
	klog.FromContext(ctx).V(2).Info("Promotion held for the fleet's health gates", "current", describe(c.snapshot().current.Source))
	return true
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
	held, forgot := c.heldAssignment(a.Source)
	if held {
		// Not applied here (External.BeforeRestart): not tried again
		// until the assignment changes.
		c.publish(ctx, s.report)
		return nil
	}
	v := c.readState(ctx)
	prev, prevErr := v.current, v.currentErr
	changed, err := c.adopt(ctx, v, a)
	if err != nil {
		logger.Error(err, "Adopting the new assignment; config unchanged")
		c.publish(ctx, syncFailedReport(s, err))
		return nil
	}
	c.opts.Metrics.SetAssigned(a.Source)
	if !changed && !s.syncFailed && !forgot {
		// Nothing new; make sure the condition is the decision's, not an
		// earlier sync failure's.
		c.publish(ctx, s.report)
		return nil
	}
	c.readStartups(ctx, v)
	d, cfg, err := c.decide(ctx, v, nil, nil)
	if err != nil {
		return err
	}
	action := lkg.NextAction(s.running.Source, d, c.opts.Reload != nil)
	if action == lkg.ActionRestart && c.holdRestart(ctx, v, d, prev, prevErr != nil) {
		return nil
	}
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
