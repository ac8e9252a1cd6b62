package dynconfig

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/source/sourcetest"
	"github.com/dynconfig/dynconfig/status"
)

// benchStateDir lays out a state dir as a node has it after a while:
// checkpoints (current, last-known-good and stale ones), bad marks and
// startups. It returns the current assignment.
func benchStateDir(b *testing.B, dir string, stale, marks int) source.Assignment {
	b.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.0", Logger: klog.Background().V(10)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := `{"apiVersion":"test.dynconfig.io/v1","kind":"TestConfig","value":1,"name":"` + strings.Repeat("x", 4000) + `"}`
	var srcs []*corev1.NodeConfigSource
	var cms []*corev1.ConfigMap
	for i := 0; i < stale+2; i++ {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: fmt.Sprintf("c-%d", i),
				UID: types.UID(fmt.Sprintf("uid-%04d", i)), ResourceVersion: "1"},
			Data: map[string]string{"config": payload},
		}
		if _, err := s.Save(cm); err != nil {
			b.Fatal(err)
		}
		cms = append(cms, cm)
		srcs = append(srcs, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: "1", KubeletConfigKey: "config"}})
	}
	if err := s.SetCurrent(srcs[0]); err != nil {
		b.Fatal(err)
	}
	if err := s.SetLastKnownGood(srcs[1]); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < marks; i++ {
		src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			UID: types.UID(fmt.Sprintf("bad-%04d", i)), ResourceVersion: "1", KubeletConfigKey: "config"}}
		if err := s.MarkBad(src, checkpoint.BadMark{Reason: "failed to validate current", Problem: "ValidateFailed"}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		if _, err := s.RecordStartup(); err != nil {
			b.Fatal(err)
		}
	}
	return source.Assignment{Source: srcs[0], ConfigMap: cms[0]}
}

// BenchmarkBootstrapReadPath measures what every startup reads from the
// state dir, through the store the Controller uses: take the lock (and
// check the layout), read both pointers, the bad marks and the startups,
// and load and verify current's checkpoint (~4 KiB payload). The startup
// record, a durable write, is measured by checkpoint's
// BenchmarkRecordStartup; BenchmarkBootstrap has both.
func BenchmarkBootstrapReadPath(b *testing.B) { benchmarkBootstrapReadPath(b, 10) }

// BenchmarkBootstrapReadPathFullBadConfigList is the read path of a start
// with a full list of bad marks (checkpoint.MaxUnreferencedBadMarks), where
// decoding the marks file once cost more than the rest of the read path.
func BenchmarkBootstrapReadPathFullBadConfigList(b *testing.B) {
	benchmarkBootstrapReadPath(b, checkpoint.MaxUnreferencedBadMarks)
}

// BenchmarkBootstrapReadPathNoBadMarks: the same without a marks file.
func BenchmarkBootstrapReadPathNoBadMarks(b *testing.B) { benchmarkBootstrapReadPath(b, 0) }

func benchmarkBootstrapReadPath(b *testing.B, marks int) {
	dir := filepath.Join(b.TempDir(), "state")
	benchStateDir(b, dir, 100, marks) // the read path does not depend on the assignment
	opts := checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.0", Logger: klog.Background().V(10)}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		s, err := checkpoint.Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		startups, err := s.Startups()
		if err != nil {
			b.Fatal(err)
		}
		cur, err := s.Current()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.LastKnownGood(); err != nil {
			b.Fatal(err)
		}
		marks, err := s.BadMarks()
		if err != nil {
			b.Fatal(err)
		}
		if _, _, ok := marks.Lookup(cur.Source); ok {
			b.Fatal("current is marked")
		}
		key, _ := checkpoint.KeyFromSource(cur.Source)
		if _, err := s.Load(key); err != nil {
			b.Fatal(err)
		}
		crashloop.CrashLooping(crashloop.Input{Startups: startups, Since: cur.FirstRun, Now: time.Now(), Trial: time.Minute, Threshold: 3})
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// nopReporter accepts every report.
type nopReporter struct{}

func (nopReporter) ReportConfigOK(context.Context, status.Report) error { return nil }

// benchmarkBootstrap measures the whole Bootstrap of a Controller whose
// source assigns current from memory: what a user pays per start (lock,
// layout check, local config, startup record, pointers, marks, one
// checkpoint load and verify, decode, decision, report).
func benchmarkBootstrap(b *testing.B, stale, marks int) {
	dir := filepath.Join(b.TempDir(), "state")
	a := benchStateDir(b, dir, stale, marks)
	remote := sourcetest.NewFake("config") // assigns current from memory
	remote.PutConfigMap(a.ConfigMap)
	remote.Assign(a.Source)
	clk := clocktesting.NewFakeClock(time.Now())
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		clk.Step(time.Hour) // outside any trial window: no crash loop
		c, err := New(Options[testConfig]{
			Profile: testProfile{}, Layers: testLayers{}, StateDir: dir, ComponentVersion: "v1.37.0",
			Remote: remote, Reporter: nopReporter{}, Clock: clk,
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx := klog.NewContext(context.Background(), klog.Background().V(10))
		if _, err := c.Bootstrap(ctx); err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBootstrap(b *testing.B)                     { benchmarkBootstrap(b, 0, 0) }
func BenchmarkBootstrap1000StaleCheckpoints(b *testing.B) { benchmarkBootstrap(b, 1000, 0) }
func BenchmarkBootstrapFullBadConfigList(b *testing.B)    { benchmarkBootstrap(b, 0, 100) }
