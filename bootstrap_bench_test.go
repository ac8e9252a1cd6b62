package dynconfig

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/crashloop"
	"github.com/dynconfig/dynconfig/lkg"
)

// BenchmarkBootstrapReadPath measures what every startup reads from the
// state dir, with 100 checkpoints on disk: take the lock, read both
// pointers, the bad marks and the startups, and load and verify current's
// checkpoint (a realistic ~4 KiB kubelet payload).
func BenchmarkBootstrapReadPath(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "state")
	opts := checkpoint.Options{Dir: dir, ComponentVersion: "v1.37.0", Logger: klog.Background()}
	s, err := checkpoint.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("  someField: someValue\n", 180)
	var srcs []*corev1.NodeConfigSource
	for i := 0; i < 100; i++ {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: fmt.Sprintf("kubelet-%d", i),
				UID: types.UID(fmt.Sprintf("uid-%03d", i)), ResourceVersion: "1"},
			Data: map[string]string{"kubelet": payload},
		}
		if _, err := s.Save(cm); err != nil {
			b.Fatal(err)
		}
		srcs = append(srcs, &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: "1", KubeletConfigKey: "kubelet"}})
	}
	if err := s.SetCurrent(srcs[42]); err != nil {
		b.Fatal(err)
	}
	if err := s.SetLastKnownGood(srcs[7]); err != nil {
		b.Fatal(err)
	}
	bad, err := lkg.NewTracker(lkg.TrackerOptions{Dir: s.TrackingDir()})
	if err != nil {
		b.Fatal(err)
	}
	for i := 50; i < 60; i++ {
		if err := bad.MarkBad(lkg.Key(srcs[i]), "failed to validate current"); err != nil {
			b.Fatal(err)
		}
	}
	st, err := crashloop.New(crashloop.Options{Dir: s.TrackingDir()})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := st.RecordStartup(3); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s, err := checkpoint.Open(opts)
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
		bad, _ := lkg.NewTracker(lkg.TrackerOptions{Dir: s.TrackingDir()})
		if _, ok, err := bad.Entry(lkg.Key(cur.Source)); err != nil || ok {
			b.Fatal(ok, err)
		}
		st, _ := crashloop.New(crashloop.Options{Dir: s.TrackingDir()})
		startups, err := st.Startups()
		if err != nil || len(startups) != 4 {
			b.Fatal(len(startups), err)
		}
		key, _ := checkpoint.KeyFromSource(cur.Source)
		if _, err := s.Load(key); err != nil {
			b.Fatal(err)
		}
		crashloop.CrashLooping(crashloop.Input{Startups: startups, CurrentSetTime: cur.SetTime, Now: time.Now(), Trial: time.Minute, Threshold: 3})
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
