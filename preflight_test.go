package dynconfig

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

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/source/sourcetest"
)

// TestMergeLayersPreflight: NewLayers' Preflight names the candidate's
// fields that a drop-in or the instance file sets again, with the file
// that wins; a field no later layer touches is not named; the candidate is
// decoded and validated as Build does it.
func TestMergeLayersPreflight(t *testing.T) {
	dir := t.TempDir()
	dropIns := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(dropIns, 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := filepath.Join(dropIns, "10-node.conf")
	instance := filepath.Join(dir, "instance.yaml")
	for path, data := range map[string]string{
		dropIn:   "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nvalue: 7\n",
		instance: "apiVersion: test.dynconfig.io/v1\nkind: TestConfig\nname: node-a\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := merge.New[testConfig](testProfile{}, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLayers(p, LocalConfig{DropInDir: dropIns, InstanceFile: instance})
	if err != nil {
		t.Fatal(err)
	}
	pl := l.(PreflightLayers)
	doc := func(body string) *Document {
		return &Document{Name: "configmap ns/c key config", Data: []byte("apiVersion: test.dynconfig.io/v1\nkind: TestConfig\n" + body)}
	}
	got, err := pl.Preflight(doc("value: 1\nname: x\n"))
	want := []string{"name (by " + instance + ")", "value (by " + dropIn + ")"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Preflight = %q, %v; want %q", got, err, want)
	}
	// Nothing later sets what it sets: nothing overridden.
	l2, _ := NewLayers(p, LocalConfig{InstanceFile: instance})
	if got, err := l2.(PreflightLayers).Preflight(doc("value: 1\n")); err != nil || len(got) != 0 {
		t.Fatalf("Preflight without a later layer = %q, %v", got, err)
	}
	// As strict as Build: an unknown field, an invalid value.
	if _, err := pl.Preflight(doc("valeu: 1\n")); err == nil || !strings.Contains(err.Error(), "valeu") {
		t.Errorf("an unknown field: %v", err)
	}
	if _, err := l2.(PreflightLayers).Preflight(doc("value: -1\n")); err == nil || !strings.Contains(err.Error(), "value") {
		t.Errorf("an invalid value: %v", err)
	}
	// A field the platform locks: refused, naming the field and its owner.
	locked, err := merge.New[testConfig](testProfile{}, merge.Options{Policy: merge.Policy{Owner: "acme-platform", Locked: []string{"name"}}})
	if err != nil {
		t.Fatal(err)
	}
	l3, _ := NewLayers(locked, LocalConfig{})
	if _, err := l3.(PreflightLayers).Preflight(doc("value: 1\nname: mine\n")); err == nil || !strings.Contains(err.Error(), "name") || !strings.Contains(err.Error(), "acme-platform") {
		t.Errorf("a locked field: %v, want an error naming name and acme-platform", err)
	}
}

// preflightRemote is a Remote that carries a pre-flight request.
type preflightRemote struct {
	source.Remote
	req *nodeapi.PreflightRequest
	a   source.Assignment
	err error
}

func (r *preflightRemote) Preflight(context.Context) (*nodeapi.PreflightRequest, source.Assignment, error) {
	return r.req, r.a, r.err
}

// overridingLayers are testLayers that say a later layer overrides
// fields.
type overridingLayers struct {
	testLayers
	fields []string
}

func (l overridingLayers) Preflight(candidate *Document) ([]string, error) {
	if _, err := l.Build(candidate); err != nil {
		return nil, err
	}
	return l.fields, nil
}

// TestPreflightAnswer: the node answers the request in its ConfigStatus,
// and applies nothing: current stays, nothing is checkpointed, nothing
// restarts. Each answer: Pass, Overridden (the layers' fields), Fail (an
// invalid candidate, a candidate the source refuses, a bad mark, a state
// dir it cannot write); a failure to read the request keeps the last
// answer, and no request clears it.
func TestPreflightAnswer(t *testing.T) {
	n := newNode(t, "")
	n.configMap("a", "uid-a", goodValue1, nil)
	n.assign("a", "uid-a")
	cand := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "b", UID: "uid-b", ResourceVersion: "5", KubeletConfigKey: "config"}}
	cm := func(payload string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "b", UID: "uid-b", ResourceVersion: "5"}, Data: map[string]string{"config": payload}}
	}
	req := &nodeapi.PreflightRequest{Namespace: "ops", Name: "ro", UID: "ro-uid", Candidate: cand}
	var remote *preflightRemote
	layers := &overridingLayers{}
	c := n.controller(func(o *Options[testConfig]) {
		remote = &preflightRemote{Remote: o.Remote}
		o.Remote = remote
		o.Layers = layers
	})
	ctx := n.ctx()
	if _, err := c.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	answer := func() *nodeapi.PreflightResult {
		t.Helper()
		if err := c.sync(ctx); err != nil {
			t.Fatal(err)
		}
		s := n.reporter.lastConfig()
		if s == nil {
			t.Fatal("nothing published")
		}
		return s.Preflight
	}
	for _, tc := range []struct {
		name    string
		setup   func()
		verdict nodeapi.PreflightVerdict
		want    string
	}{
		{"pass", func() { remote.req, remote.a = req, source.Assignment{Source: cand, ConfigMap: cm(goodValue2)} }, nodeapi.PreflightPass, ""},
		{"overridden", func() { layers.fields = []string{"value (by /etc/x/zz.conf)"} }, nodeapi.PreflightOverridden, "value (by /etc/x/zz.conf)"},
		{"invalid", func() { remote.a.ConfigMap = cm(`{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`) }, nodeapi.PreflightFail, "must be non-negative"},
		{"refused by the source", func() { remote.err = nodeapi.Invalid("ConfigMap kube-system/b does not exist") }, nodeapi.PreflightFail, "does not exist"},
		{"unreadable: the last answer stands", func() { remote.err = errors.New("the API server did not answer") }, nodeapi.PreflightFail, "does not exist"},
		{"marked bad here", func() {
			remote.err, layers.fields = nil, nil
			remote.a.ConfigMap = cm(goodValue2)
			if err := c.store.MarkBad(cand, checkpoint.BadMark{Time: time.Now(), Reason: "crash loop", Problem: "CrashLoop"}); err != nil {
				t.Fatal(err)
			}
		}, nodeapi.PreflightFail, "marked bad on this node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			got := answer()
			if got == nil || got.Verdict != tc.verdict || !got.Answers(cand) || !strings.Contains(got.Message+strings.Join(got.Fields, ","), tc.want) {
				t.Fatalf("answer %+v, want %s with %q", got, tc.verdict, tc.want)
			}
		})
	}
	remote.req = nil
	if got := answer(); got != nil {
		t.Fatalf("no request, answer %+v", got)
	}
	if cur, _ := c.store.Current(); uidOfSource(cur.Source) != "uid-a" {
		t.Errorf("current is %s after the checks, want uid-a", uidOfSource(cur.Source))
	}
	if key, _ := checkpoint.KeyFromSource(cand); true {
		if _, err := c.store.Load(key); err == nil {
			t.Errorf("the candidate was checkpointed")
		}
	}
	if n.restarts.Load() != 0 {
		t.Errorf("%d restarts for a pre-flight check", n.restarts.Load())
	}
}

