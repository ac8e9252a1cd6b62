package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"
)

func types(s string) k8stypes.UID { return k8stypes.UID(s) }

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const cmYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  namespace: kube-system
  name: kubelet-a
  uid: uid-a
data:
  kubelet: |
    apiVersion: kubelet.config.k8s.io/v1beta1
    kind: KubeletConfiguration
`

func TestDirAssigned(t *testing.T) {
	dir := t.TempDir()
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := d.Assigned(ctx)
	if err != nil || a.Source != nil || a.ConfigMap != nil {
		t.Fatalf("missing folder = %+v, %v; want the empty assignment", a, err)
	}

	write(t, filepath.Join(dir, ConfigMapsDir, "a.yaml"), cmYAML)
	write(t, filepath.Join(dir, ConfigMapsDir, "README.md"), "not a configmap")
	write(t, filepath.Join(dir, AssignmentFile), "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a}\n")
	a, err = d.Assigned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.Source.ConfigMap.KubeletConfigKey != "kubelet" || a.ConfigMap.Name != "kubelet-a" || a.ConfigMap.Kind != "ConfigMap" {
		t.Fatalf("resolved %+v / %+v", a.Source.ConfigMap, a.ConfigMap.ObjectMeta)
	}
	rv := a.Source.ConfigMap.ResourceVersion
	if rv == "" || rv != a.ConfigMap.ResourceVersion {
		t.Fatalf("resourceVersion %q / %q", rv, a.ConfigMap.ResourceVersion)
	}
	// An edit in place is a new resourceVersion.
	write(t, filepath.Join(dir, ConfigMapsDir, "a.yaml"), cmYAML+"    kubeAPIQPS: 7\n")
	a2, err := d.Assigned(ctx)
	if err != nil || a2.Source.ConfigMap.ResourceVersion == rv {
		t.Fatalf("edit kept resourceVersion %q (err %v)", rv, err)
	}

	for _, tc := range []struct{ name, assignment, want string }{
		{"all nil", "{}", allNilMessage},
		{"wrong uid", "configMap: {namespace: kube-system, name: kubelet-a, uid: other}", "invalid NodeConfigSource.ConfigMap, uid other and kube-system/kubelet-a do not refer to the same object (its uid is uid-a)"},
		{"absent", "configMap: {namespace: kube-system, name: nope, uid: u}", "ConfigMap kube-system/nope does not exist"},
		{"missing key", "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, kubeletConfigKey: x}", `ConfigMap kube-system/kubelet-a (UID: uid-a) has no key "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(t, filepath.Join(dir, AssignmentFile), tc.assignment)
			_, err := d.Assigned(ctx)
			var ie *InvalidError
			if !errors.As(err, &ie) || err.Error() != tc.want {
				t.Fatalf("error %v, want *InvalidError %q", err, tc.want)
			}
		})
	}
	write(t, filepath.Join(dir, AssignmentFile), "configMap: {namespace: kube-system, name: kubelet-a, uid: uid-a, typo: 1}")
	if _, err := d.Assigned(ctx); err == nil {
		t.Fatal("unknown field in the assignment: want error")
	}
	write(t, filepath.Join(dir, AssignmentFile), "")
	if a, err := d.Assigned(ctx); err != nil || a.Source != nil {
		t.Fatalf("empty assignment file = %+v, %v", a, err)
	}
}

func TestDirRunNotifiesOnChange(t *testing.T) {
	dir := t.TempDir()
	d, err := NewDir(DirOptions{Path: dir, PayloadKey: "kubelet", PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 1)
	done := make(chan error)
	go func() {
		done <- d.Run(ctx, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}()
	// The first call comes when Run has taken its first look.
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no initial notification within 10s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		write(t, filepath.Join(dir, AssignmentFile), fmt.Sprintf("configMap: {namespace: a, name: b, uid: c%d}", i))
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no change notification within 10s")
			}
			continue
		}
		break
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}
}

func TestNewDirOptions(t *testing.T) {
	for _, o := range []DirOptions{{}, {Path: "x"}, {PayloadKey: "k"}, {Path: "x", PayloadKey: "k", PollInterval: -1}} {
		if _, err := NewDir(o); err == nil {
			t.Errorf("NewDir(%+v): want error", o)
		}
	}
}
