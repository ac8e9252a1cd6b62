package main

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/examples/internal/demo"
	"github.com/dynconfig/dynconfig/internal/proctest"
	"github.com/dynconfig/dynconfig/status"
)

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
			proctest.ExpectExecuteError(t, func(stdout, stderr io.Writer) int {
				return demo.Execute(context.Background(), newCommand(), tc.args, stdout, stderr)
			}, "kubelet-like: ", tc.wantErr)
		})
	}
}

// TestHandler checks that /configz serves the config in use and the last
// report under the kubelet's key ("kubeletconfig").
func TestHandler(t *testing.T) {
	z := newConfigz()
	srv := httptest.NewServer(demo.NewHandler(z, prometheus.NewRegistry()))
	defer srv.Close()
	cfg, err := kubelet.Decode("test", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 33\n"))
	if err != nil {
		t.Fatal(err)
	}
	z.SetConfig(cfg)
	report := status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonLocalDefault, Message: "using current (default)"}
	if err := z.ReportConfigOK(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	got, err := getConfigz(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	want := configzResponse{KubeletConfig: cfg, ConfigOK: &demo.Condition{Status: report.Status, Reason: report.Reason, Message: report.Message}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/configz (-want +got):\n%s", diff)
	}
}
