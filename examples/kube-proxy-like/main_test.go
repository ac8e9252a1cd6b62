package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig/app"
)

// TestExecuteRejectsBadInvocations runs the command in process on
// invocations that must fail before anything is served: a wrong command
// line exits 2, a kubeconfig that cannot be read exits 1.
func TestExecuteRejectsBadInvocations(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "no state dir", wantCode: app.ExitUsage,
			wantErr: "kube-proxy-like: required flag(s) \"dynamic-config-dir\" not set\nRun 'kube-proxy-like --help' for usage.\n"},
		{name: "configmap and source dir", args: []string{"--dynamic-config-dir=" + dir, "--configmap=a/b", "--source-dir=s"},
			wantCode: app.ExitUsage,
			wantErr:  "kube-proxy-like: if any flags in the group [configmap source-dir] are set none of the others can be; [configmap source-dir] were all set\nRun 'kube-proxy-like --help' for usage.\n"},
		{name: "bad configmap", args: []string{"--dynamic-config-dir=" + dir, "--configmap=kube-proxy"}, wantCode: app.ExitUsage,
			wantErr: "kube-proxy-like: --configmap \"kube-proxy\": want NAMESPACE/NAME\nRun 'kube-proxy-like --help' for usage.\n"},
		{name: "feature gate not a boolean", args: []string{"--dynamic-config-dir=" + dir, "--feature-gates=A=maybe"}, wantCode: app.ExitUsage,
			wantErr: "kube-proxy-like: invalid argument \"A=maybe\" for \"--feature-gates\" flag: invalid value of A: maybe, err: strconv.ParseBool: parsing \"maybe\": invalid syntax\nRun 'kube-proxy-like --help' for usage.\n"},
		{name: "missing kubeconfig, shared configmap", args: []string{"--dynamic-config-dir=" + dir, "--configmap=a/b", "--node-name=n1",
			"--kubeconfig=" + missing}, wantCode: app.ExitError,
			wantErr: "kube-proxy-like: --kubeconfig \"" + missing + "\": stat " + missing + ": no such file or directory\n"},
		{name: "missing kubeconfig, node assignment", args: []string{"--dynamic-config-dir=" + dir, "--node-name=n1",
			"--kubeconfig=" + missing}, wantCode: app.ExitError,
			wantErr: "kube-proxy-like: --kubeconfig \"" + missing + "\": stat " + missing + ": no such file or directory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var stdout, stderr bytes.Buffer
			code := app.Execute(ctx, newCommand(), tc.args, &stdout, &stderr)
			if code != tc.wantCode || stderr.String() != tc.wantErr || stdout.Len() != 0 {
				t.Errorf("exit code %d, stdout %q, stderr\n%q\nwant %d, no stdout, stderr\n%q", code, stdout.String(), stderr.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}

// TestHelpNamesItsOwnAnnotation checks that --help says which Node
// annotation assigns this component's config: its own, not the kubelet's.
func TestHelpNamesItsOwnAnnotation(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var stdout, stderr bytes.Buffer
	if code := app.Execute(ctx, newCommand(), []string{"--help"}, &stdout, &stderr); code != app.ExitOK {
		t.Fatalf("exit code %d, stderr %s", code, stderr.String())
	}
	for _, want := range []string{"dynconfig.io/config-source.kube-proxy annotation", "--configmap string", "--cluster-cidr string",
		"--feature-gates mapStringBool"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stdout.String())
		}
	}
}
