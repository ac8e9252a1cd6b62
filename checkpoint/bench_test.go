package checkpoint_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/checkpoint"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// benchConfigMap carries a KubeletConfiguration-sized payload (about 4 KiB).
func benchConfigMap(uid types.UID, rv string) *corev1.ConfigMap {
	cm := newConfigMap(uid, rv)
	cm.Data["kubelet"] = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1",` +
		strings.Repeat(`"evictionHard":{"memory.available":"100Mi","nodefs.available":"10%"},`, 60) + `"maxPods":110}`
	return cm
}

func BenchmarkSave(b *testing.B) {
	s, _ := openStore(b, b.TempDir())
	cms := make([]*corev1.ConfigMap, 100)
	for i := range cms {
		cms[i] = benchConfigMap("uid-a", fmt.Sprint(i))
	}
	b.SetBytes(int64(len(cms[0].Data["kubelet"])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Save(cms[i%len(cms)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkLoad(b *testing.B) {
	s, _ := openStore(b, b.TempDir())
	keys := make([]checkpoint.Key, 100)
	for i := range keys {
		keys[i] = mustSave(b, s, benchConfigMap(types.UID(fmt.Sprintf("uid-%d", i%10)), fmt.Sprint(i)))
	}
	b.SetBytes(int64(len(benchConfigMap("", "").Data["kubelet"])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Load(keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkCurrent(b *testing.B) {
	s, _ := openStore(b, b.TempDir())
	cm := benchConfigMap("uid-a", "1")
	mustSave(b, s, cm)
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p, err := s.Current(); err != nil || p.Source == nil {
			b.Fatal(p, err)
		}
	}
}

// BenchmarkSetCurrent is also what the fsync count per durable write is
// measured with:
//
//	go test -c -o /tmp/checkpoint.test ./checkpoint
//	strace -f -c -e trace=fsync,fdatasync /tmp/checkpoint.test -test.run '^$' -test.bench BenchmarkSetCurrent -test.benchtime 100x
//
// and again with 200x: the difference divided by 100 is fsyncs per write.
func BenchmarkSetCurrent(b *testing.B) {
	s, _ := openStore(b, b.TempDir())
	cm := benchConfigMap("uid-a", "1")
	mustSave(b, s, cm)
	src := sourceFor(cm)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.SetCurrent(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordStartup measures the startup record every Bootstrap makes:
// read, verify, append, and one durable write (two fsyncs) of a full file.
func BenchmarkRecordStartup(b *testing.B) {
	s, clk := openStore(b, b.TempDir())
	defer s.Close()
	for range checkpoint.MaxStartups {
		clk.Step(time.Second)
		if _, err := s.RecordStartup(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		clk.Step(time.Second)
		if _, err := s.RecordStartup(); err != nil {
			b.Fatal(err)
		}
	}
}
