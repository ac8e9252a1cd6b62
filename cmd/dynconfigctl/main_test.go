package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// TestRun runs whole command lines: flags reach the commands, and errors map
// to the exit codes (0 ok, 1 error, 2 usage).
func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string // "$STATE" is the fixture's state dir
		locked     bool
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{name: "no command", args: nil, wantCode: exitUsage, wantStderr: "dynconfigctl: no command given"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitUsage, wantStderr: `unknown command "frobnicate"`},
		{name: "help", args: []string{"--help"}, wantCode: exitOK, wantStdout: "forget-bad"},
		{name: "unknown flag", args: []string{"inspect", "--bogus", "$STATE"}, wantCode: exitUsage, wantStderr: "unknown flag: --bogus"},
		{name: "inspect without DIR", args: []string{"inspect"}, wantCode: exitUsage, wantStderr: "inspect takes 1 argument(s), DIR, got 0"},
		{name: "inspect", args: []string{"inspect", "$STATE"}, wantCode: exitOK, wantStdout: "Current:          ConfigMap kube-system/kubelet-b"},
		{name: "inspect json", args: []string{"inspect", "-o", "json", "$STATE"}, wantCode: exitOK, wantStdout: `"stateDir": "$STATE"`},
		{name: "inspect bad output", args: []string{"inspect", "-o", "yaml", "$STATE"}, wantCode: exitUsage, wantStderr: `--output "yaml": want text or json`},
		{name: "inspect missing dir", args: []string{"inspect", "$STATE/nope"}, wantCode: exitError, wantStderr: "state dir $STATE/nope does not exist"},
		{
			name: "inspect locked", args: []string{"inspect", "$STATE"}, locked: true, wantCode: exitError,
			wantStderr: "dynconfigctl: state dir $STATE is in use by a running component; stop it or use --no-lock\n",
		},
		{name: "inspect locked, no lock", args: []string{"inspect", "--no-lock", "$STATE"}, locked: true, wantCode: exitOK, wantStdout: "without the lock"},
		{name: "forget-bad", args: []string{"forget-bad", "$STATE", "uid-b/2"}, wantCode: exitOK, wantStdout: "Forgot bad mark uid-b/2"},
		{name: "forget-bad malformed", args: []string{"forget-bad", "$STATE", "uid-b"}, wantCode: exitUsage, wantStderr: "want UID/RESOURCEVERSION"},
		{name: "forget-bad unknown", args: []string{"forget-bad", "$STATE", "uid-q/1"}, wantCode: exitError, wantStderr: "no bad mark uid-q/1"},
		{name: "reset", args: []string{"reset", "$STATE"}, wantCode: exitOK, wantStdout: "last-known-good: ConfigMap kube-system/kubelet-a"},
		{name: "reset extra arg", args: []string{"reset", "$STATE", "x"}, wantCode: exitUsage, wantStderr: "reset takes 1 argument(s)"},
		{name: "assign", args: []string{"assign", "--node", "n1", "--configmap", "kube-system/kubelet-b"}, wantCode: exitOK, wantStdout: `"uid":"uid-b"`},
		{name: "assign missing key", args: []string{"assign", "--node", "n1", "--configmap", "kube-system/kubelet-b", "--key", "k"}, wantCode: exitError, wantStderr: `no data key "k"`},
		{name: "assign clear", args: []string{"assign", "--node", "n1", "--clear"}, wantCode: exitOK, wantStdout: "nothing to clear"},
		{name: "assign without node", args: []string{"assign", "--clear"}, wantCode: exitUsage, wantStderr: "--node is required"},
		{name: "assign argument", args: []string{"assign", "n1"}, wantCode: exitUsage, wantStderr: `assign takes no arguments, got ["n1"]`},
		{name: "assign in --namespace", args: []string{"assign", "--node", "n1", "--configmap", "kubelet-b", "-n", "kube-system"}, wantCode: exitOK, wantStdout: `"namespace":"kube-system","name":"kubelet-b"`},
		{name: "assign in the default namespace", args: []string{"assign", "--node", "n1", "--configmap", "kubelet-b"}, wantCode: exitError, wantStderr: "dynconfigctl: ConfigMap default/kubelet-b not found\n"},
		{
			name: "assign kube-proxy's payload key", args: []string{"assign", "--node", "n1", "--configmap", "kube-system/kubelet-b", "--component", "kube-proxy"}, wantCode: exitError,
			wantStderr: `dynconfigctl: ConfigMap kube-system/kubelet-b has no data key "config.conf" (keys present: kubelet, notes); choose one with --key` + "\n",
		},
		{
			name: "assign kube-proxy", args: []string{"assign", "--node", "n1", "--configmap", "kube-system/kubelet-b", "--component", "kube-proxy", "--key", "kubelet"}, wantCode: exitOK,
			wantStdout: "node n1: set annotation dynconfig.io/config-source.kube-proxy=",
		},
		{
			name: "assign a third-party component without --key", args: []string{"assign", "--node", "n1", "--configmap", "kube-system/kubelet-b", "--component", "node-agent"}, wantCode: exitUsage,
			wantStderr: `dynconfigctl: --key is required for component "node-agent": only kube-proxy, kubelet have a default payload key` + "\n",
		},
		{name: "assign bad component", args: []string{"assign", "--node", "n1", "--clear", "--component", "-x"}, wantCode: exitUsage, wantStderr: `dynconfigctl: --component: component name "-x": a lowercase RFC 1123 label must consist of`},
		{name: "client flags only where a client is used", args: []string{"inspect", "--kubeconfig", "k", "$STATE"}, wantCode: exitUsage, wantStderr: "dynconfigctl: unknown flag: --kubeconfig\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.locked {
				f.holdLock(t)
			}
			d := testDeps(t, f.clock)
			client := fake.NewClientset(
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
				f.currentCM,
			)
			d.newClient = func(f *genericclioptions.ConfigFlags) (apiClient, error) {
				return apiClient{client: client, namespace: namespaceOf(f)}, nil
			}
			var args []string
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "$STATE", f.dir))
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr, d)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if want := strings.ReplaceAll(tt.wantStdout, "$STATE", f.dir); !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout does not contain %q:\n%s", want, stdout.String())
			}
			if want := strings.ReplaceAll(tt.wantStderr, "$STATE", f.dir); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
			}
			if tt.wantCode != exitOK && stdout.Len() != 0 {
				t.Errorf("a failing command wrote to stdout:\n%s", stdout.String())
			}
		})
	}
}

