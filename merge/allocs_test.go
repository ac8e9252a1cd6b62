package merge_test

import (
	"testing"
)

// pipelineAllocBudget is the most heap allocations one Merge of the
// benchmark's layers (testdata/bench: a shared file, three drop-ins, an
// instance file, three flags; the real components/kubelet profile with its
// defaulting and validation) may make. TestPipelineAllocations fails CI
// when a change makes more: the count is exact (testing.AllocsPerRun), not
// a timing, so it does not depend on the machine or its load.
//
// At the time of writing a merge makes 383 allocations (issue 22: 4,188
// before, 1,864 once); the budget leaves about 5% for small changes.
// To change it: run
//
//	go test ./merge/ -run TestPipelineAllocations -v
//
// which logs the count, find out why it grew (go test ./merge/ -run '^$'
// -bench PipelineKubeletProfile -memprofile mem.out -memprofilerate 1, then
// go tool pprof -sample_index=alloc_objects), and raise the budget here
// only for growth that pays for something, saying what in the commit.
// Lower it when a change saves allocations, so that they stay saved.
const pipelineAllocBudget = 400

func TestPipelineAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	layers := benchKubeletLayers(t)
	p := newKubeletPipeline(t)
	checkSameAsUpstream(t, layers, p)
	var mergeErr error
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := p.Merge(layers); err != nil {
			mergeErr = err
		}
	})
	if mergeErr != nil {
		t.Fatal(mergeErr)
	}
	t.Logf("%.0f allocations per merge (budget %d)", allocs, pipelineAllocBudget)
	if allocs > pipelineAllocBudget {
		t.Errorf("Merge of testdata/bench makes %.0f allocations, more than the budget of %d: see pipelineAllocBudget in %s for what to do",
			allocs, pipelineAllocBudget, "merge/allocs_test.go")
	}
}
