package kubeletpin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components/kubelet/changeclass"
	"github.com/dynconfig/dynconfig/kubeletdropin"
	"github.com/dynconfig/dynconfig/nodeapi"
)

const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// newNode is a node's kubelet files (a base config with maxPods 10 and the
// none policies, a config dir), dynconfig's state dir and the kubelet's
// root dir, all in a temporary dir.
func newNode(t *testing.T) kubeletdropin.Common {
	t.Helper()
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
	return kubeletdropin.Common{Files: files, StateDir: filepath.Join(dir, "state"), KubeletVersion: "v1.37.0", KubeletRootDir: root}
}

// The CPU policy none -> static and back through the pre-start role, with
// the CPU manager's real start check standing for the kubelet's start:
// without a drain the check refuses the change, as it refuses it without
// dynconfig; on a node marked drained the pre-start role removes the
// checkpoint and the check passes; the way back, a fallback to the node's
// own config, passes too, where a start without the removal is refused.
func TestPreStartLetsTheKubeletStart(t *testing.T) {
	ctx := klog.NewContext(context.Background(), logger(t))
	c := newNode(t)
	root := c.KubeletRootDir
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

// The checkpoints the real managers write name their policy where the
// pre-start role reads it: with no record of dynconfig's (a node that
// never ran this version), StateChange, the comparison the pre-start role
// makes, still sees a policy change of either manager.
func TestStateChangeReadsTheRealCheckpoints(t *testing.T) {
	c := newNode(t)
	root := c.KubeletRootDir
	if _, err := startCPU(t, root, &config{}); err != nil {
		t.Fatal(err)
	}
	if err := startMemory(t, root, &config{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		payload, field, file string
	}{
		{"cpuManagerPolicy: static\nkubeReserved: {cpu: \"1\"}\n", "cpuManagerPolicy", "cpu_manager_state"},
		{"memoryManagerPolicy: Static\nkubeReserved: {memory: 1000Mi}\nreservedMemory: [{numaNode: 0, limits: {memory: 1100Mi}}]\n",
			"memoryManagerPolicy", "memory_manager_state"},
	} {
		doc := &dynconfig.Document{Name: "configmap kube-system/x key kubelet", Data: []byte(head + tc.payload)}
		ch, err := kubeletdropin.StateChange(c, doc, logger(t))
		if err != nil || ch.Class != changeclass.Drain || !slices.Equal(ch.Fields, []string{tc.field}) || !slices.Equal(ch.StateFiles, []string{tc.file}) {
			t.Errorf("%s: StateChange = %v, %v; want Drain of %s, %s", tc.field, ch, err, tc.field, tc.file)
		}
	}
	if ch, err := kubeletdropin.StateChange(c, nil, logger(t)); err != nil || ch.Class != changeclass.Restart {
		t.Errorf("the node's own config: StateChange = %v, %v; want Restart", ch, err)
	}
}
