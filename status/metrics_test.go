package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// exposition gathers reg in the Prometheus text format, as a scrape sees
// it. (client_golang's testutil would do this, but it needs a module this
// one does not require.)
func exposition(t testing.TB, reg prometheus.Gatherer) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		// The dead-end gauge and the quarantine counter have their own test.
		if f.GetName() == MetricDeadEnd || f.GetName() == MetricQuarantinedFilesTotal || f.GetName() == MetricLastKnownGoodUnusable {
			continue
		}
		if err := enc.Encode(f); err != nil {
			t.Fatalf("encoding %s: %v", f.GetName(), err)
		}
	}
	return buf.String()
}

func configMapSource(uid types.UID, rv string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "kubelet-config", UID: uid, ResourceVersion: rv, KubeletConfigKey: "kubelet"}}
}

const (
	helpAssigned = "# HELP dynconfig_assigned_config_info The config assigned to this node; the one series is 1.\n# TYPE dynconfig_assigned_config_info gauge\n"
	helpActive   = "# HELP dynconfig_active_config_info The config this node runs; the one series is 1.\n# TYPE dynconfig_active_config_info gauge\n"
	helpLKG      = "# HELP dynconfig_last_known_good_config_info The last-known-good config of this node; the one series is 1.\n# TYPE dynconfig_last_known_good_config_info gauge\n"
	helpErrors   = "# HELP dynconfig_config_errors_total Config problems found (sync, load, decode, validation, crash loop), by problem.\n# TYPE dynconfig_config_errors_total counter\n"
	helpRollback = "# HELP dynconfig_rollbacks_total Times this node rolled back from its current config to its last-known-good config.\n# TYPE dynconfig_rollbacks_total counter\n"
)

// TestMetricsTimeline applies a rollout and a rollback to one Metrics and
// compares the whole exposition after each step: each info gauge keeps
// exactly one series, and the counters count.
func TestMetricsTimeline(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	good, bad := configMapSource("uid-good", "10"), configMapSource("uid-bad", "11")
	steps := []struct {
		name  string
		apply func()
		want  string
	}{
		{
			name:  "nothing set yet",
			apply: func() {},
			want:  helpRollback + "dynconfig_rollbacks_total 0\n",
		},
		{
			name: "startup on local",
			apply: func() {
				m.SetAssigned(nil)
				m.SetActive(nil)
				m.SetLastKnownGood(nil)
			},
			want: helpActive + `dynconfig_active_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1` + "\n" +
				helpAssigned + `dynconfig_assigned_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1` + "\n" +
				helpLKG + `dynconfig_last_known_good_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1` + "\n" +
				helpRollback + "dynconfig_rollbacks_total 0\n",
		},
		{
			name: "good config assigned, running, promoted",
			apply: func() {
				m.SetAssigned(good)
				m.SetActive(good)
				m.SetLastKnownGood(good)
			},
			want: helpActive + `dynconfig_active_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpAssigned + `dynconfig_assigned_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpLKG + `dynconfig_last_known_good_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpRollback + "dynconfig_rollbacks_total 0\n",
		},
		{
			name: "bad config assigned, fails validation, rolled back",
			apply: func() {
				m.SetAssigned(bad)
				m.SetActive(bad)
				m.IncError("ValidateFailed")
				m.IncRollback()
				m.SetActive(good)
			},
			want: helpActive + `dynconfig_active_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpAssigned + `dynconfig_assigned_config_info{name="kubelet-config",namespace="kube-system",resource_version="11",source="configmap",uid="uid-bad"} 1` + "\n" +
				helpErrors + `dynconfig_config_errors_total{problem="ValidateFailed"} 1` + "\n" +
				helpLKG + `dynconfig_last_known_good_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpRollback + "dynconfig_rollbacks_total 1\n",
		},
		{
			name: "same values again change nothing; a second problem kind",
			apply: func() {
				m.SetActive(good)
				m.SetAssigned(bad)
				m.IncError("ValidateFailed")
				m.IncError("SyncFailed")
			},
			want: helpActive + `dynconfig_active_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpAssigned + `dynconfig_assigned_config_info{name="kubelet-config",namespace="kube-system",resource_version="11",source="configmap",uid="uid-bad"} 1` + "\n" +
				helpErrors + `dynconfig_config_errors_total{problem="SyncFailed"} 1` + "\n" +
				`dynconfig_config_errors_total{problem="ValidateFailed"} 2` + "\n" +
				helpLKG + `dynconfig_last_known_good_config_info{name="kubelet-config",namespace="kube-system",resource_version="10",source="configmap",uid="uid-good"} 1` + "\n" +
				helpRollback + "dynconfig_rollbacks_total 1\n",
		},
		{
			name: "assignment removed: back to local",
			apply: func() {
				m.SetAssigned(nil)
				m.SetActive(nil)
				m.SetLastKnownGood(nil)
			},
			want: helpActive + `dynconfig_active_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1` + "\n" +
				helpAssigned + `dynconfig_assigned_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1` + "\n" +
				helpErrors + `dynconfig_config_errors_total{problem="SyncFailed"} 1` + "\n" +
				`dynconfig_config_errors_total{problem="ValidateFailed"} 2` + "\n" +
				helpLKG + `dynconfig_last_known_good_config_info{name="",namespace="",resource_version="",source="local",uid=""} 1` + "\n" +
				helpRollback + "dynconfig_rollbacks_total 1\n",
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.apply()
			if diff := cmp.Diff(s.want, exposition(t, reg)); diff != "" {
				t.Errorf("exposition (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMetricsOneSeriesPerGauge changes the active config many times, an
// in-place ConfigMap edit (same UID, new resourceVersion) included, and
// counts the series.
func TestMetricsOneSeriesPerGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	sources := []*corev1.NodeConfigSource{nil, configMapSource("a", "1"), configMapSource("a", "2"), configMapSource("b", "1"), nil, configMapSource("a", "1")}
	for i, src := range sources {
		m.SetActive(src)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var series []string
		for _, f := range families {
			if f.GetName() != MetricActiveConfigInfo {
				continue
			}
			for _, metric := range f.GetMetric() {
				var labels []string
				for _, l := range metric.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				series = append(series, strings.Join(labels, ","))
			}
		}
		want := []string{"name=" + sourceLabels(src)[2] + ",namespace=" + sourceLabels(src)[1] +
			",resource_version=" + sourceLabels(src)[4] + ",source=" + sourceLabels(src)[0] + ",uid=" + sourceLabels(src)[3]}
		if diff := cmp.Diff(want, series); diff != "" {
			t.Errorf("after SetActive #%d (%s): series (-want +got):\n%s", i, nodeapi.DescribeSource(src), diff)
		}
	}
}

func TestNilMetricsIsSafe(t *testing.T) {
	var m *Metrics
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"SetAssigned", func() { m.SetAssigned(configMapSource("a", "1")) }},
		{"SetActive", func() { m.SetActive(nil) }},
		{"SetLastKnownGood", func() { m.SetLastKnownGood(nil) }},
		{"IncError", func() { m.IncError("SyncFailed") }},
		{"IncRollback", func() { m.IncRollback() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s on a nil *Metrics panicked: %v", tc.name, p)
				}
			}()
			tc.call()
		})
	}
}

