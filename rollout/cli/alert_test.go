package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestNotReconciledAlertMatchesStaleAfter ties the one threshold written
// twice, once here in Go and once in PromQL: the alert
// DynconfigRolloutNotReconciled (deploy/monitoring/prometheusrule.yaml)
// fires when a rollout's heartbeat is older than the age at which the CLI
// calls it STALE (StaleAfter). An operator who sees one must be able to
// expect the other; when either changes, this fails until both agree.
func TestNotReconciledAlertMatchesStaleAfter(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "monitoring", "prometheusrule.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	threshold := regexp.MustCompile(`dynconfig_rollout_last_reconcile_timestamp_seconds\)\)\s*>\s*([0-9]+)`)
	found := false
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "DynconfigRolloutNotReconciled" {
				continue
			}
			found = true
			m := threshold.FindStringSubmatch(r.Expr)
			if m == nil {
				t.Fatalf("%s: DynconfigRolloutNotReconciled has no `(time() - ...last_reconcile_timestamp_seconds)) > N`:\n%s", path, r.Expr)
			}
			secs, err := strconv.Atoi(m[1])
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(secs) * time.Second; got != StaleAfter {
				t.Errorf("%s: DynconfigRolloutNotReconciled fires past %v, but the CLI calls a rollout STALE past %v (StaleAfter): make them the same", path, got, StaleAfter)
			}
		}
	}
	if !found {
		t.Fatalf("%s: no alert DynconfigRolloutNotReconciled", path)
	}
}
