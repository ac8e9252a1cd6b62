package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// testKubeconfig has two contexts on two servers; "prod" has a namespace.
const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://dev.example:6443"}
- name: prod
  cluster: {server: "https://prod.example:6443"}
users:
- name: admin
  user: {token: t0k3n}
contexts:
- name: dev
  context: {cluster: dev, user: admin}
- name: prod
  context: {cluster: prod, user: admin, namespace: kube-system}
current-context: dev
`

// TestClientFlags parses the kubectl client flags as a command does and
// builds the client from them: the server and namespace each selects, and the
// exact error of each bad input.
func TestClientFlags(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// No test reads the kubeconfig of whoever runs it.
	t.Setenv("KUBECONFIG", filepath.Join(dir, "absent"))
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	tests := []struct {
		name          string
		args          []string
		wantHost      string
		wantNamespace string
		wantErr       string // the whole error
	}{
		{name: "current context", args: []string{"--kubeconfig", kubeconfig}, wantHost: "https://dev.example:6443", wantNamespace: "default"},
		{name: "--context", args: []string{"--kubeconfig", kubeconfig, "--context", "prod"}, wantHost: "https://prod.example:6443", wantNamespace: "kube-system"},
		{name: "--namespace over the context's", args: []string{"--kubeconfig", kubeconfig, "--context", "prod", "-n", "ops"}, wantHost: "https://prod.example:6443", wantNamespace: "ops"},
		{name: "--server", args: []string{"--kubeconfig", kubeconfig, "--server", "https://other:443"}, wantHost: "https://other:443", wantNamespace: "default"},
		{name: "--server without a kubeconfig", args: []string{"--server", "https://other:443"}, wantHost: "https://other:443", wantNamespace: "default"},
		{name: "--cluster", args: []string{"--kubeconfig", kubeconfig, "--cluster", "prod"}, wantHost: "https://prod.example:6443", wantNamespace: "default"},
		{
			name: "unknown context", args: []string{"--kubeconfig", kubeconfig, "--context", "nope"},
			wantErr: `load kubeconfig: context "nope" does not exist`,
		},
		{
			name: "missing kubeconfig", args: []string{"--kubeconfig", filepath.Join(dir, "missing")},
			wantErr: "load kubeconfig: stat " + filepath.Join(dir, "missing") + ": no such file or directory",
		},
		{
			name: "no kubeconfig at all", args: nil,
			wantErr: "load kubeconfig: no kubeconfig found and no --server: give --kubeconfig, set $KUBECONFIG, or write ~/.kube/config",
		},
		{
			name: "bad --request-timeout", args: []string{"--kubeconfig", kubeconfig, "--request-timeout", "soon"},
			wantErr: `load kubeconfig: Invalid timeout value. Timeout must be a single integer in seconds, or an integer followed by a corresponding time unit (e.g. 1s | 2m | 3h)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "x"}
			f := addClientFlags(cmd)
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatalf("parse %q: %v", tt.args, err)
			}
			c, err := newClientFromFlags(f)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := f.ToRESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.wantHost || c.namespace != tt.wantNamespace {
				t.Errorf("host %q, namespace %q; want %q, %q", cfg.Host, c.namespace, tt.wantHost, tt.wantNamespace)
			}
		})
	}
}

// TestClientFlagsHelp: the API commands list kubectl's client flags, with
// kubectl's names; the offline ones do not take them.
func TestClientFlagsHelp(t *testing.T) {
	root := newRootCommand(nil, nil, testDeps(t, nil))
	for _, name := range []string{"assign", "status", "render"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"kubeconfig", "context", "namespace", "cluster", "user", "server", "token", "as", "request-timeout"} {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("%s has no --%s", name, flag)
			}
		}
		if cmd.Flags().Lookup("cache-dir") != nil {
			t.Errorf("%s has --cache-dir, which nothing uses", name)
		}
		if f := cmd.Flags().ShorthandLookup("n"); f == nil || f.Name != "namespace" {
			t.Errorf("%s: -n is not --namespace", name)
		}
	}
	for _, name := range []string{"inspect", "forget-bad", "reset", "validate"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Flags().Lookup("kubeconfig") != nil {
			t.Errorf("%s takes --kubeconfig but never talks to the API server", name)
		}
	}
}
