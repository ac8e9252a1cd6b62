package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/internal/proctest"
)

// kubeletLike is examples/kubelet-like, built by TestMain before any test
// starts its clock (-short skips the tests that run it).
var kubeletLike = proctest.Binary{Name: "kubelet-like", Package: "../../examples/kubelet-like"}

func TestMain(m *testing.M) {
	os.Exit(kubeletLike.RunTests(m))
}

// TestAgainstKubeletLikeStateDir runs the real examples/kubelet-like binary
// on a bad assignment, then inspects and repairs the state dir it left.
func TestAgainstKubeletLikeStateDir(t *testing.T) {
	bin := kubeletLike.Build(t) // skips with -short
	tmp := t.TempDir()
	src, state, statusFile := filepath.Join(tmp, "src"), filepath.Join(tmp, "state"), filepath.Join(tmp, "status.json")
	writeTestFile(t, filepath.Join(src, "configmaps", "bad.yaml"), `apiVersion: v1
kind: ConfigMap
metadata: {namespace: kube-system, name: kubelet-bad, uid: uid-bad, resourceVersion: "7"}
data:
  kubelet: |
    apiVersion: kubelet.config.k8s.io/v1beta1
    kind: KubeletConfiguration
    kubeAPIQPS: -1
`)
	writeTestFile(t, filepath.Join(src, "assignment.yaml"), "configMap: {namespace: kube-system, name: kubelet-bad, uid: uid-bad}\n")

	cmd := exec.Command(bin, "--dynamic-config-dir", state, "--source-dir", src, "--port", "0", "--status-file", statusFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(statusFile)
		if strings.Contains(string(data), "failed to validate current (UID: uid-bad)") {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no validation failure reported within 30s; status %q; stderr:\n%s", data, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kubelet-like did not exit cleanly on SIGTERM: %v\n%s", err, stderr.String())
	}

	ctl := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut, defaultDeps())
		return code, out.String() + errOut.String()
	}
	code, out := ctl("inspect", state)
	if code != 0 || !strings.Contains(out, "uid-bad/7") || !strings.Contains(out, "failed to validate current (UID: uid-bad)") {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}
	if code, out := ctl("forget-bad", state, "uid-bad/7"); code != 0 {
		t.Fatalf("forget-bad: exit %d\n%s", code, out)
	}
	if code, out := ctl("inspect", state); code != 0 || strings.Contains(out, "failed to validate current (UID: uid-bad)") {
		t.Fatalf("inspect after forget-bad: exit %d\n%s", code, out)
	}
	if code, out := ctl("forget-bad", state, "uid-bad/7"); code == 0 {
		t.Fatalf("second forget-bad succeeded:\n%s", out)
	}
	if code, out := ctl("reset", state); code != 0 {
		t.Fatalf("reset: exit %d\n%s", code, out)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
