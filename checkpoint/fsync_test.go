package checkpoint_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// counted returns the fsync counter of s (checkpoint.CountSyncs: every
// fsync of the package goes through atomicfile, which counts them).
func counted(s *checkpoint.Store) *atomic.Int64 {
	n := new(atomic.Int64)
	checkpoint.CountSyncs(s, n)
	return n
}

// fsyncs returns the fsyncs op made on the store counted by n.
func fsyncs(t testing.TB, n *atomic.Int64, op func() error) int64 {
	t.Helper()
	before := n.Load()
	if err := op(); err != nil {
		t.Fatal(err)
	}
	return n.Load() - before
}

// TestFsyncCounts pins the durability cost of each write: two fsyncs (the
// file and its directory) per durable write, whatever the UID (checkpoints
// are files in one directory, checkpoints/<uid>_<resourceVersion>), so
// adopting a new config costs four. Garbage collection syncs the directory
// once per batch, not once per removed file.
func TestFsyncCounts(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	n := counted(s)
	for _, tc := range []struct {
		name string
		op   func() error
		want int64
	}{
		{"save of a new UID", func() error { _, err := s.Save(newConfigMap("uid-a", "1")); return err }, 2},
		{"save of a known UID", func() error { _, err := s.Save(newConfigMap("uid-a", "2")); return err }, 2},
		// Save always writes; the Controller checks Exists first.
		{"save of a checkpoint on disk", func() error { _, err := s.Save(newConfigMap("uid-a", "2")); return err }, 2},
		{"set current", func() error { return s.SetCurrent(sourceFor(newConfigMap("uid-a", "2"))) }, 2},
		{"record the first run", func() error { _, err := s.RecordFirstRun(); return err }, 2},
		{"set last-known-good", func() error { return s.SetLastKnownGood(sourceFor(newConfigMap("uid-a", "2"))) }, 2},
		{"record a startup", func() error { _, err := s.RecordStartup(); return err }, 2},
		{"mark bad", func() error {
			return s.MarkBad(sourceFor(newConfigMap("uid-a", "2")), checkpoint.BadMark{Reason: "r", Problem: "p"})
		}, 2},
		{"read everything", func() error {
			if _, err := s.Current(); err != nil {
				return err
			}
			if _, err := s.BadMarks(); err != nil {
				return err
			}
			_, err := s.Load(checkpoint.Key{UID: "uid-a", ResourceVersion: "2"})
			return err
		}, 0},
	} {
		if got := fsyncs(t, n, tc.op); got != tc.want {
			t.Errorf("%s: %d fsyncs, want %d", tc.name, got, tc.want)
		}
	}
	// 50 stale checkpoints of one UID and one of another: GC syncs
	// checkpoints/ once.
	for i := range 50 {
		mustSave(t, s, newConfigMap("uid-a", fmt.Sprint(100+i)))
	}
	mustSave(t, s, newConfigMap(types.UID("uid-gone"), "1"))
	if got := fsyncs(t, n, func() error { _, err := s.GC(); return err }); got != 1 {
		t.Errorf("GC of 51 checkpoints: %d fsyncs, want 1 (checkpoints/)", got)
	}
	// The nested layout of older versions: a batch syncs each UID directory
	// that keeps a checkpoint, and checkpoints/ once for the ones removed.
	for _, rv := range []string{"7", "8"} {
		mustSave(t, s, newConfigMap("uid-old", rv))
		toNested(t, s.Dir(), "uid-old", rv)
	}
	mustSave(t, s, newConfigMap("uid-older", "1"))
	toNested(t, s.Dir(), "uid-older", "1")
	if got := fsyncs(t, n, func() error { _, err := s.GC(); return err }); got != 1 {
		t.Errorf("GC of 2 nested UID directories: %d fsyncs, want 1 (checkpoints/)", got)
	}
}

// BenchmarkAdopt is what adopting a new assignment costs on disk: the
// checkpoint of a ConfigMap with a new UID and the current pointer; it
// reports fsyncs/op.
func BenchmarkAdopt(b *testing.B) {
	benchmarkAdopt(b, func(i int) types.UID { return types.UID(fmt.Sprintf("uid-%d", i)) })
}

// BenchmarkAdoptSameUID adopts a new resourceVersion of one ConfigMap.
func BenchmarkAdoptSameUID(b *testing.B) {
	benchmarkAdopt(b, func(int) types.UID { return "uid-a" })
}

func benchmarkAdopt(b *testing.B, uid func(i int) types.UID) {
	s, _ := openStore(b, b.TempDir())
	n := counted(s)
	b.ReportAllocs()
	before := n.Load()
	i := 0
	for b.Loop() {
		cm := benchConfigMap(uid(i), fmt.Sprint(i))
		if _, err := s.Save(cm); err != nil {
			b.Fatal(err)
		}
		if err := s.SetCurrent(sourceFor(cm)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(n.Load()-before)/float64(b.N), "fsyncs/op")
}
