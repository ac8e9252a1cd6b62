package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// series gathers reg into "name{k=v,...}" -> value (labels in the
// registry's sorted order).
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			key += "}"
			out[key] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// The alerts in deploy/monitoring select on these names and labels: a
// halt names its rollout, nodes are counted by state, and the step start
// and the last reconcile are exported so that "stuck in a step" and
// "nobody reconciles it" can be told apart.
func TestMetricsLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(time.Unix(1700000000, 0))
	beat := metav1.NewTime(time.Unix(1700000600, 0))
	ro := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "cfg", Name: "r1"}}
	ro.Status = v1alpha1.ConfigRolloutStatus{Phase: v1alpha1.PhaseHalted, StepStartedAt: &started, LastReconcileTime: &beat, Selected: 5, Failed: 3}
	m.observe(ro)
	m.halted("cfg", "r1")

	got := series(t, reg)
	for k, want := range map[string]float64{
		"dynconfig_rollout_halts_total{name=r1,namespace=cfg}":                      1,
		"dynconfig_rollout_step_started_timestamp_seconds{name=r1,namespace=cfg}":   1700000000,
		"dynconfig_rollout_last_reconcile_timestamp_seconds{name=r1,namespace=cfg}": 1700000600,
		"dynconfig_rollout_nodes{name=r1,namespace=cfg,state=failed}":               3,
		"dynconfig_rollout_nodes{name=r1,namespace=cfg,state=selected}":             5,
		"dynconfig_rollout_phase{name=r1,namespace=cfg,phase=Halted}":               1,
		"dynconfig_rollout_phase{name=r1,namespace=cfg,phase=Progressing}":          0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	hb, ok := got["dynconfig_rollout_last_observed_timestamp_seconds{name=r1,namespace=cfg}"]
	if d := time.Since(time.Unix(int64(hb), 0)); !ok || d > time.Minute || d < -time.Minute {
		t.Errorf("last observed = %v (present %v), want about now", hb, ok)
	}

	m.forget("cfg", "r1")
	for k := range series(t, reg) {
		if k != "dynconfig_rollout_reconcile_duration_seconds{}" {
			t.Errorf("after forget: %s is left", k)
		}
	}
}
