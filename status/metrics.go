package status

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// The values of the "source" label of the config info gauges.
const (
	// SourceLocal labels the local config (init file or defaults).
	SourceLocal = "local"
	// SourceConfigMap labels a remote ConfigMap config.
	SourceConfigMap = "configmap"
)

// The names of the metrics Metrics registers.
const (
	// MetricAssignedConfigInfo names the config assigned to the node.
	MetricAssignedConfigInfo = "dynconfig_assigned_config_info"
	// MetricActiveConfigInfo names the config the component runs.
	MetricActiveConfigInfo = "dynconfig_active_config_info"
	// MetricLastKnownGoodConfigInfo names the last-known-good config.
	MetricLastKnownGoodConfigInfo = "dynconfig_last_known_good_config_info"
	// MetricConfigErrorsTotal counts config problems by problem.
	MetricConfigErrorsTotal = "dynconfig_config_errors_total"
	// MetricRollbacksTotal counts rollbacks to the last-known-good config.
	MetricRollbacksTotal = "dynconfig_rollbacks_total"
	// MetricDeadEnd is 1 while the node is in a dead end (the rollback
	// target crash-loops too), else 0.
	MetricDeadEnd = "dynconfig_dead_end"
	// MetricQuarantinedFilesTotal counts corrupt or foreign state files
	// moved to the state dir's quarantine.
	MetricQuarantinedFilesTotal = "dynconfig_quarantined_files_total"
	// MetricLastKnownGoodUnusable is 1 while the rollback target, checked
	// while another config runs, could not be used if a rollback needed it
	// (its checkpoint is missing or damaged, or it no longer validates),
	// else 0.
	MetricLastKnownGoodUnusable = "dynconfig_last_known_good_unusable"
)

// Metrics exports the node's config state to Prometheus:
//
//	dynconfig_assigned_config_info{source,namespace,name,uid,resource_version}        1
//	dynconfig_active_config_info{source,namespace,name,uid,resource_version}          1
//	dynconfig_last_known_good_config_info{source,namespace,name,uid,resource_version} 1
//	dynconfig_config_errors_total{problem}
//	dynconfig_rollbacks_total
//	dynconfig_dead_end                                                                0 or 1
//	dynconfig_quarantined_files_total
//	dynconfig_last_known_good_unusable                                                0 or 1
//
// Each info gauge has at most one series, valued 1, naming the config (the
// local config has source="local" and empty other labels); a Set call
// deletes the previous series. A gauge has no series until its first Set.
//
// A nil *Metrics is valid: every method does nothing, so a caller can hold
// one unconditionally. Methods are safe for concurrent use.
type Metrics struct {
	mu            sync.Mutex
	assigned      info
	active        info
	lastKnownGood info
	errors        *prometheus.CounterVec
	rollbacks     prometheus.Counter
	deadEnd       prometheus.Gauge
	quarantined   prometheus.Counter
	lkgUnusable   prometheus.Gauge
}

// info is an info gauge and the labels of its one series (nil: none).
type info struct {
	vec    *prometheus.GaugeVec
	labels []string
}

func (i *info) set(src *corev1.NodeConfigSource) {
	labels := sourceLabels(src)
	if i.labels != nil && !slices.Equal(i.labels, labels) {
		i.vec.DeleteLabelValues(i.labels...)
	}
	i.vec.WithLabelValues(labels...).Set(1)
	i.labels = labels
}

func sourceLabels(src *corev1.NodeConfigSource) []string {
	if src == nil || src.ConfigMap == nil {
		return []string{SourceLocal, "", "", "", ""}
	}
	cm := src.ConfigMap
	return []string{SourceConfigMap, cm.Namespace, cm.Name, string(cm.UID), cm.ResourceVersion}
}

