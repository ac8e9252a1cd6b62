package controller

import (
	"sync"
	"time"
)

// planPacing is how long, relative to the time a plan of a rollout took,
// the controller waits after it before it plans that rollout again. A plan
// reads every node of the fleet (O(nodes)), and during a rollout every
// component report is an event that asks for one: planned back to back,
// the plans of a 20,000-node rollout kept a core busy, on the machine
// that also runs the API server the rollout waits for. Paced, the
// planning of one rollout takes at most 1/(1+planPacing) of a core, and
// what waits is the events' answer, by at most planPacing times a plan
// (milliseconds at 1,000 nodes, a few tenths of a second at 50,000).
// Patches and status writes, which wait for the API server, do not count:
// only the planning does.
const planPacing = 2

// pacer remembers, per rollout key, when it may be planned again. Real
// time, whatever the controller's Clock: it paces CPU, not the rollout's
// logic. The zero pacer is ready.
type pacer struct {
	mu   sync.Mutex
	next map[string]time.Time
}

// wait returns how long the rollout key must wait before its next plan;
// 0: plan now.
func (p *pacer) wait(key string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := time.Until(p.next[key]); d > 0 {
		return d
	}
	return 0
}

// planned records that planning key took took, just now.
func (p *pacer) planned(key string, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.next == nil {
		p.next = map[string]time.Time{}
	}
	if len(p.next) >= 1024 {
		// Rollouts come and go: drop the ones free to plan anyway.
		for k, t := range p.next {
			if !t.After(now) {
				delete(p.next, k)
			}
		}
	}
	p.next[key] = now.Add(planPacing * took)
}

// defaultPatchParallelism is Options.PatchParallelism's default. The
// client's rate limit (dynconfig-rollout --kube-api-qps and
// --kube-api-burst) bounds the rate; this bounds the round trips a batch
// waits for: 64 patches in flight on the client's one HTTP/2 connection,
// well inside the API server's limit of mutating requests in flight
// (200 by default), which API Priority and Fairness shares among clients.
const defaultPatchParallelism = 64
