package demo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/status"
)

func TestStatusFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "configok.json")
	s := &StatusFile{Path: path, PID: 4242}
	reports := []status.Report{
		{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed, Message: "using current (UID: u1)"},
		{Status: corev1.ConditionFalse, Reason: status.CrashLoopReason("u2"), Message: "using last known good: (UID: u1)"},
		{Status: corev1.ConditionFalse, Reason: status.ValidateFailedReason("u"), Message: "using last known good: (UID: u)"},
	}
	for _, r := range reports {
		if err := s.ReportConfigOK(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got Condition
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("status file %q: %v", data, err)
		}
		want := Condition{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: 4242}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status file (-want +got):\n%s", diff)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only the status file (no temporary files left)", len(entries))
	}

	bad := &StatusFile{Path: filepath.Join(dir, "missing", "configok.json")}
	if err := bad.ReportConfigOK(context.Background(), reports[0]); err == nil || !strings.Contains(err.Error(), "--status-file") {
		t.Errorf("report into a missing dir: error %v, want one naming --status-file", err)
	}
}

// recordingReporter records reports and fails with err.
type recordingReporter struct {
	got []status.Report
	err error
}

func (r *recordingReporter) ReportConfigOK(_ context.Context, rep status.Report) error {
	r.got = append(r.got, rep)
	return r.err
}

func TestReporterChainReportsToAllAndJoinsErrors(t *testing.T) {
	errA, errC := errors.New("a failed"), errors.New("c failed")
	a, b, c := &recordingReporter{err: errA}, &recordingReporter{}, &recordingReporter{err: errC}
	r := status.Report{Status: corev1.ConditionUnknown, Reason: "r", Message: "m"}
	err := ReporterChain{a, b, c}.ReportConfigOK(context.Background(), r)
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Errorf("error %v, want both reporters' errors", err)
	}
	for i, rep := range []*recordingReporter{a, b, c} {
		if diff := cmp.Diff([]status.Report{r}, rep.got); diff != "" {
			t.Errorf("reporter %d (-want +got):\n%s", i, diff)
		}
	}
	if err := (ReporterChain{b}).ReportConfigOK(context.Background(), r); err != nil {
		t.Errorf("chain of a healthy reporter: %v", err)
	}
}

// failingReporter fails every report.
type failingReporter struct{ err error }

func (f failingReporter) ReportConfigOK(context.Context, status.Report) error { return f.err }

// TestReporterChainReachesConfigzPastAFailure checks that a Configz after
// a failing Reporter in the chain still records the report.
func TestReporterChainReachesConfigzPastAFailure(t *testing.T) {
	boom := errors.New("boom")
	z := NewConfigz[testConfig]("test")
	r := status.Report{Status: corev1.ConditionUnknown, Reason: "r", Message: "m"}
	err := ReporterChain{failingReporter{boom}, LogReporter{}, z}.ReportConfigOK(context.Background(), r)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want the failing reporter's", err)
	}
	_, got := z.Snapshot()
	if diff := cmp.Diff(&Condition{Status: r.Status, Reason: r.Reason, Message: r.Message}, got); diff != "" {
		t.Errorf("the reporter after a failing one (-want +got):\n%s", diff)
	}
}

func TestNewReporting(t *testing.T) {
	z := NewConfigz[testConfig]("test")
	statusPath := filepath.Join(t.TempDir(), "configok.json")
	for _, tc := range []struct {
		name       string
		statusFile string
		want       ReporterChain
	}{
		{name: "no status file", want: ReporterChain{LogReporter{}, z}},
		{name: "status file", statusFile: statusPath,
			want: ReporterChain{LogReporter{}, z, &StatusFile{Path: statusPath, PID: os.Getpid()}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReporting(z, tc.statusFile)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, r.Reporters, cmp.AllowUnexported(Configz[testConfig]{}), cmpopts.IgnoreTypes(sync.Mutex{})); diff != "" {
				t.Errorf("reporters (-want +got):\n%s", diff)
			}
			r.Metrics.SetActive(nil)
			families, err := r.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range families {
				names = append(names, f.GetName())
			}
			if !slices.Contains(names, status.MetricActiveConfigInfo) {
				t.Errorf("registry gathers %v, want %s among them", names, status.MetricActiveConfigInfo)
			}
		})
	}
}
