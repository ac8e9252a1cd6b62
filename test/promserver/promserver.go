// Package promserver runs a real Prometheus (Debian's prometheus package,
// /usr/bin/prometheus) for a test: one process on a loopback port with its
// own data directory, scraping the targets the test gives every second,
// stopped when the test ends. It also serves a metrics page the test
// writes, for Prometheus to scrape.
//
// Without the binary a test skips (and says how to get it), except on CI
// (CI set), where .ci/run installs it and its absence fails the test.
package promserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// Prometheus is a running Prometheus.
type Prometheus struct {
	// URL is its base URL (http://127.0.0.1:port), what a client of its
	// HTTP API (/api/v1/query) is given.
	URL string
	cmd *exec.Cmd
	log *lockedBuffer
}

// Binary finds the prometheus binary, or skips the test (fails it in CI:
// testenv.Missing).
func Binary(t testing.TB) string {
	t.Helper()
	return testenv.LookPath(t, "prometheus", "apt-get install prometheus")
}

// ServeMetrics serves page() as a Prometheus text exposition at /metrics
// until the test ends, and returns the host:port to scrape.
func ServeMetrics(t testing.TB, page func() string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, page())
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// Start runs Prometheus scraping targets (host:port, path /metrics) every
// second until the test ends, and waits until it is ready.
func Start(ctx context.Context, t testing.TB, targets ...string) *Prometheus {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n- job_name: test\n  static_configs:\n  - targets: [%s]\n",
		strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := cluster.FreeAddr(t)
	p := &Prometheus{URL: "http://" + addr, log: &lockedBuffer{}}
	p.cmd = exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(2 * time.Minute) // a loaded machine: generous
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited before it was ready: %v\n%s", err, p.log.String())
		case <-ctx.Done():
			t.Fatalf("prometheus not ready: %v\n%s", ctx.Err(), p.log.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 2 minutes (last: %v)\n%s", err, p.log.String())
		}
	}
}

// Query runs an instant query and returns the number of samples in its
// result.
func (p *Prometheus) Query(ctx context.Context, query string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?"+url.Values{"query": {query}}.Encode(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("query %q: HTTP %d: %w", query, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("query %q: %s", query, body.Error)
	}
	return len(body.Data.Result), nil
}

// WaitSeries waits until query returns at least one sample (Prometheus
// scraped what the test serves).
func (p *Prometheus) WaitSeries(ctx context.Context, t testing.TB, query string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := p.Query(ctx, query)
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("prometheus never had %s: %d samples, %v\n%s", query, n, err, p.log.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
