// Package monitoring tests deploy/monitoring with the real promtool
// (Debian's prometheus package; .ci/run installs it): the PrometheusRule's
// rules pass `promtool check rules`, every alert fires and stays quiet as
// alerts_test.yaml says (`promtool test rules`), the Grafana dashboard's
// queries parse, and every dynconfig_* metric they name is one the code
// registers. TestPrometheusAlertFires runs the real Prometheus on the real
// rollout controller (authenticated scrape, heartbeat, a halt that fires
// DynconfigRolloutHalted).
package monitoring
