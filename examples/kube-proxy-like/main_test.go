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
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/status"
)

func TestParseConfigMapRef(t *testing.T) {
	for _, tc := range []struct {
		in            string
		wantNamespace string
		wantName      string
		wantErr       bool
	}{
		{in: "kube-system/kube-proxy", wantNamespace: "kube-system", wantName: "kube-proxy"},
		{in: "ns/name.with.dots", wantNamespace: "ns", wantName: "name.with.dots"},
		{in: "kube-proxy", wantErr: true},
		{in: "/kube-proxy", wantErr: true},
		{in: "kube-system/", wantErr: true},
		{in: "a/b/c", wantErr: true},
		{in: "", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			ns, name, err := parseConfigMapRef(tc.in)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--configmap") {
					t.Fatalf("parseConfigMapRef(%q) = %q, %q, %v; want an error naming --configmap", tc.in, ns, name, err)
				}
				return
			}
			if err != nil || ns != tc.wantNamespace || name != tc.wantName {
				t.Errorf("parseConfigMapRef(%q) = %q, %q, %v; want %q, %q", tc.in, ns, name, err, tc.wantNamespace, tc.wantName)
			}
		})
	}
}

// FuzzParseConfigMapRef checks that an accepted --configmap value splits
// into two non-empty parts that join back to the input.
func FuzzParseConfigMapRef(f *testing.F) {
	for _, s := range []string{"kube-system/kube-proxy", "a/b/c", "/", "x", "", "ns//n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, name, err := parseConfigMapRef(s)
		if err != nil {
			return
		}
		if ns == "" || name == "" || strings.Contains(name, "/") || ns+"/"+name != s {
			t.Fatalf("parseConfigMapRef(%q) = %q, %q", s, ns, name)
		}
	})
}

func TestFeatureGatesFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sets    []string
		want    featureGates
		wantStr string
		wantErr string
	}{
		{name: "several, sorted when rendered", sets: []string{"B=false, A=true"},
			want: featureGates{"A": true, "B": false}, wantStr: "A=true,B=false"},
		{name: "repeated flag adds and overrides", sets: []string{"A=true", "A=false,C=1"},
			want: featureGates{"A": false, "C": true}, wantStr: "A=false,C=true"},
		{name: "no value", sets: []string{"A"}, wantErr: `"A" is not NAME=true or NAME=false`},
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
// to a String that parses back to the same gates.
func FuzzFeatureGatesSet(f *testing.F) {
	for _, s := range []string{"A=true", "A=true,B=false", " A = 1 ", "", ",", "A", "=x", "A=b=c"} {
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
		{name: "no state dir", wantErr: `required flag(s) "dynamic-config-dir" not set`},
		{name: "configmap and source dir", args: []string{"--dynamic-config-dir=" + dir, "--configmap=a/b", "--source-dir=s"},
			wantErr: "[configmap source-dir] were all set"},
		{name: "kubeconfig without configmap", args: []string{"--dynamic-config-dir=" + dir, "--kubeconfig=k"},
			wantErr: "--kubeconfig needs --configmap"},
		{name: "bad configmap", args: []string{"--dynamic-config-dir=" + dir, "--configmap=kube-proxy"},
			wantErr: `--configmap "kube-proxy": want NAMESPACE/NAME`},
		{name: "missing kubeconfig", args: []string{"--dynamic-config-dir=" + dir, "--configmap=a/b", "--node-name=n1",
			"--kubeconfig=" + filepath.Join(dir, "nope")}, wantErr: "--kubeconfig \"" + filepath.Join(dir, "nope") + "\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := execute(context.Background(), tc.args, &stdout, &stderr); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.HasPrefix(stderr.String(), "kube-proxy-like: ") || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want an error line containing %q", stderr.String(), tc.wantErr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// TestHandlerServesTheSwappedConfig checks /healthz, /configz before any
// config and after each swap, and /metrics.
func TestHandlerServesTheSwappedConfig(t *testing.T) {
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
	report := status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonLocalDefault, Message: "using current (default)"}
	if err := z.ReportConfigOK(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	for _, cidr := range []string{"10.1.0.0/16", "10.2.0.0/16"} {
		cfg, err := kubeproxy.Decode("test", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: "+cidr+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		z.setConfig(cfg)
		code, body := get("/configz")
		if code != http.StatusOK {
			t.Fatalf("/configz = %d %s", code, body)
		}
		var got configzResponse
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		want := configzResponse{KubeProxyConfig: cfg, ConfigOK: &conditionJSON{Status: report.Status, Reason: report.Reason, Message: report.Message}}
		// featureGates is omitempty: an empty map comes back as nil.
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("/configz after swapping to %s (-want +got):\n%s", cidr, diff)
		}
	}
	if _, body := get("/metrics"); !strings.Contains(body, status.MetricActiveConfigInfo+`{name="",namespace="",resource_version="",source="local",uid=""} 1`) {
		t.Errorf("/metrics lacks the active config series:\n%s", body)
	}
}

func TestStatusFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "configok.json")
	s := &statusFile{path: path, pid: 7}
	r := status.Report{Status: corev1.ConditionFalse, Reason: status.ValidateFailedReason("u"), Message: "using last known good: (UID: u)"}
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
	if diff := cmp.Diff(conditionJSON{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: 7}, got); diff != "" {
		t.Errorf("status file (-want +got):\n%s", diff)
	}
	bad := &statusFile{path: filepath.Join(dir, "missing", "configok.json")}
	if err := bad.ReportConfigOK(context.Background(), r); err == nil || !strings.Contains(err.Error(), "--status-file") {
		t.Errorf("report into a missing dir: error %v, want one naming --status-file", err)
	}
}

// failingReporter fails every report.
type failingReporter struct{ err error }

func (f failingReporter) ReportConfigOK(context.Context, status.Report) error { return f.err }

func TestReporterChainReportsToAllAndJoinsErrors(t *testing.T) {
	boom := errors.New("boom")
	z := &configz{}
	r := status.Report{Status: corev1.ConditionUnknown, Reason: "r", Message: "m"}
	err := reporterChain{failingReporter{boom}, z}.ReportConfigOK(context.Background(), r)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want the failing reporter's", err)
	}
	if diff := cmp.Diff(&conditionJSON{Status: r.Status, Reason: r.Reason, Message: r.Message}, z.snapshot().ConfigOK); diff != "" {
		t.Errorf("the reporter after a failing one (-want +got):\n%s", diff)
	}
}
