package kubeletdropin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
)

const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

type node struct {
	t     *testing.T
	files Files
}

func newNode(t *testing.T, base string, dropIns map[string]string) *node {
	t.Helper()
	dir := t.TempDir()
	f := Files{Config: filepath.Join(dir, "config.yaml"), ConfigDir: filepath.Join(dir, "conf.d")}
	if err := os.MkdirAll(f.ConfigDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, f.Config, head+base)
	for name, body := range dropIns {
		write(t, filepath.Join(f.ConfigDir, name), head+body)
	}
	return &node{t: t, files: f}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (n *node) build(candidate string) (*Config, error) {
	n.t.Helper()
	l, err := NewLayers(n.files, ktesting.NewLogger(n.t, ktesting.NewConfig()))
	if err != nil {
		n.t.Fatal(err)
	}
	var doc *dynconfig.Document
	if candidate != "" {
		doc = &dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head + candidate)}
	}
	return l.Build(doc)
}

func stage(err error) lkg.Stage {
	var ce *lkg.ConfigError
	if errors.As(err, &ce) {
		return ce.Stage
	}
	return -1
}

// The candidate merges where the kubelet will merge dynconfig's file: after
// the drop-ins that sort before it, before those that sort after it (in a
// subdirectory too), over the defaulted base.
func TestBuildPlacesCandidateLikeTheKubelet(t *testing.T) {
	n := newNode(t, "maxPods: 10\nreadOnlyPort: 0\n", map[string]string{"10-a.conf": "maxPods: 20\nserializeImagePulls: false\n"})
	for _, tc := range []struct {
		name      string
		extra     map[string]string
		candidate string
		want      int32
	}{
		{"local", nil, "", 20},
		{"candidate last", nil, "maxPods: 50\n", 50},
		{"a later drop-in wins", map[string]string{"zz.conf": "maxPods: 60\n"}, "maxPods: 50\n", 60},
		{"a later subdirectory wins", map[string]string{"zz/x.conf": "maxPods: 70\n"}, "maxPods: 50\n", 70},
		{"an earlier subdirectory loses", map[string]string{"00/x.conf": "maxPods: 80\n"}, "maxPods: 50\n", 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, body := range tc.extra {
				write(t, filepath.Join(n.files.ConfigDir, name), head+body)
				defer os.RemoveAll(filepath.Join(n.files.ConfigDir, strings.Split(name, "/")[0]))
			}
			cfg, err := n.build(tc.candidate)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxPods != tc.want {
				t.Fatalf("maxPods %d, want %d", cfg.MaxPods, tc.want)
			}
			if cfg.SerializeImagePulls == nil || *cfg.SerializeImagePulls {
				t.Fatal("the other drop-in's field was lost")
			}
		})
	}
	// An old copy of dynconfig's own file on disk is replaced, not merged.
	write(t, n.files.Path(), head+"maxPods: 99\n")
	if cfg, err := n.build(""); err != nil || cfg.MaxPods != 20 {
		t.Fatalf("local config with an old drop-in on disk: %v, %v; want maxPods 20", cfg.MaxPods, err)
	}
}

// The node's files decode as leniently as the kubelet decodes them; the
// candidate strictly. The effective config is what is validated.
func TestBuildStrictForCandidateOnly(t *testing.T) {
	n := newNode(t, "maxPods: 10\nimageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\nnodeOwnField: 1\n", map[string]string{"10-a.conf": "typoFiled: 2\n"})
	if _, err := n.build(""); err != nil {
		t.Fatalf("the node's files with unknown fields (the kubelet ignores them): %v", err)
	}
	_, err := n.build("maxPodz: 50\n")
	if stage(err) != lkg.StageDecode || !strings.Contains(err.Error(), "maxPodz") || !strings.Contains(err.Error(), "configmap ns/c") {
		t.Fatalf("unknown field in the candidate: %v (stage %v); want a decode error naming the field and the ConfigMap", err, stage(err))
	}
	_, err = n.build("maxPods: fifty\n")
	if stage(err) != lkg.StageDecode {
		t.Fatalf("wrong type in the candidate: %v, want a decode error", err)
	}
	// Valid alone, invalid over this node's base: low 80 >= high 70.
	_, err = n.build("imageGCLowThresholdPercent: 80\n")
	if stage(err) != lkg.StageValidate || !strings.Contains(err.Error(), "imageGCLowThresholdPercent") {
		t.Fatalf("candidate invalid over the base: %v, want a validation error", err)
	}
}

func chosen(data string) dynconfig.Chosen {
	return dynconfig.Chosen{
		Source: &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "ns", Name: "c", UID: "u1", ResourceVersion: "7", KubeletConfigKey: "kubelet"}},
		Document: &dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(data)},
	}
}

