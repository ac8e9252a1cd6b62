package dynconfig

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/status"
)

type recordedEvents struct {
	mu     sync.Mutex
	events []string
}

func (r *recordedEvents) RecordConfigChanged(_ context.Context, msg string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "ConfigChanged: "+msg)
	return nil
}

func (r *recordedEvents) RecordRolledBack(_ context.Context, msg string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "ConfigRolledBack: "+msg)
	return nil
}

func (r *recordedEvents) RecordWarning(_ context.Context, reason, msg string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, reason+": "+msg)
	return nil
}

func (r *recordedEvents) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func activeUID(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == status.MetricActiveConfigInfo {
			for _, m := range mf.GetMetric() {
				return label(m, "uid")
			}
		}
	}
	return "<none>"
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestEventsAndMetrics(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	n.configMap("b", "uid-b", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`, nil)
	n.assign("a", "uid-a")
	reg := prometheus.NewRegistry()
	metrics, err := status.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	events := &recordedEvents{}
	withObservers := func(o *Options[testConfig]) { o.Metrics = metrics; o.Events = events }

	c := n.controller(withObservers)
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	if uid := activeUID(t, reg); uid != "uid-a" {
		t.Fatalf("active config metric uid %q, want uid-a", uid)
	}
	// A new invalid assignment while running: the running process finds it
	// bad, records the rollback, and restarts onto the last-known-good
	// (local: a was still on trial). No ConfigChanged: b never runs.
	ctx, cancel := context.WithCancel(n.ctx())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	n.assign("b", "uid-b")
	waitFor(t, func() bool { return n.restarts.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	ev := events.list()
	if len(ev) != 1 || ev[0] != "ConfigRolledBack: failed to validate current (UID: uid-b); using last-known-good (default)" {
		t.Fatalf("events %q", ev)
	}
	if got := counterValue(t, reg, status.MetricRollbacksTotal); got != 1 {
		t.Fatalf("rollbacks %v, want 1", got)
	}
	// The restarted process runs the local config.
	c = n.controller(withObservers)
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if uid := activeUID(t, reg); uid != "" {
		t.Fatalf("active config metric uid %q, want local (a was still on trial)", uid)
	}
	// A valid assignment while running: ConfigChanged, then the restart.
	n.configMap("c", "uid-c", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 3}`, nil)
	c = n.controller(withObservers)
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(n.ctx())
	go func() { done <- c.Run(ctx) }()
	n.assign("c", "uid-c")
	waitFor(t, func() bool { return n.restarts.Load() == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	if ev := events.list(); len(ev) != 2 || !strings.HasPrefix(ev[1], "ConfigChanged: config changed to ConfigMap kube-system/c (UID: uid-c") {
		t.Fatalf("events %q", ev)
	}
	n.assign("b", "uid-b")
	// A later start on the marked config is not a new rollback.
	c = n.controller(withObservers)
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := counterValue(t, reg, status.MetricRollbacksTotal); got != 1 || len(events.list()) != 2 {
		t.Fatalf("rollbacks %v events %d after a repeat start; want 1 and 2", got, len(events.list()))
	}
}

// Defect 12: a dead end is visible: the condition's reason, a ConfigDeadEnd
// Warning Event and the dynconfig_dead_end gauge.
func TestDeadEndIsVisible(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`,
		map[string]string{components.CrashLoopThresholdAnnotation: "0", components.TrialDurationAnnotation: "10m"})
	n.assign("a", "uid-a")
	reg := prometheus.NewRegistry()
	metrics, err := status.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	events := &recordedEvents{}
	start := func() status.Report {
		t.Helper()
		c := n.controller(func(o *Options[testConfig]) { o.Metrics = metrics; o.Events = events })
		if _, err := c.Bootstrap(n.ctx()); err != nil {
			t.Fatal(err)
		}
		c.Close()
		n.clock.Step(time.Second)
		return n.reporter.last()
	}
	start() // adopts a
	if r := start(); r.Reason != status.CrashLoopReason("uid-a") {
		t.Fatalf("first crash restart: %+v", r)
	}
	if got := gaugeValue(t, reg, status.MetricDeadEnd); got != 0 {
		t.Fatalf("dead-end gauge %v before the dead end", got)
	}
	r := start() // the rollback target crashes too
	wantReason := status.DeadEndReason(status.CrashLoopReason("uid-a"), true)
	if r.Reason != wantReason {
		t.Fatalf("condition %+v; want reason %q", r, wantReason)
	}
	if got := gaugeValue(t, reg, status.MetricDeadEnd); got != 1 {
		t.Fatalf("dead-end gauge %v, want 1", got)
	}
	var deadEnds []string
	for _, e := range events.list() {
		if strings.HasPrefix(e, status.EventReasonConfigDeadEnd+": ") {
			deadEnds = append(deadEnds, e)
		}
	}
	if len(deadEnds) != 1 || !strings.Contains(deadEnds[0], wantReason) {
		t.Fatalf("ConfigDeadEnd events %q; want one with the reason", deadEnds)
	}
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not exported", name)
	return 0
}

// TestNewerFormatPointerIsReported: a current pointer of a format newer
// than this version reads (a downgrade of the component) is no damage
// (checkpoint's compatibility policy): nothing is quarantined, the
// component runs (here: it re-adopts its assignment) and it says why, as
// a Warning Event naming the file and the format, not only in its log.
func TestNewerFormatPointerIsReported(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: 1}`, nil)
	n.assign("a", "uid-a")
	if cfg, _ := n.start(); cfg == nil || cfg.Value != 1 {
		t.Fatalf("first start: %+v", cfg)
	}
	path := filepath.Join(n.stateDir, "meta", "current")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	newer := bytes.Replace(data, []byte(`/v1"`), []byte(`/v2"`), 1)
	if bytes.Equal(newer, data) {
		t.Fatalf("no format version to raise in %s: %s", path, data)
	}
	if err := os.WriteFile(path, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	events := &recordedEvents{}
	c := n.controller(func(o *Options[testConfig]) { o.Events = events })
	defer c.Close()
	if _, err := c.Bootstrap(n.ctx()); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range events.list() {
		if strings.HasPrefix(e, status.EventReasonStateNewerFormat+": ") && strings.Contains(e, "meta/current") && strings.Contains(e, "newer") {
			found = true
		}
	}
	if !found {
		t.Fatalf("events %q, want a %s Warning naming meta/current", events.list(), status.EventReasonStateNewerFormat)
	}
}
