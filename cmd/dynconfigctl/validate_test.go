package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	validKubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n"
	validProxy   = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n"
)

// TestValidate is the table of bad inputs of validate: the exact stdout,
// stderr and exit code of each.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kubelet.yaml": validKubelet,
		"proxy.yaml":   validProxy,
		"kubelet.json": `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":10250}`,
		// Strict decoding stops at unknown fields; validate still reports
		// the validation errors of the rest.
		"typos.yaml":     "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxpods: 50\nkubeAPIQPS: -1\nauthentication:\n  x509:\n    clientCAFle: /x\n",
		"invalid.yaml":   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeAPIQPS: -1\neventRecordQPS: -3\n",
		"dup.yaml":       "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 1\nport: 2\n",
		"type.yaml":      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: ten\nkubeAPIQPS: -1\n",
		"badproxy.yaml":  "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: bogus\n",
		"nokind.yaml":    "kind: KubeletConfiguration\n",
		"noversion.yaml": "port: 1\n",
		"lowerkind.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: kubeletconfiguration\n",
		"Kind.yaml":      "apiVersion: kubelet.config.k8s.io/v1beta1\nKind: KubeletConfiguration\n",
		"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\n",
		"empty.yaml":     "",
		"blank.yaml":     "  \n\n",
		"syntax.yaml":    "a: [\n",
		"scalar.yaml":    "hello\n",
		"list.yaml":      "- a\n",
		"two.yaml":       validKubelet + "---\n" + validKubelet,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	const kinds = "want one of: kubelet.config.k8s.io/v1beta1 KubeletConfiguration, kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration"

	tests := []struct {
		name       string
		args       []string // file names relative to dir, except "-"
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string // exact
	}{
		{
			name: "valid", args: []string{"kubelet.yaml", "proxy.yaml", "kubelet.json"}, wantCode: exitOK,
			wantStdout: "$D/kubelet.yaml: valid KubeletConfiguration (kubelet.config.k8s.io/v1beta1)\n" +
				"$D/proxy.yaml: valid KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)\n" +
				"$D/kubelet.json: valid KubeletConfiguration (kubelet.config.k8s.io/v1beta1)\n",
		},
		{
			name: "every error of every file", args: []string{"typos.yaml", "kubelet.yaml", "invalid.yaml"}, wantCode: exitError,
			wantStdout: "$D/kubelet.yaml: valid KubeletConfiguration (kubelet.config.k8s.io/v1beta1)\n",
			wantStderr: `$D/typos.yaml: unknown field "maxpods"
$D/typos.yaml: authentication.x509: unknown field "clientCAFle"
$D/typos.yaml: kubeAPIQPS: Invalid value: -1: must not be negative
$D/invalid.yaml: eventRecordQPS: Invalid value: -3: must not be negative
$D/invalid.yaml: kubeAPIQPS: Invalid value: -1: must not be negative
dynconfigctl: 2 of 3 file(s) invalid
`,
		},
		{
			name: "duplicate field", args: []string{"dup.yaml"}, wantCode: exitError,
			wantStderr: "$D/dup.yaml: duplicate field \"port\"\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "wrong type stops there", args: []string{"type.yaml"}, wantCode: exitError,
			wantStderr: "$D/type.yaml: port: expected int32, got string \"ten\"\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "kube-proxy", args: []string{"badproxy.yaml"}, wantCode: exitError,
			wantStderr: "$D/badproxy.yaml: mode: Unsupported value: \"bogus\": supported values: \"iptables\", \"ipvs\", \"nftables\"\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "no apiVersion", args: []string{"nokind.yaml"}, wantCode: exitError,
			wantStderr: "$D/nokind.yaml: apiVersion missing; " + kinds + "\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "no apiVersion and kind", args: []string{"noversion.yaml"}, wantCode: exitError,
			wantStderr: "$D/noversion.yaml: apiVersion and kind missing; " + kinds + "\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "kind is case-sensitive", args: []string{"lowerkind.yaml"}, wantCode: exitError,
			wantStderr: "$D/lowerkind.yaml: unknown apiVersion \"kubelet.config.k8s.io/v1beta1\" and kind \"kubeletconfiguration\"; " + kinds + "\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "the kind key is case-sensitive", args: []string{"Kind.yaml"}, wantCode: exitError,
			wantStderr: "$D/Kind.yaml: kind missing; " + kinds + "\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "another kind", args: []string{"configmap.yaml"}, wantCode: exitError,
			wantStderr: "$D/configmap.yaml: unknown apiVersion \"v1\" and kind \"ConfigMap\"; " + kinds + "\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "empty", args: []string{"empty.yaml", "blank.yaml"}, wantCode: exitError,
			wantStderr: "$D/empty.yaml: the file is empty; want a KubeletConfiguration or KubeProxyConfiguration document\n" +
				"$D/blank.yaml: the file is empty; want a KubeletConfiguration or KubeProxyConfiguration document\n" +
				"dynconfigctl: 2 of 2 file(s) invalid\n",
		},
		{
			name: "syntax", args: []string{"syntax.yaml"}, wantCode: exitError,
			wantStderr: "$D/syntax.yaml: not a YAML or JSON object: yaml: line 1: did not find expected node content\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "not an object", args: []string{"scalar.yaml", "list.yaml"}, wantCode: exitError,
			wantStderr: "$D/scalar.yaml: not a YAML or JSON object: the document is a string\n$D/list.yaml: not a YAML or JSON object: the document is a list\ndynconfigctl: 2 of 2 file(s) invalid\n",
		},
		{
			name: "two documents", args: []string{"two.yaml"}, wantCode: exitError,
			wantStderr: "$D/two.yaml: more than one YAML document: a configuration file holds exactly one\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{
			name: "missing, directory, FIFO", args: []string{"missing.yaml", "sub", "fifo"}, wantCode: exitError,
			wantStderr: "$D/missing.yaml: no such file or directory\n$D/sub: is a directory\n$D/fifo: not a regular file (p---------)\ndynconfigctl: 3 of 3 file(s) invalid\n",
		},
		{name: "stdin", args: []string{"-"}, stdin: validProxy, wantCode: exitOK, wantStdout: "<stdin>: valid KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)\n"},
		{
			name: "empty stdin", args: []string{"-"}, wantCode: exitError,
			wantStderr: "<stdin>: the file is empty; want a KubeletConfiguration or KubeProxyConfiguration document\ndynconfigctl: 1 of 1 file(s) invalid\n",
		},
		{name: "no file", args: nil, wantCode: exitUsage, wantStderr: "dynconfigctl: validate takes at least 1 argument, FILE..., got 0\nRun 'dynconfigctl validate --help' for usage.\n"},
		{name: "empty file name", args: []string{""}, wantCode: exitUsage, wantStderr: "dynconfigctl: validate: a FILE must not be empty\nRun 'dynconfigctl validate --help' for usage.\n"},
		{name: "stdin twice", args: []string{"-", "-"}, wantCode: exitUsage, wantStderr: "dynconfigctl: validate: the standard input (-) can be read only once\nRun 'dynconfigctl validate --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"validate"}
			for _, a := range tt.args {
				if a != "-" && a != "" {
					a = filepath.Join(dir, a)
				}
				args = append(args, a)
			}
			d := testDeps(t, nil)
			d.stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr, d)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.wantStdout, "$D", dir), stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.wantStderr, "$D", dir), stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
