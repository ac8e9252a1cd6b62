package plan

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// BenchmarkPlan1000 plans a rollout over 1000 nodes in the middle of its
// 50% step (500 claimed, 100 in trial): the work of one reconcile, without
// and with a Memo kept across plans (as the controller keeps one).
func BenchmarkPlan1000(b *testing.B) {
	for _, memo := range []bool{false, true} {
		b.Run(map[bool]string{false: "decode", true: "memo"}[memo], func(b *testing.B) { benchPlan(b, memo) })
	}
}

func benchPlan(b *testing.B, memo bool) {
	w := newWorld(b, 1000, countStep(1), percentStep("10%"), percentStep("50%"), percentStep("100%"), percentStep("100%"))
	w.r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(100))
	for range 100 {
		w.plan()
		if w.r.Status.Phase != v1alpha1.PhaseProgressing {
			b.Fatalf("phase %s", w.r.Status.Phase)
		}
		if w.r.Status.Assigned >= 500 {
			break
		}
		w.promoteAll()
	}
	if w.r.Status.Assigned != 500 || w.r.Status.InTrial != 100 {
		b.Fatalf("set-up: %d assigned, %d in trial", w.r.Status.Assigned, w.r.Status.InTrial)
	}
	in := w.input()
	if memo {
		in.Memo = &Memo{}
	}
	b.ReportAllocs()
	for b.Loop() {
		res := Plan(in)
		if res.Status.Selected != 1000 {
			b.Fatalf("selected %d", res.Status.Selected)
		}
	}
}