// TestNoLockNeverWrites is the guarantee of --no-lock, against every state
// the fixture can be in: with and without a lock holder.
func TestNoLockNeverWrites(t *testing.T) {
	for _, locked := range []bool{false, true} {
		t.Run(map[bool]string{false: "unlocked", true: "locked"}[locked], func(t *testing.T) {
			f := newFixture(t)
			if locked {
				f.holdLock(t)
			}
			before := snapshot(t, f.dir)
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"inspect", "--no-lock", f.dir}, &stdout, &stderr, testDeps(t, f.clock)); code != exitOK {
				t.Fatalf("exit code %d: %s", code, stderr.String())
			}
			if diff := cmp.Diff(before, snapshot(t, f.dir)); diff != "" {
				t.Errorf("inspect --no-lock changed the state dir (-before +after):\n%s", diff)
			}
			// And the lock was not taken: a component can open the dir
			// right after, which it could not if inspect had leaked it.
			if !locked {
				s, err := checkpoint.Open(checkpoint.Options{Dir: f.dir, ComponentVersion: f.currentVersion, Clock: f.clock})
				if err != nil {
					t.Fatalf("open after inspect: %v", err)
				}
				s.Close()
			}
		})
	}
}

func FuzzParseMarkPattern(f *testing.F) {
	for _, s := range []string{"uid/1", "uid/1/kubelet", "uid/1/a.b_c-d", "uid/1/", "uid/1/a b", "uid/1/a/b", "", "/", "a/", "/b", "../1", "a/..", "\x00/1", ".tmp-x/1", "é/ü", strings.Repeat("u", 300) + "/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseMarkPattern(s)
		if err != nil {
			if _, ok := err.(*usageError); !ok {
				t.Fatalf("parseMarkPattern(%q): error %T, want a usage error", s, err)
			}
			return
		}
		if p != s {
			t.Errorf("parseMarkPattern(%q) = %q: does not round-trip", s, p)
		}
		parts := strings.Split(s, "/")
		if len(parts) < 2 || len(parts) > 3 {
			t.Fatalf("parseMarkPattern(%q) accepted %d parts", s, len(parts))
		}
		if err := checkpoint.ValidateKey(checkpoint.Key{UID: types.UID(parts[0]), ResourceVersion: parts[1]}); err != nil {
			t.Errorf("parseMarkPattern(%q) accepted an invalid key: %v", s, err)
		}
		// Every pattern accepted is one ForgetBad takes: the mark of the
		// config it names matches it.
		src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{UID: types.UID(parts[0]), ResourceVersion: parts[1]}}
		if len(parts) == 3 {
			src.ConfigMap.KubeletConfigKey = parts[2]
		}
		if !markMatches(checkpoint.MarkKey(src), p) {
			t.Errorf("the mark %q of the config %q names does not match it", checkpoint.MarkKey(src), p)
		}
	})
}

