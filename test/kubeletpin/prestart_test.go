package kubeletpin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/kubeletdropin"
	"github.com/dynconfig/dynconfig/nodeapi"
)

const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// The CPU policy none -> static and back through the pre-start role, with
// the CPU manager's real start check standing for the kubelet's start:
// without a drain the check refuses the change, as it refuses it without
// dynconfig; on a node marked drained the pre-start role removes the
// checkpoint and the check passes; the way back, a fallback to the node's
// own config, passes too, where a start without the removal is refused.
func TestPreStartLetsTheKubeletStart(t *testing.T) {
	ctx := klog.NewContext(context.Background(), logger(t))
	dir := t.TempDir()
	files := kubeletdropin.Files{Config: filepath.Join(dir, "config.yaml"), ConfigDir: filepath.Join(dir, "conf.d")}
	root := filepath.Join(dir, "kubelet-root")
	for _, d := range []string{files.ConfigDir, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(files.Config, []byte(head+"maxPods: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := kubeletdropin.Common{Files: files, StateDir: filepath.Join(dir, "state"), KubeletVersion: "v1.37.0", KubeletRootDir: root}
	prestart := func() kubeletdropin.PreStartResult {
		t.Helper()
		res, err := kubeletdropin.PreStart(ctx, c, 0)
		if err != nil || res.Chosen == nil {
			t.Fatalf("PreStart: %+v, %v", res, err)
		}
		return res
	}
	store := func(f func(*checkpoint.Store)) {
		t.Helper()
		st, err := checkpoint.Open(checkpoint.Options{Dir: c.StateDir, ComponentVersion: c.KubeletVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		f(st)
	}

	none := &config{}
	prestart()
	if _, err := startCPU(t, root, none); err != nil {
		t.Fatalf("the first start on none: %v", err)
	}

	payload := "cpuManagerPolicy: static\nkubeReserved: {cpu: \"1\"}\n"
	var static config
	if err := yaml.Unmarshal([]byte(payload), &static); err != nil {
		t.Fatal(err)
	}
	key, _ := nodeapi.DefaultPayloadKey(nodeapi.DefaultComponent)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "static", UID: "uid-static", ResourceVersion: "1"},
		Data: map[string]string{key: head + payload}}
	store(func(st *checkpoint.Store) {
		if _, err := st.Save(cm); err != nil {
			t.Fatal(err)
		}
		if err := st.SetCurrent(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: "1", KubeletConfigKey: key}}); err != nil {
			t.Fatal(err)
		}
	})

	// Not drained: today's path, the kubelet's refusal.
	if res := prestart(); len(res.RemovedStateFiles) != 0 {
		t.Fatalf("not drained: removed %v", res.RemovedStateFiles)
	}
	if _, err := startCPU(t, root, &static); err == nil || !strings.Contains(err.Error(), `configured policy "static" differs from state checkpoint policy "none"`) {
		t.Fatalf("not drained, the kubelet's start: %v; want the refusal", err)
	}

	if err := kubeletdropin.MarkDrained(root, "ConfigMap kube-system/static"); err != nil {
		t.Fatal(err)
	}
	if res := prestart(); len(res.RemovedStateFiles) != 1 {
		t.Fatalf("drained: removed %v, want the CPU manager's checkpoint", res.RemovedStateFiles)
	}
	if _, err := startCPU(t, root, &static); err != nil {
		t.Fatalf("drained, the kubelet's start on static: %v", err)
	}
	if err := kubeletdropin.ClearDrained(root); err != nil {
		t.Fatal(err)
	}

	// Back to the node's own config.
	store(func(st *checkpoint.Store) {
		if err := st.SetCurrent(nil); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := startCPU(t, copyDir(t, root), none); err == nil {
		t.Fatal("back to none without the removal: the CPU manager starts; want its refusal")
	}
	if res := prestart(); res.Chosen.Source != nil || len(res.RemovedStateFiles) != 1 {
		t.Fatalf("back to the node's own config: chose %v, removed %v", res.Chosen.Source, res.RemovedStateFiles)
	}
	if _, err := startCPU(t, root, none); err != nil {
		t.Fatalf("back to none, the kubelet's start: %v", err)
	}
}
