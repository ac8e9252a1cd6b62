package kubeletfork

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/merge"
)

// defaulted returns an empty config defaulted by the profile, with the
// cgroup v1 refusal turned off so the result does not depend on the host
// running the test.
func defaulted() *kubeletv1beta1.KubeletConfiguration {
	kc := &kubeletv1beta1.KubeletConfiguration{FailCgroupV1: ptr.To(false)}
	Profile{}.Default(kc)
	return kc
}

func TestDefaultIsTheKubelets(t *testing.T) {
	kc := defaulted()
	if kc.MaxPods != 110 || kc.Port != 10250 || kc.NodeStatusUpdateFrequency.Duration.String() != "10s" {
		t.Errorf("defaults: maxPods %d port %d nodeStatusUpdateFrequency %v; want the kubelet's 110, 10250, 10s",
			kc.MaxPods, kc.Port, kc.NodeStatusUpdateFrequency.Duration)
	}
	if len(kc.EvictionHard) != len(eviction.DefaultEvictionHard) {
		t.Errorf("evictionHard %v, want the kubelet's defaults %v", kc.EvictionHard, eviction.DefaultEvictionHard)
	}

	// An evictionHard of one signal stays one signal, unless
	// mergeDefaultEvictionSettings asks for the defaults under it.
	one := &kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Gi"}}
	Profile{}.Default(one)
	if len(one.EvictionHard) != 1 {
		t.Errorf("evictionHard with one signal became %v", one.EvictionHard)
	}
	merged := &kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Gi"},
		MergeDefaultEvictionSettings: ptr.To(true)}
	Profile{}.Default(merged)
	if merged.EvictionHard["memory.available"] != "1Gi" || len(merged.EvictionHard) != len(eviction.DefaultEvictionHard) {
		t.Errorf("evictionHard with mergeDefaultEvictionSettings: %v", merged.EvictionHard)
	}
}

func TestValidateIsTheKubelets(t *testing.T) {
	if errs := (Profile{}).Validate(defaulted()); len(errs) != 0 {
		t.Fatalf("the defaults are invalid: %v", errs)
	}
	bad := defaulted()
	bad.ImageGCHighThresholdPercent, bad.ImageGCLowThresholdPercent = ptr.To[int32](60), ptr.To[int32](70)
	errs := Profile{}.Validate(bad)
	if len(errs) != 1 || errs[0].Field != "imageGCLowThresholdPercent" ||
		!strings.Contains(errs[0].Detail, "imageGCLowThresholdPercent (--image-gc-low-threshold) 70 must be less than imageGCHighThresholdPercent") {
		t.Errorf("low threshold above high: errors %v, want the kubelet's one", errs)
	}
	gates := defaulted()
	gates.FeatureGates = map[string]bool{"NoSuchGate": true}
	if errs := (Profile{}).Validate(gates); len(errs) != 1 || errs[0].Field != "kubelet" || !strings.Contains(errs[0].Detail, "NoSuchGate") {
		t.Errorf("an unknown feature gate: errors %v, want the kubelet's refusal naming it", errs)
	}
}

func TestToInternal(t *testing.T) {
	kc := defaulted()
	kc.MaxPods = 150
	got, err := ToInternal(kc)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxPods != 150 || got.Port != 10250 || got.FailCgroupV1 {
		t.Errorf("internal config: maxPods %d port %d failCgroupV1 %t", got.MaxPods, got.Port, got.FailCgroupV1)
	}
	if kc.MaxPods != 150 {
		t.Errorf("ToInternal modified its input")
	}
}

// TestDropInMerge merges a drop-in over a base without evictionHard, as the
// kubelet's --config-dir does: the base is defaulted first, so a drop-in
// that sets one signal keeps the default ones, and the merge is defaulted
// again with the v1beta1 defaults alone, so a drop-in's null leaves no hard
// eviction thresholds (Default would bring the defaults back).
func TestDropInMerge(t *testing.T) {
	p, err := merge.New[kubeletv1beta1.KubeletConfiguration](Profile{}, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	oneSignal := map[string]string{}
	for k, v := range eviction.DefaultEvictionHard {
		oneSignal[k] = v
	}
	oneSignal["memory.available"] = "1Gi"
	for _, tc := range []struct {
		name, dropIn string
		want         map[string]string
	}{
		{"one signal", "evictionHard:\n  memory.available: 1Gi\n", oneSignal},
		{"null", "evictionHard: null\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Merge(merge.Layers{
				Base:    &merge.Document{Name: "base", Data: []byte(header + "failCgroupV1: false\n")},
				DropIns: []merge.Document{{Name: "10-eviction.conf", Data: []byte(header + tc.dropIn)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res.Object.EvictionHard, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("evictionHard after the drop-in (-want +got):\n%s", diff)
			}
		})
	}
}
