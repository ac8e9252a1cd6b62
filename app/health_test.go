package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// sourceDir writes a directory source that assigns a ConfigMap whose
// greeter payload has greeting, and returns the source dir.
func sourceDir(t *testing.T, greeting string) string {
	t.Helper()
	dir := t.TempDir()
	cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: kube-system\n  name: g\n  uid: uid-g\n"+
		"  annotations:\n    dynconfig.io/trial-duration: 1h\n    dynconfig.io/crash-loop-threshold: \"10\"\n"+
		"data:\n  greeter: |\n    {apiVersion: greeter.test/v1, kind: GreeterConfiguration, greeting: %s}\n", greeting)
	if err := os.MkdirAll(filepath.Join(dir, "configmaps"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "configmaps", "g.yaml"), []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "assignment.yaml"), []byte("configMap: {namespace: kube-system, name: g, uid: uid-g}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readCondition(t *testing.T, path string) Condition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c Condition
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHealthGateConfirmOrRevert (real clock): with --confirm-within, a
// config the component's own health gate never passes is reverted in real
// time (the command exits 0 to restart, and the next start runs the local
// config, ConfigOK False); one it passes is confirmed (recorded in the
// state dir) and keeps running past the deadline.
func TestHealthGateConfirmOrRevert(t *testing.T) {
	const within = time.Second
	gate := func(ctx context.Context, cfg *greeterConfig, env Env) error {
		if env.Address == "" {
			return errors.New("no address for the health gate")
		}
		if cfg.Greeting == "sad" {
			<-ctx.Done() // never healthy on this config
			return ctx.Err()
		}
		return nil
	}
	for _, tc := range []struct {
		greeting string
		reverted bool
	}{{"sad", true}, {"glad", false}} {
		t.Run(tc.greeting, func(t *testing.T) {
			dir := t.TempDir()
			state, statusPath := filepath.Join(dir, "state"), filepath.Join(dir, "status.json")
			args := []string{"--dynamic-config-dir=" + state, "--port=0", "--source-dir=" + sourceDir(t, tc.greeting),
				"--source-poll-interval=20ms", "--status-file=" + statusPath, "--confirm-within=" + within.String()}
			c := testComponent(nil, nil)
			c.Health = gate
			began := time.Now()
			s := start(t, NewCommand(c), args...)
			if got := readCondition(t, statusPath); got.Status != corev1.ConditionTrue || got.Message != "using current (UID: uid-g)" {
				t.Fatalf("at start: %+v", got)
			}
			if !tc.reverted {
				waitUntil(t, 20*time.Second, func() bool {
					rec, err := checkpoint.InspectConfirmation(state)
					return err == nil && !rec.Confirmed.IsZero()
				})
				time.Sleep(within + 500*time.Millisecond)
				select {
				case code := <-s.done:
					t.Fatalf("a confirmed config ended the command (code %d) past the deadline", code)
				default:
				}
				if got := readCondition(t, statusPath); got.Status != corev1.ConditionTrue {
					t.Fatalf("past the deadline: %+v", got)
				}
				return
			}
			// The wall budget: the deadline plus generous slack for a
			// loaded machine; a deadline that never fires fails here.
			select {
			case code := <-s.done:
				s.done <- code
				if code != ExitOK {
					t.Fatalf("exit code %d, want 0 (restart onto the rollback target)", code)
				}
				if took := time.Since(began); took < within {
					t.Fatalf("reverted after %v, before the deadline %v", took, within)
				}
			case <-time.After(within + 30*time.Second):
				t.Fatalf("not reverted %v after the start; the deadline was %v", time.Since(began), within)
			}
			s2 := start(t, NewCommand(c), args...)
			got := readCondition(t, statusPath)
			if got.Status != corev1.ConditionFalse || !strings.HasPrefix(got.Reason, "failed to confirm current (UID: uid-g) healthy") {
				t.Fatalf("after the revert: %+v", got)
			}
			s2.stop()
		})
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHTTPGetAndAllOf(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, "/healthz", http.StatusFound) // 3xx counts as success, not followed
		case healthy.Load():
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	url := func(path string) func(*greeterConfig, Env) string {
		return func(*greeterConfig, Env) string { return srv.URL + path }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := HTTPGet(10*time.Millisecond, url("/healthz"))(ctx, &greeterConfig{}, Env{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unhealthy endpoint: %v, want the context's error", err)
	}
	go func() { time.Sleep(30 * time.Millisecond); healthy.Store(true) }()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	gate := AllOf(HTTPGet(10*time.Millisecond, url("/healthz")), HTTPGet(10*time.Millisecond, url("/redirect")))
	if err := gate(ctx2, &greeterConfig{}, Env{}); err != nil {
		t.Fatalf("healthy endpoint: %v", err)
	}
}

// TestHTTPGetLeavesNoConnection: a probe closes its connection (no
// keep-alive), so the server it probed shuts down gracefully at once. With
// a pooled connection, one dialed for a probe that SIGTERM cancelled stayed
// open without a request, and http.Server.Shutdown waited 5 s for it: the
// command then exited 1 ("context deadline exceeded"), as
// examples/kubelet-like's TestDamageMatrix saw under load.
func TestHTTPGetLeavesNoConnection(t *testing.T) {
	var open atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	gate := HTTPGet(10*time.Millisecond, func(*greeterConfig, Env) string { return srv.URL })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if err := gate(ctx, &greeterConfig{}, Env{}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 5*time.Second, func() bool { return open.Load() == 0 })
}