func TestNewMetricsErrors(t *testing.T) {
	if _, err := NewMetrics(nil); err == nil || !strings.Contains(err.Error(), "reg is required") {
		t.Errorf("NewMetrics(nil) error = %v, want reg is required", err)
	}

	// Another collector holds our last metric (with the same help: a
	// registry never forgets a name's help and labels): NewMetrics fails,
	// names the metric, and leaves nothing of its own registered, so it
	// succeeds once the other collector is gone.
	reg := prometheus.NewRegistry()
	foreign := prometheus.NewCounter(prometheus.CounterOpts{Name: MetricRollbacksTotal,
		Help: "Times this node rolled back from its current config to its last-known-good config."})
	reg.MustRegister(foreign)
	_, err := NewMetrics(reg)
	if err == nil || !strings.Contains(err.Error(), "registering "+MetricRollbacksTotal) {
		t.Fatalf("NewMetrics with a clash: error = %v, want one naming %s", err, MetricRollbacksTotal)
	}
	reg.Unregister(foreign)
	if _, err := NewMetrics(reg); err != nil {
		t.Fatalf("NewMetrics after removing the clash (something was left registered): %v", err)
	}
	if _, err := NewMetrics(reg); err == nil || !strings.Contains(err.Error(), "registering "+MetricAssignedConfigInfo) {
		t.Fatalf("second NewMetrics on one registry: error = %v, want one naming %s", err, MetricAssignedConfigInfo)
	}
}

func BenchmarkMetricsSetActive(b *testing.B) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	srcs := [2]*corev1.NodeConfigSource{configMapSource("a", "1"), configMapSource("b", "2")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.SetActive(srcs[i&1]) // a config change every time: delete + create a series
		i++
	}
}

func TestDeadEndAndQuarantineMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				if g := f.GetMetric()[0].GetGauge(); g != nil {
					return g.GetValue()
				}
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatalf("%s not exported", name)
		return 0
	}
	if v := value(MetricDeadEnd); v != 0 {
		t.Fatalf("dead end %v before any report", v)
	}
	m.SetDeadEnd(true)
	if v := value(MetricDeadEnd); v != 1 {
		t.Fatalf("dead end %v, want 1", v)
	}
	m.SetDeadEnd(false)
	if v := value(MetricDeadEnd); v != 0 {
		t.Fatalf("dead end %v after recovery, want 0", v)
	}
	m.IncQuarantined()
	m.IncQuarantined()
	if v := value(MetricQuarantinedFilesTotal); v != 2 {
		t.Fatalf("quarantined %v, want 2", v)
	}
	if v := value(MetricLastKnownGoodUnusable); v != 0 {
		t.Fatalf("last-known-good unusable %v before any check", v)
	}
	m.SetLastKnownGoodUnusable(true)
	if v := value(MetricLastKnownGoodUnusable); v != 1 {
		t.Fatalf("last-known-good unusable %v, want 1", v)
	}
	m.SetLastKnownGoodUnusable(false)
	if v := value(MetricLastKnownGoodUnusable); v != 0 {
		t.Fatalf("last-known-good unusable %v after a repair, want 0", v)
	}
	var nilMetrics *Metrics
	nilMetrics.SetDeadEnd(true)
	nilMetrics.IncQuarantined()
	nilMetrics.SetLastKnownGoodUnusable(true)
}
