package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/status"
)

// TestServer listens on a free port, serves a request, and shuts down
// cleanly, also when the context that started it is already done; a port
// in use is an error naming the flags.
func TestServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := listen("127.0.0.1", 0, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hi"))
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.ln.Addr().(*net.TCPAddr)
	resp, err := http.Get("http://" + addr.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hi" {
		t.Errorf("GET / = %q, want hi", body)
	}
	if _, err := listen("127.0.0.1", addr.Port, http.NotFoundHandler(), nil); err == nil || !strings.HasPrefix(err.Error(), "--address/--port: ") {
		t.Errorf("listen on a port in use: error %v, want one naming --address/--port", err)
	}
	cancel()
	if err := s.shutdown(ctx); err != nil {
		t.Errorf("shutdown after the context ended: %v", err)
	}
	if _, err := http.Get("http://" + addr.String() + "/"); err == nil {
		t.Error("the server still answers after shutdown")
	}
}

// failingReporter fails every report.
type failingReporter struct{ err error }

func (f failingReporter) ReportConfigOK(context.Context, status.Report) error { return f.err }

// TestReporterChain checks that a failing Reporter does not keep the next
// ones from their report, and that its error is returned.
func TestReporterChain(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	boom := errors.New("boom")
	path := filepath.Join(t.TempDir(), "status.json")
	r := status.Report{Status: corev1.ConditionFalse, Reason: "r", Message: "m"}
	err := ReporterChain{failingReporter{boom}, LogReporter{}, &StatusFile{Path: path, PID: 7}}.ReportConfigOK(ctx, r)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want the failing reporter's", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the reporter after a failing one did not report: %v", err)
	}
	var got Condition
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Condition{Status: r.Status, Reason: r.Reason, Message: r.Message, PID: 7}, got); diff != "" {
		t.Errorf("status file (-want +got):\n%s", diff)
	}
}

// TestStatusFileErrorNamesTheFlag checks that a status file that cannot be
// written is an error naming --status-file.
func TestStatusFileErrorNamesTheFlag(t *testing.T) {
	sf := &StatusFile{Path: filepath.Join(t.TempDir(), "missing-dir", "status.json")}
	err := sf.ReportConfigOK(context.Background(), status.Report{Status: corev1.ConditionTrue})
	if err == nil || !strings.HasPrefix(err.Error(), "--status-file: ") {
		t.Errorf("error %v, want one naming --status-file", err)
	}
}

// TestConfigzTwice checks that the /configz entries of a command cannot be
// registered twice in one process, and can again once removed.
func TestConfigzTwice(t *testing.T) {
	gvk := greeterProfile{}.GroupVersionKind()
	z, err := registerConfigz[greeterConfig]("twice", gvk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registerConfigz[greeterConfig]("twice", gvk); err == nil || err.Error() != `/configz: register config "twice" twice` {
		t.Errorf("second registration: error %v, want /configz: register config \"twice\" twice", err)
	}
	z.unreg()
	z, err = registerConfigz[greeterConfig]("twice", gvk)
	if err != nil {
		t.Fatalf("registration after removal: %v", err)
	}
	z.unreg()
}
