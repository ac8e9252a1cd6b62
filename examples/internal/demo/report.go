package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/internal/statusfile"
	"github.com/dynconfig/dynconfig/status"
)

// Condition is a ConfigOK report in the JSON of the status file and of
// /configz (statusfile.Condition, which the tests read back).
type Condition = statusfile.Condition

// ReporterChain sends every report to each of its Reporters, in order, and
// joins their errors: one failing Reporter does not silence the others.
type ReporterChain []dynconfig.Reporter

// ReportConfigOK implements dynconfig.Reporter.
func (rc ReporterChain) ReportConfigOK(ctx context.Context, r status.Report) error {
	var errs []error
	for _, rep := range rc {
		if err := rep.ReportConfigOK(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LogReporter logs every report through the context's klog logger.
type LogReporter struct{}

// ReportConfigOK implements dynconfig.Reporter.
func (LogReporter) ReportConfigOK(ctx context.Context, r status.Report) error {
	klog.FromContext(ctx).Info("ConfigOK", "status", r.Status, "reason", r.Reason, "message", r.Message)
	return nil
}

// StatusFile replaces the file at Path with every report, atomically, so a
// reader sees one whole report: the last one written, as a Condition with
// PID, and a newline.
type StatusFile struct {
	// Path is the file; its directory must exist.
	Path string
	// PID is written into every report (the components use their own).
	PID int
}

// ReportConfigOK implements dynconfig.Reporter. Its write errors name
// --status-file, the flag that sets Path.
func (s *StatusFile) ReportConfigOK(_ context.Context, r status.Report) error {
	data, err := json.Marshal(Condition{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: s.PID})
	if err != nil {
		return fmt.Errorf("encode ConfigOK report: %w", err)
	}
	if err := atomicfile.WriteFile(s.Path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("--status-file: %w", err)
	}
	return nil
}

// Reporting is the ConfigOK reporting and the metrics every example
// component starts with.
type Reporting struct {
	// Reporters are, in this order, a LogReporter, the configz given to
	// NewReporting and, when a status file is named, a StatusFile with this
	// process's PID. A component appends its own.
	Reporters ReporterChain
	// Registry is the Prometheus registry that /metrics serves.
	Registry *prometheus.Registry
	// Metrics are dynconfig's metrics, registered in Registry.
	Metrics *status.Metrics
}

// NewReporting returns the Reporting of a component whose /configz is
// configz and whose --status-file is statusFile ("" for none).
func NewReporting(configz dynconfig.Reporter, statusFile string) (*Reporting, error) {
	r := &Reporting{Reporters: ReporterChain{LogReporter{}, configz}, Registry: prometheus.NewRegistry()}
	if statusFile != "" {
		r.Reporters = append(r.Reporters, &StatusFile{Path: statusFile, PID: os.Getpid()})
	}
	m, err := status.NewMetrics(r.Registry)
	if err != nil {
		return nil, err
	}
	r.Metrics = m
	return r, nil
}
