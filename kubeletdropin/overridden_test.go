package kubeletdropin

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/dynconfig/dynconfig"
)

// TestOverriddenFieldsAreLogged: a field the assigned config sets that a
// node drop-in sorting after dynconfig's file sets again does not take
// effect (the kubelet merges that file last). Build says so, naming each
// field and the file that wins; fields no later file touches, and a node
// whose drop-ins all sort before dynconfig's, give no such line.
func TestOverriddenFieldsAreLogged(t *testing.T) {
	n := newNode(t, "maxPods: 10\n", map[string]string{
		"10-early.conf":   "evictionHard: {memory.available: 100Mi}\n",
		"zz-local.conf":   "evictionHard: {memory.available: 300Mi}\nfeatureGates: {NodeLogQuery: true}\n",
		"zz/nested.conf":  "maxPods: 70\n",
		"00/ignored.conf": "serializeImagePulls: false\n",
	})
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	l, err := NewLayers(n.files, log)
	if err != nil {
		t.Fatal(err)
	}
	candidate := &dynconfig.Document{Name: "configmap ns/c key kubelet", Data: []byte(head +
		"evictionHard: {memory.available: 500Mi}\nmaxPods: 50\nimageGCHighThresholdPercent: 90\nfeatureGates: {NodeLogQuery: false}\n")}
	cfg, err := l.Build(candidate)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPods != 70 || cfg.EvictionHard["memory.available"] != "300Mi" {
		t.Fatalf("effective maxPods %d, evictionHard %v: want the later files' 70 and 300Mi", cfg.MaxPods, cfg.EvictionHard)
	}
	var warned []string
	for _, l := range lines {
		if strings.Contains(l, "sort after dynconfig's file") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("%d warnings, want 1: %q", len(warned), lines)
	}
	dir := n.files.ConfigDir
	for _, want := range []string{
		"evictionHard[memory.available] (by " + filepath.Join(dir, "zz-local.conf") + ")",
		"featureGates[NodeLogQuery] (by " + filepath.Join(dir, "zz-local.conf") + ")",
		"maxPods (by " + filepath.Join(dir, "zz", "nested.conf") + ")",
	} {
		if !strings.Contains(warned[0], want) {
			t.Errorf("warning %s does not name %q", warned[0], want)
		}
	}
	if strings.Contains(warned[0], "imageGCHighThresholdPercent") || strings.Contains(warned[0], "10-early.conf") {
		t.Errorf("warning names a field that takes effect, or a file sorting before dynconfig's: %s", warned[0])
	}

	// No later file: no warning.
	lines = nil
	m := newNode(t, "maxPods: 10\n", map[string]string{"10-early.conf": "maxPods: 20\n"})
	l2, err := NewLayers(m.files, log)
	if err != nil {
		t.Fatal(err)
	}
	plain := &dynconfig.Document{Name: candidate.Name, Data: []byte(head + "maxPods: 50\n")}
	if _, err := l2.Build(plain); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if strings.Contains(l, "sort after dynconfig's file") {
			t.Errorf("a warning without a later drop-in: %s", l)
		}
	}
}
