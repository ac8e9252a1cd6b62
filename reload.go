package dynconfig

import (
	"context"
	"os"

	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/lkg"
)

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
	// The failure is an input of the one rule: the decision marks current
	// bad and rolls back, and its effects (mark, metrics, Event, report)
	// are those of any config found bad.
	v2 := c.readState(ctx)
	v2.startups, v2.startupsErr = v.startups, v.startupsErr
	v2.applyErr = err
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
