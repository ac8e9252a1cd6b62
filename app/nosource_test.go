package app

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/internal/proctest"
)

// A component with a state dir but no config source says so loudly
// (an error in its log), unless it was told to run locally.
func TestNoConfigSourceSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
		want  bool
	}{
		{"no source", nil, true},
		{"a directory source", []string{"--source-dir=" + t.TempDir()}, false},
		{"local on purpose", []string{"--disable-remote-config"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
			defer cancel()
			c := testComponent(nil, func(ctx context.Context, _ *greeterConfig, _ Env) error {
				<-ctx.Done()
				return ctx.Err()
			})
			stdout := &proctest.SyncBuffer{}
			done := make(chan int, 1)
			args := append([]string{"--dynamic-config-dir=" + filepath.Join(t.TempDir(), "state"), "--port=0", "--node-name=n1"}, tc.extra...)
			go func() { done <- Execute(ctx, NewCommand(c), args, stdout, &bytes.Buffer{}) }()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stdout.String(), "serving on ") {
				if time.Now().After(deadline) {
					t.Fatalf("not serving after 10s; stdout %q", stdout.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-done
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if got := strings.Contains(logs, "No config source"); got != tc.want {
				t.Errorf("logged \"No config source\": %v, want %v; logs:\n%s", got, tc.want, logs)
			}
		})
	}
}
