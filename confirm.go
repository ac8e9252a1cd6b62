package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
)

// Confirm or revert (Options.ConfirmWithin): the rule is lkg.ConfirmDeadline,
// the record checkpoint.Confirmation (meta/confirmed, beside the pointers),
// the first run current's pointer's. This file wires them: decide asks
// whether current missed its deadline (at every startup, sync and reload,
// so time spent down counts), and Run records a confirmation as soon as the
// component confirms, waits for the deadline on a timer, and reverts when
// it passes, with or without the API server.

// confirmState is what the last decision read of current's confirmation.
type confirmState struct {
	// record is the confirmation record as last read or written.
	record checkpoint.Confirmation
	// unknown is the error that kept the record from being read (not
	// damage: an I/O error, a newer format): no deadline fires while it is
	// unknown whether current was confirmed.
	unknown error
	// reverted is the run Run reverted for missing its deadline: it does
	// not fire twice for one run, whatever the decision was.
	reverted checkpoint.Pointer
}

// confirmed reports whether rec confirms run.
func confirmedBy(rec checkpoint.Confirmation, run checkpoint.Pointer) bool {
	return rec.For(run) && !rec.Confirmed.IsZero()
}

// confirmVerdict applies lkg.ConfirmDeadline to current's run cur, with its
// record rec and what this process runs.
func (c *Controller[T]) confirmVerdict(cur checkpoint.Pointer, lastKnownGood *corev1.NodeConfigSource, rec checkpoint.Confirmation,
	running lkg.Running, now time.Time) lkg.ConfirmVerdict {
	in := lkg.ConfirmInput{
		Current: cur.Source, LastKnownGood: lastKnownGood, ConfirmWithin: c.opts.ConfirmWithin,
		FirstRun: cur.FirstRun, Running: running, Now: now,
		// Confirmed on disk, or by the component in this process (Run
		// records it as soon as it wakes).
		Confirmed: confirmedBy(rec, cur) || (running.Healthy && lkg.Same(running.Source, cur.Source)),
	}
	if rec.For(cur) {
		in.Anchor = rec.Anchor
	}
	return lkg.ConfirmDeadline(in)
}

// notConfirmed is decide's hook: it reads current's confirmation record
// and returns lkg.Input.NotConfirmed, non-nil when current missed its
// deadline. A clock found stepped back re-anchors the deadline, durably.
func (c *Controller[T]) notConfirmed(ctx context.Context, v *view, cur, lastKnownGood *corev1.NodeConfigSource, now time.Time) error {
	var cs confirmState
	defer func() {
		c.mu.Lock()
		cs.reverted = c.st.confirm.reverted
		c.st.confirm = cs
		c.mu.Unlock()
	}()
	if c.opts.ConfirmWithin <= 0 || cur == nil || v.currentErr != nil || lkg.Same(cur, lastKnownGood) {
		return nil
	}
	// Read even before current's first run is recorded (it is, once it
	// runs): Run judges that run with this record too.
	rec, err := c.store.Confirmation()
	if err != nil {
		c.noteStateError(ctx, err, "Reading the confirmation record")
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			cs.unknown = err
			return nil
		}
	}
	cs.record = rec
	verdict := c.confirmVerdict(v.current, lastKnownGood, rec, c.snapshot().running, now)
	if !verdict.Anchor.IsZero() {
		klog.FromContext(ctx).Info("The clock is behind the start of current's confirmation deadline (stepped back); the deadline starts again now",
			"current", describe(cur), "start", v.current.FirstRun, "now", now)
		if r, err := c.store.AnchorCurrent(v.current, verdict.Anchor); err != nil {
			c.noteStateError(ctx, err, "Recording the new start of the confirmation deadline")
		} else {
			cs.record = r
		}
	}
	if !verdict.Expired {
		return nil
	}
	return fmt.Errorf("no health confirmation within %v of its first run", c.opts.ConfirmWithin)
}

