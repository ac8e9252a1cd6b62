package proctest

import (
	"strings"
	"testing"
)

// ExpectComponentExitCodes runs the component binary bin, named name (a
// command built with package app), on --help, --version and an unknown
// flag, and checks app's exit codes (0, 0 and 2), the start of what each
// prints on stdout (--help's starts with helpPrefix) and the usage error.
func ExpectComponentExitCodes(t *testing.T, bin, name, helpPrefix string) {
	t.Helper()
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStdout string // a prefix
		wantStderr string
	}{
		{args: []string{"--help"}, wantCode: 0, wantStdout: helpPrefix},
		{args: []string{"--version"}, wantCode: 0, wantStdout: name + " v"},
		{args: []string{"--dynamic-config-dir=" + t.TempDir(), "--no-such-flag"}, wantCode: 2,
			wantStderr: name + ": unknown flag: --no-such-flag\nRun '" + name + " --help' for usage.\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := RunToExit(t, bin, tc.args...)
			if code != tc.wantCode || !strings.HasPrefix(stdout, tc.wantStdout) || stderr != tc.wantStderr {
				t.Errorf("exit code %d, stdout %q, stderr %q; want %d, stdout starting with %q, stderr %q",
					code, Tail(stdout, 3), stderr, tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}
