package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// notAppliedMemo remembers the assignment that External.BeforeRestart held
// (a config that could not be applied here), and why, so that Follow does
// not try it again on every sync while it stays assigned. It lives in
// memory only: a new RunExternal (the run role restarted) tries again once.
type notAppliedMemo struct {
	mu     sync.Mutex
	source *corev1.NodeConfigSource
	cause  error
}

func (m *notAppliedMemo) get() (*corev1.NodeConfigSource, error) {
	if m == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.source, m.cause
}

func (m *notAppliedMemo) set(src *corev1.NodeConfigSource, cause error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.source, m.cause = src, cause
}

func (c *Controller[T]) notApplied() *notAppliedMemo {
	if c.opts.External == nil {
		return nil
	}
	return c.opts.External.notApplied
}

// heldAssignment reports whether assigned is the assignment BeforeRestart
// held: Follow then leaves it alone. Any other assignment forgets the
// memo; forgot is true when it did, and the next decision must be
// published (the NotApplied report no longer holds).
func (c *Controller[T]) heldAssignment(assigned *corev1.NodeConfigSource) (held, forgot bool) {
	m := c.notApplied()
	src, cause := m.get()
	if cause == nil {
		return false, false
	}
	if lkg.Same(src, assigned) {
		return true, false
	}
	m.set(nil, nil)
	return false, true
}

// holdRestart asks External.BeforeRestart whether the component may
// restart onto d.Run, and carries out what its answer means (see
// External.BeforeRestart). prev is the current pointer before the
// assignment that led to d was adopted; rollback is true when the restart
// cannot be held whatever the answer. It returns true when the restart is
// held: the component keeps running what it runs.
func (c *Controller[T]) holdRestart(ctx context.Context, v *view, d lkg.Decision, prev checkpoint.Pointer, rollback bool) (held bool) {
	e := c.opts.External
	if e == nil || e.BeforeRestart == nil {
		return false
	}
	logger := klog.FromContext(ctx)
	rollback = rollback || d.UsingLastKnownGood || v.currentErr != nil || !lkg.Same(d.Run, v.current.Source)
	to, err := c.chosen(ctx, v, d.Run, d.UsingLastKnownGood)
	if err != nil {
		logger.Error(err, "Loading the config to restart for; restarting without asking BeforeRestart", "config", describe(d.Run))
		return false
	}
	// The hook may take minutes (a drain): not within the sync step's
	// deadline, and not cut short by a shutdown (it bounds its own time);
	// what follows it gets a deadline of its own.
	c.settleMu.Lock()
	c.setRestarting(true)
	herr := e.BeforeRestart(context.WithoutCancel(ctx), RestartPlan{To: to, Rollback: rollback})
	c.settleMu.Unlock()
	if herr == nil {
		return false
	}
	// Held or not, what follows decides: a held restart clears the mark
	// (the component runs on what it ran), any other answer restarts.
	defer func() {
		if held {
			c.setRestarting(false)
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.StartupSyncTimeout)
	defer cancel()
	if rollback {
		logger.Error(herr, "Before restarting for the rollback target; restarting anyway", "config", describe(d.Run))
		return false
	}
	running := c.snapshot().running.Source
	var ce *lkg.ConfigError
	if errors.As(herr, &ce) {
		logger.Error(herr, "The assigned config is refused on this node without trying it", "config", describe(d.Run))
		v2 := c.readState(ctx)
		v2.startups, v2.startupsErr = v.startups, v.startupsErr
		v2.applyErr = herr
		d2, _, err := c.decide(ctx, v2, nil, nil)
		if err != nil {
			logger.Error(err, "Deciding after the refusal")
			return false
		}
		if lkg.NextAction(running, d2, c.opts.Reload != nil) != lkg.ActionNone {
			return false
		}
		c.report(ctx)
		return true
	}
	logger.Error(herr, "The assigned config cannot be applied here now; staying on the config the component runs, which is not marked bad",
		"config", describe(d.Run), "running", describe(running))
	if err := c.restorePointer(prev); err != nil {
		// current stays the new config: the next start would run it
		// undrained, which is what a restart now does too.
		logger.Error(err, "Putting current back; restarting for the new config instead")
		return false
	}
	c.notApplied().set(d.Run, herr)
	v2 := c.readState(ctx)
	v2.startups, v2.startupsErr = v.startups, v.startupsErr
	d2, _, err := c.decide(ctx, v2, nil, nil)
	if err != nil {
		logger.Error(err, "Deciding after the config was not applied")
		return true
	}
	if lkg.NextAction(running, d2, c.opts.Reload != nil) != lkg.ActionNone {
		return false
	}
	c.report(ctx)
	c.warn(ctx, status.EventReasonConfigNotApplied, notAppliedReason(d.Run, herr))
	return true
}

// restorePointer points current at prev again, with its first run, so that
// the run that went on before is the same run (its trial, crash counting
// and confirmation go on).
func (c *Controller[T]) restorePointer(prev checkpoint.Pointer) error {
	if err := c.store.SetCurrent(prev.Source); err != nil {
		return err
	}
	if prev.FirstRun.IsZero() {
		return nil
	}
	_, err := c.store.RecordFirstRunAt(prev.FirstRun)
	return err
}

// chosen returns src (nil: the local config) with its payload from the
// state dir.
func (c *Controller[T]) chosen(ctx context.Context, v *view, src *corev1.NodeConfigSource, usingLastKnownGood bool) (Chosen, error) {
	ch := Chosen{Source: src, UsingLastKnownGood: usingLastKnownGood}
	if src == nil {
		return ch, nil
	}
	key, _ := checkpoint.KeyFromSource(src)
	cm, err := c.load(ctx, v, key)
	if err != nil {
		return Chosen{}, err
	}
	pk := nodeapi.PayloadKeyOf(src, c.opts.Profile.PayloadKey())
	ch.Document = &Document{
		Name: fmt.Sprintf("configmap %s/%s key %s", cm.Namespace, cm.Name, pk),
		Data: []byte(cm.Data[pk]),
	}
	return ch, nil
}

// notAppliedReason is ConfigOK's reason while the assigned config is not
// applied here: the config runs no trial and is not marked bad.
func notAppliedReason(assigned *corev1.NodeConfigSource, cause error) string {
	return fmt.Sprintf("assigned config (UID: %s) not applied on this node, which stays on the config it ran before (the assigned config is not marked bad; it is tried again when the assignment changes): %v",
		uidOf(assigned), cause)
}

// setRestarting records whether a restart of the external component has
// begun (Controller.restarting).
func (c *Controller[T]) setRestarting(v bool) {
	c.mu.Lock()
	c.restarting = v
	c.mu.Unlock()
}
