package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// HealthGate is a component's health gate for one config: it returns nil
// once the component runs cfg well, or an error when ctx ends first (the
// component moved to another config, or is stopping). The command calls it
// for each config the component runs, after Start and once the endpoints
// serve, and after each Reload; when it returns nil, the command confirms
// the config healthy (dynconfig's MarkHealthy): the config may then become
// last-known-good after its trial, and with --confirm-within it is not
// reverted. env carries Address, the endpoints' bound address.
//
// The component's own code can be the gate (wait on a channel it closes
// once it is ready for cfg), or a built-in one: Poll retries a check,
// HTTPGet probes an endpoint as a kubelet probes a container, AllOf
// combines gates.
type HealthGate[T any] func(ctx context.Context, cfg *T, env Env) error

// DefaultProbeInterval is how often Poll and HTTPGet try again when the
// interval given is zero or less.
const DefaultProbeInterval = time.Second

// Poll returns a gate that calls check every interval (DefaultProbeInterval
// when zero or less), each try bounded by the interval, until it returns
// nil. A failing check is logged at verbosity 2; the gate's error, when ctx
// ends first, carries the last failure.
func Poll[T any](interval time.Duration, check func(ctx context.Context, cfg *T, env Env) error) HealthGate[T] {
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	return func(ctx context.Context, cfg *T, env Env) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			cctx, cancel := context.WithTimeout(ctx, interval)
			err := check(cctx, cfg, env)
			cancel()
			if err == nil {
				return nil
			}
			klog.FromContext(ctx).V(2).Info("Not healthy yet", "err", err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w; last check: %w", ctx.Err(), err)
			case <-t.C:
			}
		}
	}
}

// HTTPGet returns a gate that probes an HTTP endpoint until it answers a
// status from 200 to 399, as the kubelet's httpGet probe counts success:
// url returns the URL for cfg (a component's own healthz, say
// "http://"+env.Address+"/healthz" for the endpoints the command serves).
// Redirects are not followed. Tries every interval (DefaultProbeInterval
// when zero or less), each bounded by it. Like the kubelet's prober it uses
// no proxy and no keep-alive: a probe leaves no connection open (an idle
// one that never carried a request would hold up the graceful shutdown of
// the server it probes).
func HTTPGet[T any](interval time.Duration, url func(cfg *T, env Env) string) HealthGate[T] {
	client := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true, DisableCompression: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return Poll(interval, func(ctx context.Context, cfg *T, env Env) error {
		u := url(cfg, env)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fmt.Errorf("health probe %s: %w", u, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("health probe: %w", err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("health probe GET %s: HTTP %d", u, resp.StatusCode)
		}
		return nil
	})
}

// AllOf returns a gate that passes once every gate passed (run at the same
// time); it fails with the first failure when ctx ends first.
func AllOf[T any](gates ...HealthGate[T]) HealthGate[T] {
	return func(ctx context.Context, cfg *T, env Env) error {
		errs := make([]error, len(gates))
		var wg sync.WaitGroup
		for i, g := range gates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = g(ctx, cfg, env)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}

// healthRunner runs the component's gate for the config that runs now:
// start replaces the gate of the config before (which is stopped), and the
// confirmation it makes is bound to its config (a gate of an older config
// that passes late confirms nothing).
type healthRunner[T any] struct {
	gate HealthGate[T]

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs the gate for cfg in the background and calls mark when it
// passes. A nil gate marks at once (the config is healthy once it is
// served).
func (h *healthRunner[T]) start(ctx context.Context, cfg *T, env Env, mark func()) {
	h.stop()
	if h.gate == nil {
		mark()
		return
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	h.mu.Lock()
	h.cancel, h.done = cancel, done
	h.mu.Unlock()
	go func() {
		defer close(done)
		logger := klog.FromContext(ctx)
		if err := h.gate(gctx, cfg, env); err != nil {
			if gctx.Err() == nil {
				logger.Error(err, "The health gate failed; the config is not confirmed healthy")
			}
			return
		}
		logger.Info("The component is healthy on its config")
		mark()
	}()
}

// stop ends the running gate and waits for it.
func (h *healthRunner[T]) stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.cancel, h.done = nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
