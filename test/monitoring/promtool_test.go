package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/internal/testenv"
)

const dir = "../../deploy/monitoring"

// The files that register the metrics the alerts and the dashboard use.
var metricSources = []string{"../../status/metrics.go", "../../rollout/controller/metrics.go"}

// promtool finds the promtool binary. CI (.ci/run) installs it; elsewhere
// the test skips without it (testenv.Missing), and says how to get it.
func promtool(t *testing.T) string {
	t.Helper()
	return testenv.LookPath(t, "promtool", "apt-get install prometheus")
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleGroups returns spec.groups of the PrometheusRule as a Prometheus
// rule file.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []json.RawMessage `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		t.Fatalf("prometheusrule.yaml: kind %q with %d groups, want a PrometheusRule with groups", pr.Kind, len(pr.Spec.Groups))
	}
	out, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAlertRules runs `promtool check rules` and `promtool test rules` on
// the PrometheusRule and alerts_test.yaml, and checks that every alert is
// tested.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	tmp := t.TempDir()
	rules := ruleGroups(t)
	if err := os.WriteFile(filepath.Join(tmp, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(dir, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, tmp, bin, "check", "rules", "rules.yaml")
	out := run(t, tmp, bin, "test", "rules", "alerts_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules did not say SUCCESS:\n%s", out)
	}

	// Each alert has a test in which it fires and one in which it does not.
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	var ut struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &ut); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range ut.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: tested firing %v, tested quiet %v; want both in alerts_test.yaml", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if n < 7 {
		t.Errorf("%d alerts, want at least 7 (ConfigOK, dead end, rollback, quarantine, halted, no progress, controller down)", n)
	}
}

var (
	metricName = regexp.MustCompile(`\bdynconfig_[a-z_]+`)
	// Go string literals that name a metric.
	registered = regexp.MustCompile(`"(dynconfig_[a-z_]+)"`)
)

// exported returns the metric names the code registers (string literals
// in the metric sources).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range metricSources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range registered.FindAllStringSubmatch(string(data), -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d metric names in %v, want the status and rollout metrics", len(names), metricSources)
	}
	return names
}

// dashboardQueries returns every query of dashboard.json.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard.json: panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// TestMetricNamesExist fails when an alert or a dashboard query names a
// dynconfig metric the code does not register (a rename in the code
// would otherwise leave an alert that can never fire).
func TestMetricNamesExist(t *testing.T) {
	names := exported(t)
	used := map[string]bool{}
	for _, m := range metricName.FindAllString(string(ruleGroups(t)), -1) {
		used[m] = true
	}
	for _, q := range dashboardQueries(t) {
		for _, m := range metricName.FindAllString(q, -1) {
			used[m] = true
		}
	}
	var missing []string
	for m := range used {
		base := m
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && names[b] {
				base = b
			}
		}
		if !names[base] {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("alerts or dashboard name metrics the code does not register: %v (registered: %v)", missing, names)
	}
	for _, want := range []string{"dynconfig_dead_end", "dynconfig_rollbacks_total", "dynconfig_quarantined_files_total",
		"dynconfig_rollout_phase", "dynconfig_rollout_step_started_timestamp_seconds", "dynconfig_rollout_nodes",
		"dynconfig_rollout_halts_total", "dynconfig_rollout_reconcile_duration_seconds_bucket"} {
		if !used[want] {
			t.Errorf("%s is used by no alert or dashboard panel", want)
		}
	}
}

// TestDashboardQueriesParse has promtool parse every dashboard query, as
// a recording rule (Grafana's variables replaced by values).
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtool(t)
	repl := strings.NewReplacer(`"$namespace"`, `".*"`, "$__rate_interval", "5m")
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, q := range dashboardQueries(t) {
		rules = append(rules, rule{Record: "dashboard:query" + string(rune('a'+i)), Expr: repl.Replace(q)})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "dashboard-rules.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, tmp, bin, "check", "rules", "dashboard-rules.yaml")
}
