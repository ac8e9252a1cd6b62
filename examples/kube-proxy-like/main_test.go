package main

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/components/kubeproxy"
	"github.com/dynconfig/dynconfig/examples/internal/demo"
	"github.com/dynconfig/dynconfig/internal/proctest"
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
			proctest.ExpectExecuteError(t, func(stdout, stderr io.Writer) int {
				return demo.Execute(context.Background(), newCommand(), tc.args, stdout, stderr)
			}, "kube-proxy-like: ", tc.wantErr)
		})
	}
}

// TestHandlerServesTheSwappedConfig checks that /configz serves the config
// in use after each swap, and the last report, under kube-proxy's key
// ("kubeproxy.config.k8s.io").
func TestHandlerServesTheSwappedConfig(t *testing.T) {
	z := newConfigz()
	srv := httptest.NewServer(demo.NewHandler(z, prometheus.NewRegistry()))
	defer srv.Close()
	report := status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonLocalDefault, Message: "using current (default)"}
	if err := z.ReportConfigOK(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	for _, cidr := range []string{"10.1.0.0/16", "10.2.0.0/16"} {
		cfg, err := kubeproxy.Decode("test", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: "+cidr+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		z.SetConfig(cfg)
		got, err := getConfigz(strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		want := configzResponse{KubeProxyConfig: cfg, ConfigOK: &demo.Condition{Status: report.Status, Reason: report.Reason, Message: report.Message}}
		// featureGates is omitempty: an empty map comes back as nil.
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("/configz after swapping to %s (-want +got):\n%s", cidr, diff)
		}
	}
}
