package controller

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// metrics are the controller's Prometheus metrics.
type metrics struct {
	nodes     *prometheus.GaugeVec
	phase     *prometheus.GaugeVec
	patches   *prometheus.CounterVec
	writes    *prometheus.CounterVec
	halts     *prometheus.CounterVec
	reconcile prometheus.Histogram
	// stepStart is status.stepStartedAt as Unix seconds: how long a
	// rollout has been in its step survives a change of leader.
	stepStart *prometheus.GaugeVec
	// observed is when this process last planned or observed the rollout
	// (a heartbeat: stale while no leader reconciles it).
	observed *prometheus.GaugeVec
	// heartbeat is status.lastReconcileTime as Unix seconds: it stops
	// moving when no controller reconciles the rollout or its status
	// writes fail, whoever exports it.
	heartbeat *prometheus.GaugeVec
}

var phases = []v1alpha1.RolloutPhase{
	v1alpha1.PhasePending, v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseHalted,
	v1alpha1.PhaseCompleted, v1alpha1.PhaseReverted, v1alpha1.PhaseAborted,
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynconfig_rollout_nodes",
			Help: "Nodes of a ConfigRollout by state (selected, assigned, in_trial, promoted, failed), as in its status.",
		}, []string{"namespace", "name", "state"}),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynconfig_rollout_phase",
			Help: "1 for the phase a ConfigRollout is in, 0 for the others.",
		}, []string{"namespace", "name", "phase"}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dynconfig_rollout_node_patches_total",
			Help: "Node patches made, by kind (assign: assignment and claim; claim: a failure written into the claim or a claim of a node already on the config; revert: the previous source back and the claim off; release: the claim off alone; preflight: a pre-flight request) and result (ok, conflict, error).",
		}, []string{"kind", "result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dynconfig_rollout_status_writes_total",
			Help: "ConfigRollout status updates, by result (ok, conflict, error).",
		}, []string{"result"}),
		halts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dynconfig_rollout_halts_total",
			Help: "Times a ConfigRollout halted under this process (a new leader starts at 0: alert on dynconfig_rollout_phase).",
		}, []string{"namespace", "name"}),
		stepStart: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynconfig_rollout_step_started_timestamp_seconds",
			Help: "When a ConfigRollout entered its current step (status.stepStartedAt), as Unix seconds; no series before the first step.",
		}, []string{"namespace", "name"}),
		observed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynconfig_rollout_last_observed_timestamp_seconds",
			Help: "When this process last reconciled a ConfigRollout, as Unix seconds.",
		}, []string{"namespace", "name"}),
		heartbeat: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynconfig_rollout_last_reconcile_timestamp_seconds",
			Help: "A ConfigRollout's status.lastReconcileTime (the controller's heartbeat, refreshed every --status-heartbeat-interval while it has work left), as Unix seconds.",
		}, []string{"namespace", "name"}),
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dynconfig_rollout_reconcile_duration_seconds",
			Help:    "Time to plan a ConfigRollout and write the result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.nodes, m.phase, m.patches, m.writes, m.halts, m.reconcile, m.stepStart, m.observed, m.heartbeat} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register rollout metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(r *v1alpha1.ConfigRollout) {
	ns, name := r.Namespace, r.Name
	st := &r.Status
	for k, v := range map[string]int32{"selected": st.Selected, "assigned": st.Assigned, "in_trial": st.InTrial, "promoted": st.Promoted, "failed": st.Failed} {
		m.nodes.WithLabelValues(ns, name, k).Set(float64(v))
	}
	for _, p := range phases {
		v := 0.0
		if st.Phase == p {
			v = 1
		}
		m.phase.WithLabelValues(ns, name, string(p)).Set(v)
	}
	if st.StepStartedAt != nil {
		m.stepStart.WithLabelValues(ns, name).Set(float64(st.StepStartedAt.Unix()))
	} else {
		m.stepStart.DeleteLabelValues(ns, name)
	}
	m.observed.WithLabelValues(ns, name).Set(float64(time.Now().UnixNano()) / 1e9)
	if st.LastReconcileTime != nil {
		m.heartbeat.WithLabelValues(ns, name).Set(float64(st.LastReconcileTime.Unix()))
	}
}

// halted counts a halt of rollout ns/name.
func (m *metrics) halted(ns, name string) {
	m.halts.WithLabelValues(ns, name).Inc()
}

func (m *metrics) forget(ns, name string) {
	m.nodes.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	m.phase.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	for _, v := range []*prometheus.GaugeVec{m.stepStart, m.observed, m.heartbeat} {
		v.DeleteLabelValues(ns, name)
	}
	m.halts.DeleteLabelValues(ns, name)
}
