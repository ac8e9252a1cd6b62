package proctest

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// ExpectExecuteError runs execute (a component's command, in process) and
// checks that it failed as a component must on a bad invocation: exit code
// 1, nothing on stdout, and on stderr an error that starts with prefix and
// contains want.
func ExpectExecuteError(t testing.TB, execute func(stdout, stderr io.Writer) int, prefix, want string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := execute(&stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.HasPrefix(stderr.String(), prefix) || !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr = %q, want an error line containing %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}