// Apply writes a file the kubelet's decoder reads (a YAML comment, then the
// payload), with a mode the kubelet can read; local removes it.
func TestApplyWritesAndRemoves(t *testing.T) {
	n := newNode(t, "maxPods: 10\n", nil)
	for _, payload := range []string{head + "maxPods: 50\n", `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50}`} {
		if err := n.files.Apply(context.Background(), chosen(payload)); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(n.files.Path())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# Written by dynconfig") || !strings.Contains(string(data), "uid u1 resourceVersion 7") {
			t.Fatalf("drop-in has no header naming its config:\n%s", data)
		}
		// Read back as any other drop-in (another name, so it is not
		// dynconfig's own): the header must not break decoding.
		other := n.files
		other.Name = "00-other.conf"
		l, _ := NewLayers(other, ktesting.NewLogger(t, ktesting.NewConfig()))
		cfg, err := l.Build(nil)
		if err != nil || cfg.MaxPods != 50 {
			t.Fatalf("reading the written drop-in: maxPods %v, %v", cfg.MaxPods, err)
		}
	}
	fi, _ := os.Stat(n.files.Path())
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
	if err := n.files.Apply(context.Background(), dynconfig.Chosen{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.files.Path()); !os.IsNotExist(err) {
		t.Fatalf("local config left the drop-in: %v", err)
	}
	if err := n.files.Remove(); err != nil {
		t.Fatalf("removing a missing drop-in: %v", err)
	}
	entries, _ := os.ReadDir(n.files.ConfigDir)
	if len(entries) != 0 {
		t.Fatalf("left behind in the config dir: %v", entries)
	}
}

func TestFilesValidation(t *testing.T) {
	for _, f := range []Files{{}, {ConfigDir: "/x", Name: "a/b.conf"}, {ConfigDir: "/x", Name: "b.yaml"}, {ConfigDir: "/x", Name: ".b.conf"}} {
		if _, err := NewLayers(f, ktesting.NewLogger(t, ktesting.NewConfig())); err == nil {
			t.Errorf("NewLayers(%+v) accepted", f)
		}
	}
}

// PreStart: the first start of a node records a start and removes nothing
// it did not write; with the node's own files invalid, it removes
// dynconfig's drop-in and says so, and it always returns in time.
func TestPreStart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	n := newNode(t, "maxPods: 10\n", nil)
	c := Common{Files: n.files, StateDir: filepath.Join(t.TempDir(), "state"), KubeletVersion: "v1.37.0"}
	res, err := PreStart(ctx, c, 0)
	if err != nil || res.Chosen == nil || res.Chosen.Source != nil {
		t.Fatalf("first start: %+v, %v; want the local config", res, err)
	}
	write(t, n.files.Path(), "# stale\n"+head+"maxPods: 50\n")
	write(t, n.files.Config, head+"maxPods: -1\n")
	res, err = PreStart(ctx, c, 0)
	if err == nil || !strings.Contains(err.Error(), "maxPods") || !strings.Contains(res.Fallback, "removed") {
		t.Fatalf("invalid node config: %+v, %v; want the error and the drop-in removed", res, err)
	}
	if _, err := os.Stat(n.files.Path()); !os.IsNotExist(err) {
		t.Fatalf("drop-in not removed: %v", err)
	}
}

// confirmState is a state dir whose current config (maxPods 20) first ran
// an hour ago and was never confirmed healthy, with no last-known-good.
func confirmState(t *testing.T, dir string) *corev1.NodeConfigSource {
	t.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key, _ := nodeapi.DefaultPayloadKey(nodeapi.DefaultComponent)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubelet-20", UID: "uid-20", ResourceVersion: "7"},
		Data: map[string]string{key: head + "maxPods: 20\n"}}
	if _, err := s.Save(cm); err != nil {
		t.Fatal(err)
	}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: cm.Namespace, Name: cm.Name,
		UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: key}}
	if err := s.SetCurrent(src); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordFirstRunAt(time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	return src
}

// The pre-start role applies Common.ConfirmWithin: a config the kubelet
// never confirmed within the deadline of its first start is not handed to
// the kubelet again; without a deadline it is.
func TestPreStartConfirmWithin(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, within := range []time.Duration{0, 10 * time.Minute} {
		n := newNode(t, "maxPods: 10\n", nil)
		c := Common{Files: n.files, StateDir: filepath.Join(t.TempDir(), "state"), KubeletVersion: "v1.37.0",
			DefaultTrial: components.Trial{Duration: 2 * time.Hour, CrashLoopThreshold: 10}, ConfirmWithin: within}
		src := confirmState(t, c.StateDir)
		res, err := PreStart(ctx, c, 0)
		if err != nil || res.Chosen == nil {
			t.Fatalf("ConfirmWithin %v: %+v, %v", within, res, err)
		}
		got, _ := os.ReadFile(n.files.Path())
		if within == 0 {
			if !lkg.Same(res.Chosen.Source, src) || !strings.Contains(string(got), "maxPods: 20") {
				t.Errorf("no deadline: chose %v, drop-in %q; want current (maxPods 20)", res.Chosen.Source, got)
			}
			continue
		}
		if res.Chosen.Source != nil || strings.Contains(string(got), "maxPods: 20") {
			t.Errorf("deadline passed: chose %v, drop-in %q; want the node's own config", res.Chosen.Source, got)
		}
		snap, err := checkpoint.Inspect(c.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		tr, _ := snap.Version(c.KubeletVersion)
		if _, m, ok := tr.BadMarks.Lookup(src); !ok || !strings.Contains(m.Reason, "confirm") {
			t.Errorf("deadline passed: bad mark %+v (%v), want current marked bad as not confirmed", m, ok)
		}
	}
}