// NewMetrics creates the metrics and registers them with reg (required). To
// run several components in one process, give each its own registry or wrap
// reg with prometheus.WrapRegistererWith. On a registration error nothing
// stays registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("status: NewMetrics: reg is required")
	}
	newInfo := func(name, help string) info {
		return info{vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help},
			[]string{"source", "namespace", "name", "uid", "resource_version"})}
	}
	m := &Metrics{
		assigned:      newInfo(MetricAssignedConfigInfo, "The config assigned to this node; the one series is 1."),
		active:        newInfo(MetricActiveConfigInfo, "The config this node runs; the one series is 1."),
		lastKnownGood: newInfo(MetricLastKnownGoodConfigInfo, "The last-known-good config of this node; the one series is 1."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricConfigErrorsTotal,
			Help: "Config problems found (sync, load, decode, validation, crash loop), by problem.",
		}, []string{"problem"}),
		rollbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricRollbacksTotal,
			Help: "Times this node rolled back from its current config to its last-known-good config.",
		}),
		deadEnd: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricDeadEnd,
			Help: "1 while the rollback target crash-loops too (a dead end that needs a repair), else 0.",
		}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricQuarantinedFilesTotal,
			Help: "Corrupt or foreign state files moved to the state dir's quarantine.",
		}),
		lkgUnusable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricLastKnownGoodUnusable,
			Help: "1 while the last-known-good config could not be used if a rollback needed it (damaged or missing checkpoint, fails validation), else 0.",
		}),
	}
	collectors := []struct {
		name string
		c    prometheus.Collector
	}{
		{MetricAssignedConfigInfo, m.assigned.vec},
		{MetricActiveConfigInfo, m.active.vec},
		{MetricLastKnownGoodConfigInfo, m.lastKnownGood.vec},
		{MetricConfigErrorsTotal, m.errors},
		{MetricRollbacksTotal, m.rollbacks},
		{MetricDeadEnd, m.deadEnd},
		{MetricQuarantinedFilesTotal, m.quarantined},
		{MetricLastKnownGoodUnusable, m.lkgUnusable},
	}
	for i, c := range collectors {
		if err := reg.Register(c.c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done.c)
			}
			return nil, fmt.Errorf("status: NewMetrics: registering %s: %w", c.name, err)
		}
	}
	return m, nil
}

// SetAssigned records the assigned config (nil: local).
func (m *Metrics) SetAssigned(src *corev1.NodeConfigSource) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned.set(src)
}

// SetActive records the config in use (nil: local).
func (m *Metrics) SetActive(src *corev1.NodeConfigSource) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active.set(src)
}

// SetLastKnownGood records the last-known-good config (nil: local).
func (m *Metrics) SetLastKnownGood(src *corev1.NodeConfigSource) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastKnownGood.set(src)
}

// IncError counts one config problem. problem should come from a small
// fixed set (the Controller passes lkg.Problem names such as
// "ValidateFailed" or "CrashLoop"), since each value is a series.
func (m *Metrics) IncError(problem string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(problem).Inc()
}

// IncRollback counts one rollback to the last-known-good config.
func (m *Metrics) IncRollback() {
	if m == nil {
		return
	}
	m.rollbacks.Inc()
}

// SetDeadEnd records whether the node is in a dead end.
func (m *Metrics) SetDeadEnd(deadEnd bool) {
	if m == nil {
		return
	}
	setBool(m.deadEnd, deadEnd)
}

// IncQuarantined counts one state file moved to the quarantine.
func (m *Metrics) IncQuarantined() {
	if m == nil {
		return
	}
	m.quarantined.Inc()
}

// SetLastKnownGoodUnusable records whether the rollback target could not be
// used if a rollback needed it.
func (m *Metrics) SetLastKnownGoodUnusable(unusable bool) {
	if m == nil {
		return
	}
	setBool(m.lkgUnusable, unusable)
}

// setBool sets a 0-or-1 gauge.
func setBool(g prometheus.Gauge, b bool) {
	if b {
		g.Set(1)
	} else {
		g.Set(0)
	}
}
