package demo

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/status"
)

// testConfig stands in for a component's config type.
type testConfig struct {
	MaxPods      int32           `json:"maxPods"`
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	Note         string          `json:"note,omitempty"`
}

// getter returns a function that GETs a path of the server at url and
// returns the status code and body.
func getter(t *testing.T, url string) func(path string) (int, string) {
	return func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(url + path)
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
}

// TestHandler checks /healthz, /configz before any config and after each
// swap, /metrics, an unknown path and a method that is not GET.
func TestHandler(t *testing.T) {
	z := NewConfigz[testConfig]("testconfig")
	reg := prometheus.NewRegistry()
	m, err := status.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetActive(nil)
	srv := httptest.NewServer(NewHandler(z, reg))
	defer srv.Close()
	get := getter(t, srv.URL)

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
	type response struct {
		Config   *testConfig `json:"testconfig"`
		ConfigOK *Condition  `json:"configOK"`
	}
	for _, cfg := range []*testConfig{{MaxPods: 33}, {MaxPods: 44, FeatureGates: map[string]bool{"A": true}}} {
		z.SetConfig(cfg)
		code, body := get("/configz")
		if code != http.StatusOK {
			t.Fatalf("/configz = %d %s", code, body)
		}
		var got response
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		want := response{Config: cfg, ConfigOK: &Condition{Status: report.Status, Reason: report.Reason, Message: report.Message}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("/configz after swapping to maxPods %d (-want +got):\n%s", cfg.MaxPods, diff)
		}
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

// TestConfigzBody checks that the /configz body is, byte for byte, what
// encoding/json writes for a struct with the key's field first and
// configOK second, with and without a report, for keys that need escaping
// too.
func TestConfigzBody(t *testing.T) {
	type kubelet struct {
		Config   *testConfig `json:"kubeletconfig"`
		ConfigOK *Condition  `json:"configOK"`
	}
	type proxy struct {
		Config   *testConfig `json:"kubeproxy.config.k8s.io"`
		ConfigOK *Condition  `json:"configOK"`
	}
	cfg := &testConfig{MaxPods: 7, FeatureGates: map[string]bool{"B": false, "A": true}, Note: "<&>\u2028"}
	report := status.Report{Status: corev1.ConditionFalse, Reason: status.ValidateFailedReason("u"), Message: "m \"quoted\""}
	cond := &Condition{Status: report.Status, Reason: report.Reason, Message: report.Message}
	for _, tc := range []struct {
		name   string
		key    string
		report bool
		want   any
	}{
		{name: "kubelet key, no report", key: "kubeletconfig", want: kubelet{Config: cfg}},
		{name: "kubelet key", key: "kubeletconfig", report: true, want: kubelet{Config: cfg, ConfigOK: cond}},
		{name: "kube-proxy key", key: "kubeproxy.config.k8s.io", report: true, want: proxy{Config: cfg, ConfigOK: cond}},
		{name: "key that needs escaping", key: `a"b<`, report: true,
			want: map[string]any{`a"b<`: cfg, "configOK": cond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := NewConfigz[testConfig](tc.key)
			z.SetConfig(cfg)
			if tc.report {
				if err := z.ReportConfigOK(context.Background(), report); err != nil {
					t.Fatal(err)
				}
			}
			rec := httptest.NewRecorder()
			NewHandler(z, prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/configz", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("/configz = %d %s", rec.Code, rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			want, err := json.Marshal(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if _, isMap := tc.want.(map[string]any); isMap {
				// A map encodes its keys sorted; compare as values instead.
				var gotV, wantV any
				if err := json.Unmarshal(rec.Body.Bytes(), &gotV); err != nil {
					t.Fatalf("body %s: %v", rec.Body, err)
				}
				if err := json.Unmarshal(want, &wantV); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantV, gotV); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
				if !strings.HasPrefix(rec.Body.String(), `{"a\"b\u003c":`) {
					t.Errorf("body %s does not start with the escaped key", rec.Body)
				}
				return
			}
			if got := rec.Body.String(); got != string(want) {
				t.Errorf("body\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestServer listens on a free port, serves a request, and shuts down
// cleanly, also when the context that started it is already done; a port
// in use is an error naming the flags.
func TestServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Listen("127.0.0.1", 0, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hi"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().(*net.TCPAddr)
	if addr.Port == 0 {
		t.Errorf("Addr %v: want the port the kernel chose", addr)
	}
	if code, body := getter(t, "http://"+addr.String())("/"); code != http.StatusOK || body != "hi" {
		t.Errorf("GET / = %d %q, want 200 hi", code, body)
	}

	_, err = Listen("127.0.0.1", addr.Port, http.NotFoundHandler())
	if err == nil || !strings.HasPrefix(err.Error(), "--address/--port: ") {
		t.Errorf("Listen on a port in use: error %v, want one naming --address/--port", err)
	}

	cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after the context ended: %v", err)
	}
	if _, err := http.Get("http://" + addr.String() + "/"); err == nil {
		t.Error("the server still answers after Shutdown")
	}
}

func TestNodeName(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatalf("os.Hostname: %v", err)
	}
	for _, tc := range []struct {
		flag string
		want string
	}{
		{flag: "node-1", want: "node-1"},
		{flag: "", want: strings.ToLower(host)},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			got, err := NodeName(tc.flag)
			if err != nil || got != tc.want {
				t.Errorf("NodeName(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
			}
		})
	}
}

func TestNewClientNamesNoFlag(t *testing.T) {
	missing := t.TempDir() + "/nope"
	_, err := NewClient(missing)
	if err == nil || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("NewClient(%q) error %v, want one naming the file and not the flag", missing, err)
	}
}