func FuzzParseNamespacedName(f *testing.F) {
	for _, s := range []string{"ns/name", "", "/", "ns/", "/name", "a/b/c", "name"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, name, err := parseNamespacedName(s)
		if err != nil {
			return
		}
		if ns == "" || name == "" || ns+"/"+name != s || strings.Contains(name, "/") || strings.Contains(ns, "/") {
			t.Errorf("parseNamespacedName(%q) = %q, %q", s, ns, name)
		}
	})
}

// namespaceOf is the namespace a fake client gets from the client flags:
// --namespace, else "default" (the tests have no kubeconfig).
func namespaceOf(f *genericclioptions.ConfigFlags) string {
	if f.Namespace != nil && *f.Namespace != "" {
		return *f.Namespace
	}
	return "default"
}

// TestHelpExplains: every command's --help says what it does, shows
// examples where it takes flags, and gives its exit status; it exits 0.
func TestHelpExplains(t *testing.T) {
	for _, name := range []string{"validate", "render", "assign", "status"} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{name, "--help"}, &stdout, &stderr, testDeps(t, nil)); code != exitOK {
				t.Fatalf("exit code %d: %s", code, stderr.String())
			}
			for _, want := range []string{"Usage:\n  dynconfigctl " + name, "Exit status: 0 ", "Examples:\n"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("%s --help does not contain %q:\n%s", name, want, stdout.String())
				}
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr, testDeps(t, nil)); code != exitOK {
		t.Fatalf("exit code %d", code)
	}
	for _, cmd := range []string{"inspect", "forget-bad", "reset", "validate", "render", "assign", "status", "rollout"} {
		if !strings.Contains(stdout.String(), "\n  "+cmd+" ") {
			t.Errorf("dynconfigctl --help does not list %s:\n%s", cmd, stdout.String())
		}
	}
}

// TestRolloutWired: rollout (package rollout/cli) is a command of
// dynconfigctl, with the same exit codes: cobra's own argument checks are
// usage errors.
func TestRolloutWired(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{args: []string{"rollout", "--help"}, wantCode: exitOK, wantStdout: "  start       "},
		{args: []string{"rollout", "start"}, wantCode: exitUsage, wantStderr: "dynconfigctl: accepts 1 arg(s), received 0\nRun 'dynconfigctl rollout start --help' for usage.\n"},
		{args: []string{"rollout", "status", "a", "b"}, wantCode: exitUsage, wantStderr: "dynconfigctl: accepts 1 arg(s), received 2\nRun 'dynconfigctl rollout status --help' for usage.\n"},
		{args: []string{"rollout", "pause", "--bogus", "r"}, wantCode: exitUsage, wantStderr: "dynconfigctl: unknown flag: --bogus\nRun 'dynconfigctl rollout pause --help' for usage.\n"},
		// Flag values the command checks itself are usage errors too (they
		// exited 1).
		{args: []string{"rollout", "start", "r1", "--configmap", "c", "--steps", "0"}, wantCode: exitUsage,
			wantStderr: "dynconfigctl: --steps: step 1: \"0\": want a positive node count or a percentage\nRun 'dynconfigctl rollout start --help' for usage.\n"},
		{args: []string{"rollout", "list", "-o", "custom-columns"}, wantCode: exitUsage,
			wantStderr: "dynconfigctl: -o custom-columns: want custom-columns=NAME:.jsonpath[,NAME:.jsonpath...]\nRun 'dynconfigctl rollout list --help' for usage.\n"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr, testDeps(t, nil))
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout does not contain %q:\n%s", tt.wantStdout, stdout.String())
			}
			if tt.wantStderr != stderr.String() {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
