package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/status"
)

func TestFeatureGatesFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sets    []string
		want    featureGates
		wantStr string
		wantErr string
	}{
		{name: "one", sets: []string{"A=true"}, want: featureGates{"A": true}, wantStr: "A=true"},
		{name: "several, sorted when rendered", sets: []string{"B=false, A=true"},
			want: featureGates{"A": true, "B": false}, wantStr: "A=true,B=false"},
		{name: "repeated flag adds and overrides", sets: []string{"A=true", "A=false,C=1"},
			want: featureGates{"A": false, "C": true}, wantStr: "A=false,C=true"},
		{name: "empty items skipped", sets: []string{",A=true,,"}, want: featureGates{"A": true}, wantStr: "A=true"},
		{name: "no value", sets: []string{"A"}, wantErr: `"A" is not NAME=true or NAME=false`},
		{name: "no name", sets: []string{"=true"}, wantErr: `"=true" is not NAME=true or NAME=false`},
		{name: "not a boolean", sets: []string{"A=yes"}, wantErr: `gate A: "yes" is not a boolean`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := featureGates{}
			var err error
			for _, s := range tc.sets {
				if err = g.Set(s); err != nil {
					break
				}
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Set error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("gates (-want +got):\n%s", diff)
			}
			if got := g.String(); got != tc.wantStr {
				t.Errorf("String() = %q, want %q", got, tc.wantStr)
			}
		})
	}
}

// FuzzFeatureGatesSet checks that whatever --feature-gates accepts renders
// to a String that parses back to the same gates: the form that
// merge.Pipeline.FlagOverrides reads.
func FuzzFeatureGatesSet(f *testing.F) {
	for _, s := range []string{"A=true", "A=true,B=false", " A = 1 ", "", ",", "A", "=x", "A=b=c", "A=true,A=false"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g := featureGates{}
		if err := g.Set(s); err != nil {
			return
		}
		again := featureGates{}
		if err := again.Set(g.String()); err != nil {
			t.Fatalf("Set(%q) accepted, but its String %q does not parse: %v", s, g.String(), err)
		}
		if diff := cmp.Diff(g, again); diff != "" {
			t.Fatalf("round trip of %q changed the gates (-first +second):\n%s", s, diff)
		}
	})
}

// TestExecuteRejectsBadInvocations runs the command in process on
// invocations that must fail before anything is opened.
func TestExecuteRejectsBadInvocations(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no state dir", args: nil, wantErr: `required flag(s) "dynamic-config-dir" not set`},
		{name: "two sources", args: []string{"--dynamic-config-dir=" + dir, "--kubeconfig=k", "--source-dir=s"},
			wantErr: "[kubeconfig source-dir] were all set"},
		{name: "an argument", args: []string{"--dynamic-config-dir=" + dir, "extra"}, wantErr: `unknown command "extra"`},
		{name: "bad config flag", args: []string{"--dynamic-config-dir=" + dir, "--max-pods=many"},
			wantErr: `invalid argument "many" for "--max-pods" flag`},
		{name: "missing kubeconfig", args: []string{"--dynamic-config-dir=" + dir, "--node-name=n1",
			"--kubeconfig=" + filepath.Join(dir, "nope")}, wantErr: "--kubeconfig " + filepath.Join(dir, "nope")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), tc.args, &stdout, &stderr)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.HasPrefix(stderr.String(), "kubelet-like: ") || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want an error line containing %q", stderr.String(), tc.wantErr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestHandler(t *testing.T) {
	z := &configz{}
	reg := prometheus.NewRegistry()
	m, err := status.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetActive(nil)
	srv := httptest.NewServer(newHandler(z, reg))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}

	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	if code, _ := get("/configz"); code != http.StatusServiceUnavailable {
		t.Errorf("/configz before a config = %d, want 503", code)
	}
	cfg, err := kubelet.Decode("test", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 33\n"))
	if err != nil {
		t.Fatal(err)
	}
	z.setConfig(cfg)
	report := status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonLocalDefault, Message: "using current (default)"}
	if err := z.ReportConfigOK(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	code, body := get("/configz")
	if code != http.StatusOK {
		t.Fatalf("/configz = %d %s", code, body)
	}
	var got configzResponse
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := configzResponse{KubeletConfig: cfg, ConfigOK: &conditionJSON{Status: report.Status, Reason: report.Reason, Message: report.Message}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/configz (-want +got):\n%s", diff)
	}
	if _, body := get("/metrics"); !strings.Contains(body, status.MetricActiveConfigInfo+`{name="",namespace="",resource_version="",source="local",uid=""} 1`) {
		t.Errorf("/metrics lacks the active config series:\n%s", body)
	}
	if code, _ := get("/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing = %d, want 404", code)
	}
	resp, err := http.Post(srv.URL+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", resp.StatusCode)
	}
}

func TestStatusFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "configok.json")
	s := &statusFile{path: path, pid: 4242}
	reports := []status.Report{
		{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed, Message: "using current (UID: u1)"},
		{Status: corev1.ConditionFalse, Reason: status.CrashLoopReason("u2"), Message: "using last known good: (UID: u1)"},
	}
	for _, r := range reports {
		if err := s.ReportConfigOK(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got conditionJSON
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("status file %q: %v", data, err)
		}
		want := conditionJSON{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: 4242}
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

	bad := &statusFile{path: filepath.Join(dir, "missing", "configok.json")}
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
	err := reporterChain{a, b, c}.ReportConfigOK(context.Background(), r)
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Errorf("error %v, want both reporters' errors", err)
	}
	for i, rep := range []*recordingReporter{a, b, c} {
		if diff := cmp.Diff([]status.Report{r}, rep.got); diff != "" {
			t.Errorf("reporter %d (-want +got):\n%s", i, diff)
		}
	}
	if err := (reporterChain{b}).ReportConfigOK(context.Background(), r); err != nil {
		t.Errorf("chain of a healthy reporter: %v", err)
	}
}
