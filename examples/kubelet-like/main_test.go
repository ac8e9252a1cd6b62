package main

import (
	"bytes"
	"path/filepath"
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
	const help = "Run 'kubelet-like --help' for usage.\n"
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "no state dir", wantCode: app.ExitUsage,
			wantErr: "kubelet-like: required flag(s) \"dynamic-config-dir\" not set\n" + help},
		{name: "two sources", args: []string{"--dynamic-config-dir=" + dir, "--kubeconfig=k", "--source-dir=s"}, wantCode: app.ExitUsage,
			wantErr: "kubelet-like: if any flags in the group [kubeconfig source-dir] are set none of the others can be; [kubeconfig source-dir] were all set\n" + help},
		{name: "an argument", args: []string{"--dynamic-config-dir=" + dir, "extra"}, wantCode: app.ExitUsage,
			wantErr: "kubelet-like: kubelet-like takes no arguments, got [\"extra\"]\n" + help},
		{name: "bad config flag", args: []string{"--dynamic-config-dir=" + dir, "--max-pods=many"}, wantCode: app.ExitUsage,
			wantErr: "kubelet-like: invalid argument \"many\" for \"--max-pods\" flag: strconv.ParseInt: parsing \"many\": invalid syntax\n" + help},
		{name: "missing kubeconfig", args: []string{"--dynamic-config-dir=" + dir, "--node-name=n1", "--kubeconfig=" + missing},
			wantCode: app.ExitError,
			wantErr:  "kubelet-like: --kubeconfig \"" + missing + "\": stat " + missing + ": no such file or directory\n"},
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
