package proctest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/dynconfig/dynconfig/examples/internal/demo"
)

// ExpectExecuteError runs cmd in process through demo.Execute with args
// and checks that it failed as a component must on a bad invocation: exit
// code 1, nothing on stdout, and on stderr an error that starts with prefix
// and contains want.
func ExpectExecuteError(t testing.TB, cmd *cobra.Command, args []string, prefix, want string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := demo.Execute(context.Background(), cmd, args, &stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.HasPrefix(stderr.String(), prefix) || !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr = %q, want an error line containing %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}
