package kubeletdropin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/status"
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
	if strings.Contains(warned[0], "imageGCHighThresholdPercent") || strings.Contains(warned[0], "10-early.conf") ||
		strings.Contains(warned[0], "apiVersion") || strings.Contains(warned[0], "kind") {
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

// TestOverriddenEvents: the run role's hook records each new set of
// overridden fields as one Warning ConfigOverridden Event on the Node, and
// a repeat of the same set (Build runs on every sync) records nothing.
func TestOverriddenEvents(t *testing.T) {
	client := fake.NewClientset()
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: client, NodeName: "node-a", Component: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	hook := overriddenEvents(context.Background(), events)
	hook("configmap ns/c key kubelet", []string{"maxPods (by /etc/kubernetes/kubelet.conf.d/zz.conf)"})
	hook("configmap ns/c key kubelet", []string{"maxPods (by /etc/kubernetes/kubelet.conf.d/zz.conf)"})
	var many []string
	for i := 0; i < 12; i++ {
		many = append(many, fmt.Sprintf("featureGates[G%02d] (by zz.conf)", i))
	}
	hook("configmap ns/c key kubelet", many)
	list, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d Events, want 2 (the repeat records nothing): %+v", len(list.Items), list.Items)
	}
	for _, ev := range list.Items {
		if ev.Type != corev1.EventTypeWarning || ev.Reason != status.EventReasonConfigOverridden || ev.InvolvedObject.Name != "node-a" || ev.Count != 1 {
			t.Errorf("event %s %s about %s, count %d", ev.Type, ev.Reason, ev.InvolvedObject.Name, ev.Count)
		}
		if strings.Contains(ev.Message, "G10") || (strings.Contains(ev.Message, "G09") && !strings.Contains(ev.Message, "and 2 more")) {
			t.Errorf("message %q: want at most 10 fields named, then how many more", ev.Message)
		}
	}
}

// The layers call the hook with what they log.
func TestOverriddenHookIsCalled(t *testing.T) {
	n := newNode(t, "maxPods: 10\n", map[string]string{"zz.conf": "maxPods: 70\n"})
	l, err := NewLayers(n.files, funcr.New(func(string, string) {}, funcr.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	l.(*layers).overriddenHook = func(config string, fields []string) { got = append(got, config+": "+strings.Join(fields, ", ")) }
	if _, err := l.Build(&dynconfig.Document{Name: "cm", Data: []byte(head + "maxPods: 50\n")}); err != nil {
		t.Fatal(err)
	}
	if want := "cm: maxPods (by " + filepath.Join(n.files.ConfigDir, "zz.conf") + ")"; len(got) != 1 || got[0] != want {
		t.Fatalf("hook saw %q, want [%q]", got, want)
	}
}
