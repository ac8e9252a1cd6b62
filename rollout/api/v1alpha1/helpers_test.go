package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestStepTarget(t *testing.T) {
	for _, tc := range []struct {
		step     intstr.IntOrString
		selected int
		want     int
	}{
		{intstr.FromInt32(1), 100, 1},
		{intstr.FromInt32(5), 3, 3}, // capped at the selected count
		{intstr.FromString("10%"), 100, 10},
		{intstr.FromString("10%"), 15, 2}, // 1.5 rounds up
		{intstr.FromString("1%"), 15, 1},  // a step always moves
		{intstr.FromString("50%"), 7, 4},
		{intstr.FromString("100%"), 7, 7},
		{intstr.FromString("10%"), 0, 0},
	} {
		t.Run(tc.step.String()+"/"+string(rune('0'+tc.selected%10)), func(t *testing.T) {
			got, err := StepTarget(&tc.step, tc.selected)
			if err != nil || got != tc.want {
				t.Errorf("StepTarget(%s, %d) = %d, %v; want %d", tc.step.String(), tc.selected, got, err, tc.want)
			}
		})
	}
}