// TestPreflightReadOnlyStateDir: a state dir this process cannot write
// fails the check (a new config is checkpointed there first).
func TestPreflightReadOnlyStateDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// access(2) lets root write a read-only mode; only a read-only
		// mount stops it. stateDirWritable is checked on a dir without
		// write permission as a user, here on a missing one.
		if err := stateDirWritable(filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Fatal("a missing state dir counts as writable")
		}
		return
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if err := stateDirWritable(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a read-only state dir: %v", err)
	}
}

// TestPreflightFollowRole: the run role of an external component (the
// stock kubelet's) answers within its sync step, with the state dir taken
// for the step: a bad mark this node holds for the candidate is seen; the
// dir is released after; nothing is restarted.
func TestPreflightFollowRole(t *testing.T) {
	dir := t.TempDir()
	cand := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "b", UID: "uid-b", ResourceVersion: "5", KubeletConfigKey: "config"}}
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkBad(cand, checkpoint.BadMark{Time: time.Now(), Reason: "crash loop", Problem: "CrashLoop"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	reporter := &recordingReporter{}
	remote := &preflightRemote{Remote: sourcetest.NewFake("config"),
		req: &nodeapi.PreflightRequest{Namespace: "ops", Name: "ro", UID: "ro-uid", Candidate: cand},
		a: source.Assignment{Source: cand, ConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "b", UID: "uid-b", ResourceVersion: "5"},
			Data: map[string]string{"config": goodValue2}}}}
	c, err := New(Options[testConfig]{
		Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1", Remote: remote, Reporter: reporter,
		External: &External{Role: Follow, Restarter: RestarterFunc(func(context.Context) error {
			t.Error("a pre-flight check restarted the component")
			return nil
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.syncLocked(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := reporter.lastConfig().Preflight
	if got == nil || got.Verdict != nodeapi.PreflightFail || !strings.Contains(got.Message, "marked bad on this node") {
		t.Fatalf("answer %+v, want Fail: marked bad on this node", got)
	}
	again, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1"})
	if err != nil {
		t.Fatalf("the run role kept the state dir after its step: %v", err)
	}
	again.Close()
}
