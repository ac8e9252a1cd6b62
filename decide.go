package dynconfig

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/status"
)

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
		ApplyError:      v.applyErr,
	}
	in.NotConfirmed = c.notConfirmed(ctx, v, cur, lastKnownGood, now) // Options.ConfirmWithin
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
	notApplied, cause := c.notApplied().get()
	if cause != nil && d.Problem == lkg.ProblemNone {
		report.Status, report.Reason = corev1.ConditionFalse, notAppliedReason(notApplied, cause)
	} else {
		notApplied = nil
	}
	c.mu.Lock()
	report = withRollbackCheck(report, lastKnownGood, c.st.rollbackCheckTarget, c.st.rollbackCheck)
	report = withReadOnly(report, c.store.ReadOnly())
	c.mu.Unlock()
	c.observe(ctx, d, cur, lastKnownGood, report)

	c.mu.Lock()
	c.st.current = v.current
	c.st.lastKnownGood = lastKnownGood
	c.st.trial = trial
	c.st.decision = d
	c.st.report = report
	c.st.syncFailed = syncErr != nil
	c.st.notApplied = notApplied
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