// confirmStep is Run's hook, each time it wakes: it records the
// component's confirmation of current (MarkHealthy) once, and reverts
// current when its deadline passed. The verdict says what Run waits for:
// the deadline's timer and, while it is pending, MarkHealthy. errRestarted
// means the process is going away.
func (c *Controller[T]) confirmStep(ctx context.Context) (lkg.ConfirmVerdict, error) {
	if c.opts.ConfirmWithin <= 0 {
		return lkg.ConfirmVerdict{}, nil
	}
	s := c.snapshot()
	cur := s.current
	cs := s.confirm
	// No deadline for a config that does not run here (marked bad, rolled
	// back for another reason), nor while the record cannot be read.
	if cs.unknown != nil || !lkg.Same(s.running.Source, cur.Source) || cur.FirstRun.IsZero() || sameRun(cs.reverted, cur) {
		return lkg.ConfirmVerdict{}, nil
	}
	now := c.opts.Clock.Now()
	if s.running.Healthy && !confirmedBy(cs.record, cur) && !lkg.Same(cur.Source, s.lastKnownGood) {
		c.locked(ctx, func(ctx context.Context) {
			rec, err := c.store.ConfirmCurrent(cur, now)
			if err != nil {
				// The confirmation holds in this process; the next wake
				// records it again.
				c.noteStateError(ctx, err, "Recording the confirmation of current")
				return
			}
			klog.FromContext(ctx).Info("Current config confirmed healthy", "current", describe(cur.Source))
			c.mu.Lock()
			c.st.confirm.record = rec
			c.mu.Unlock()
		})
		s = c.snapshot()
	}
	verdict := c.confirmVerdict(cur, s.lastKnownGood, s.confirm.record, s.running, now)
	if !verdict.Anchor.IsZero() {
		c.locked(ctx, func(ctx context.Context) {
			if rec, err := c.store.AnchorCurrent(cur, verdict.Anchor); err != nil {
				c.noteStateError(ctx, err, "Recording the new start of the confirmation deadline")
			} else {
				c.mu.Lock()
				c.st.confirm.record = rec
				c.mu.Unlock()
			}
		})
	}
	if !verdict.Expired {
		return verdict, nil
	}
	klog.FromContext(ctx).Info("Current config not confirmed healthy in time; reverting", "current", describe(cur.Source), "confirmWithin", c.opts.ConfirmWithin)
	c.mu.Lock()
	c.st.confirm.reverted = cur
	c.mu.Unlock()
	var err error
	c.locked(ctx, func(ctx context.Context) { err = c.redecide(ctx) })
	return lkg.ConfirmVerdict{}, err
}

// sameRun reports whether a and b are the same run of the same config.
func sameRun(a, b checkpoint.Pointer) bool {
	return a.Source != nil && lkg.Same(a.Source, b.Source) && a.FirstRun.Equal(b.FirstRun)
}

// redecide decides again from the state dir alone (no assignment is read)
// and moves the component to the config the decision chose: a reload, a
// restart, or nothing when it runs already.
func (c *Controller[T]) redecide(ctx context.Context) error {
	running := c.snapshot().running.Source
	v := c.readState(ctx)
	c.readStartups(ctx, v)
	d, cfg, err := c.decide(ctx, v, nil, nil)
	if err != nil {
		return err
	}
	switch lkg.NextAction(running, d, c.opts.Reload != nil) {
	case lkg.ActionNone:
		c.report(ctx)
		return nil
	case lkg.ActionReload:
		return c.reload(ctx, v, d, cfg)
	}
	c.holdRestart(ctx, v, d, v.current, true)
	return c.restart(ctx)
}

// readStartups fills v's startups for a decision while the component
// runs: what Bootstrap recorded when the file lacks this start, else the
// file.
func (c *Controller[T]) readStartups(ctx context.Context, v *view) {
	if c.startupsErr != nil {
		v.startups, v.startupsErr = c.startups, c.startupsErr
		return
	}
	var err error
	if v.startups, err = c.store.Startups(); err != nil {
		c.noteStateError(ctx, err, "Reading the startups")
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			v.startupsErr = err
		}
	}
}

// confirmTimer returns a channel that fires when the pending deadline of
// verdict is due, and its stop function; nil when none is pending.
func (c *Controller[T]) confirmTimer(verdict lkg.ConfirmVerdict) (<-chan time.Time, func()) {
	if !verdict.Pending || verdict.After <= 0 {
		return nil, func() {}
	}
	t := c.opts.Clock.NewTimer(verdict.After)
	return t.C(), func() { t.Stop() }
}

// MarkHealthyFunc returns a MarkHealthy bound to the config the Controller
// runs now (or, called from Reload, the config being reloaded): calling it
// once the component moved to another config does nothing, so that a
// health check of an older config that passes late confirms nothing. Safe
// to call from any goroutine.
func (c *Controller[T]) MarkHealthyFunc() func() {
	c.mu.Lock()
	ch := c.healthC
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.healthC == ch && !c.healthy {
			c.healthy = true
			close(c.healthC)
		}
	}
}
