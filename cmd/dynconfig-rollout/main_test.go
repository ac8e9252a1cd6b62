package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/app"
)

func execute(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	// A context with a logger: the command validates the logging flags
	// and logs through it (klog's own config is applied once a process).
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig()))
	code := app.Execute(ctx, newCommand(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := execute(t, "--version")
	if code != app.ExitOK || !strings.HasPrefix(out, "dynconfig-rollout v") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	code, out, _ = execute(t, "--version=raw")
	if code != app.ExitOK || !strings.Contains(out, "GitVersion") {
		t.Errorf("--version=raw: exit %d, %q", code, out)
	}
}

// The leader-election flags of earlier releases still work, as deprecated
// aliases of component-base's names.
func TestLeaderElectionAliases(t *testing.T) {
	cmd := newCommand()
	if err := cmd.ParseFlags([]string{"--lease-name=old", "--lease-namespace=ns", "--lease-duration=40s",
		"--renew-deadline=30s", "--retry-period=5s", "--identity=me"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"leader-elect-resource-name": "old", "leader-elect-resource-namespace": "ns", "leader-elect-lease-duration": "40s",
		"leader-elect-renew-deadline": "30s", "leader-elect-retry-period": "5s", "leader-elect-identity": "me",
	} {
		if got := cmd.Flags().Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
	for old := range leaderElectionAliases {
		if f := cmd.Flags().Lookup(old); f == nil || f.Deprecated == "" {
			t.Errorf("--%s: want a deprecated alias", old)
		}
	}
	// The help lists component-base's names, not the aliases.
	code, out, _ := execute(t, "--help")
	if code != app.ExitOK || !strings.Contains(out, "--leader-elect-resource-name") || strings.Contains(out, "--lease-name") {
		t.Errorf("--help: exit %d, want component-base's names only:\n%s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--leader-elect-resource-lock=configmaps"},
		{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"},
		{"--workers=0"},
		{"--logging-format=yaml"},
		{"extra-argument"},
	} {
		code, _, errOut := execute(t, append(args, "--kubeconfig=/nonexistent")...)
		if code != app.ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, app.ExitUsage, errOut)
		}
	}
	// JSON logs are a valid choice; the run then fails on the kubeconfig.
	code, _, errOut := execute(t, "--logging-format=json", "--kubeconfig=/nonexistent/kubeconfig")
	if code != app.ExitError || !strings.Contains(errOut, "/nonexistent/kubeconfig") {
		t.Errorf("--logging-format=json with a missing kubeconfig: exit %d, %s", code, errOut)
	}
}

// Profiles are never served on every interface unless asked for.
func TestProfilingAddress(t *testing.T) {
	for _, tc := range []struct{ flag, metrics, want string }{
		{"", ":8080", "127.0.0.1:6060"},
		{"", "0.0.0.0:8080", "127.0.0.1:6060"},
		{"", "10.0.0.1:8080", "127.0.0.1:6060"},
		{"", "", "127.0.0.1:6060"},
		{"", "127.0.0.1:8080", "127.0.0.1:8080"},
		{"", "[::1]:8080", "[::1]:8080"},
		{"", "localhost:8080", "localhost:8080"},
		{":6060", ":8080", ":6060"},
	} {
		if got := profilingAddress(tc.flag, tc.metrics); got != tc.want {
			t.Errorf("profilingAddress(%q, %q) = %q, want %q", tc.flag, tc.metrics, got, tc.want)
		}
	}
}

func TestHealth(t *testing.T) {
	now := time.Now()
	synced := false
	h := &leaseHealth{identity: "me", leaseDuration: 15 * time.Second, synced: func() bool { return synced }}
	var controllerErr error
	mux := metricsMux(prometheus.NewRegistry(), h, func() error { return controllerErr })
	get := func(path string) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the Lease was read: %d, want 503", c)
	}
	synced = true
	if c := get("/readyz"); c != http.StatusOK {
		t.Errorf("/readyz, standing by: %d, want 200", c)
	}
	controllerErr = errors.New("controller: running, but its informers have not synced yet")
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz, leading with unsynced informers: %d, want 503", c)
	}
	controllerErr = nil
	lease := func(holder string, renewed time.Time) {
		h.lease.Store(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder),
			RenewTime: &metav1.MicroTime{Time: renewed}}})
	}
	lease("other", now.Add(-time.Hour))
	if err := h.live(now); err != nil {
		t.Errorf("another replica's stale Lease: %v, want live", err)
	}
	lease("me", now.Add(-5*time.Second))
	if err := h.live(now); err != nil || get("/livez") != http.StatusOK {
		t.Errorf("holding a fresh Lease: %v, want live", err)
	}
	lease("me", now.Add(-time.Minute))
	if err := h.live(now); err == nil || get("/livez") != http.StatusInternalServerError || get("/healthz") != http.StatusInternalServerError {
		t.Errorf("holding a Lease renewed a minute ago: %v, want not live", err)
	}
	var none *leaseHealth
	if none.live(now) != nil || none.ready() != nil {
		t.Error("without leader election: want live and ready")
	}
}
