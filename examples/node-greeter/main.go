package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/merge"
)

func main() {
	app.Main(newCommand(nil))
}

// newCommand builds the command; options, when set, adjusts the Component
// (the tests give it a fake API client).
func newCommand(options func(*app.Component[NodeGreeterConfiguration])) *cobra.Command {
	var current atomic.Pointer[NodeGreeterConfiguration]
	// greeted is the config of the last greeting: the greeter's own word
	// on its health (a config is healthy once it greeted with it).
	var greeted atomic.Pointer[NodeGreeterConfiguration]
	c := app.Component[NodeGreeterConfiguration]{
		Name:        "node-greeter",
		Short:       "Greets its node at an interval, with a greeting dynconfig chooses",
		Profile:     Profile{},
		DefaultPort: 10299,
		ConfigFlags: func(fs *pflag.FlagSet) map[string]merge.FlagBinding {
			fs.String("greeting", "", "Config field greeting; overrides every config layer when set.")
			return map[string]merge.FlagBinding{"greeting": {Path: "greeting"}}
		},
		Run: func(ctx context.Context, cfg *NodeGreeterConfiguration, env app.Env) error {
			current.CompareAndSwap(nil, cfg)
			for {
				cfg := current.Load()
				klog.FromContext(ctx).Info(cfg.Greeting, "node", env.NodeName)
				greeted.Store(cfg)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(cfg.Interval.Duration):
				}
			}
		},
		// Healthy on a config once it greeted with it (after Start, or
		// after a Reload, at the next greeting): promoted only then, and
		// with --confirm-within reverted when that does not happen in
		// time.
		Health: app.Poll(100*time.Millisecond, func(_ context.Context, cfg *NodeGreeterConfiguration, _ app.Env) error {
			if greeted.Load() != cfg {
				return errors.New("no greeting with this config yet")
			}
			return nil
		}),
		Reload: func(_ context.Context, cfg *NodeGreeterConfiguration) error {
			current.Store(cfg)
			return nil
		},
	}
	if options != nil {
		options(&c)
	}
	return app.NewCommand(c)
}
