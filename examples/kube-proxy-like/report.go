package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
	"github.com/dynconfig/dynconfig/status"
)

// reporterChain sends every report to each of its Reporters, in order, and
// joins their errors: one failing Reporter does not silence the others.
type reporterChain []dynconfig.Reporter

// ReportConfigOK implements dynconfig.Reporter.
func (rc reporterChain) ReportConfigOK(ctx context.Context, r status.Report) error {
	var errs []error
	for _, rep := range rc {
		if err := rep.ReportConfigOK(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logReporter logs every report through the context's klog logger.
type logReporter struct{}

// ReportConfigOK implements dynconfig.Reporter.
func (logReporter) ReportConfigOK(ctx context.Context, r status.Report) error {
	klog.FromContext(ctx).Info("ConfigOK", "status", r.Status, "reason", r.Reason, "message", r.Message)
	return nil
}

// conditionJSON is a ConfigOK report in the JSON of the status file and
// /configz.
type conditionJSON struct {
	Status  corev1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
	// PID is the process that made the report (status file only).
	PID int `json:"pid,omitempty"`
}

// statusFile replaces a file with every report, atomically, so a reader
// sees one whole report: the last one written.
type statusFile struct {
	path string
	pid  int
}

// ReportConfigOK implements dynconfig.Reporter.
func (s *statusFile) ReportConfigOK(_ context.Context, r status.Report) error {
	data, err := json.Marshal(conditionJSON{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: s.pid})
	if err != nil {
		return fmt.Errorf("encode ConfigOK report: %w", err)
	}
	if err := atomicfile.WriteFile(s.path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("--status-file: %w", err)
	}
	return nil
}
