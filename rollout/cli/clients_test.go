package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// TestNoKubeconfig: with no kubeconfig anywhere, no --server and not in a
// Pod, a rollout command says what is missing instead of talking to
// http://localhost:8080, kubectl's deprecated default (it did; found by
// the dynconfigctl session).
func TestNoKubeconfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(dir, "absent"))
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var out bytes.Buffer
	cmd := NewCommand(Options{Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"status", "r1"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	want := "load kubeconfig: no kubeconfig found and no --server: give --kubeconfig, set $KUBECONFIG, or write ~/.kube/config"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
