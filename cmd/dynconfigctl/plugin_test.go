package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestInvokedAs(t *testing.T) {
	for arg0, want := range map[string]string{
		"dynconfigctl": "dynconfigctl", "/usr/local/bin/dynconfigctl": "dynconfigctl", "": "dynconfigctl",
		"/home/me/.krew/bin/kubectl-dynconfig": "kubectl dynconfig",
		"kubectl-dynconfig.exe":                "kubectl dynconfig",
	} {
		if got := invokedAs(arg0); got != want {
			t.Errorf("invokedAs(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// Run as kubectl-dynconfig, usage and errors name `kubectl dynconfig`.
func TestPluginUsage(t *testing.T) {
	d := defaultDeps()
	d.arg0 = "/usr/local/bin/kubectl-dynconfig"
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"rollout", "list", "--help"}, &out, &errOut, d); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "kubectl dynconfig rollout list [flags]") {
		t.Errorf("help does not name the plugin:\n%s", out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"rollout", "status"}, &out, &errOut, d); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if !strings.HasPrefix(errOut.String(), "kubectl dynconfig: ") || !strings.Contains(errOut.String(), "Run 'kubectl dynconfig rollout status --help'") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
}
