package main

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkInspect measures inspect on a state dir holding the fixture plus
// n more checkpoints: take the shared lock, read and verify the whole state
// dir with checkpoint.Inspect (pointers, every checkpoint, the tracking
// files), judge trials and dead ends, render.
func BenchmarkInspect(b *testing.B) {
	for _, n := range []int{0, 50} {
		for _, output := range []string{"text", "json"} {
			b.Run(fmt.Sprintf("checkpoints=%d/%s", n+3, output), func(b *testing.B) {
				f := newFixture(b)
				s := openStore(b, f.dir, f.currentVersion, f.clock)
				for i := range n {
					cm := newConfigMap("kube-system", fmt.Sprintf("cm-%d", i), fmt.Sprintf("uid-x%d", i), "1",
						map[string]string{"kubelet": "kind: KubeletConfiguration\nmaxPods: 110\n"})
					if _, err := s.Save(cm); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				d := testDeps(b, f.clock)
				opts := inspectOptions{dir: f.dir, output: output}
				b.ReportAllocs()
				for b.Loop() {
					if err := runInspect(io.Discard, opts, d); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
