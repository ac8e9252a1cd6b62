package merge

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// TestNullsInReplacedListElements: a list that every merge replaces as a
// whole holds complete values, so a null inside one of its elements means
// "not set" in every layer, as in a complete document. Before, the drop-in
// and instance layers kept it, and the kubelet's map decoding made it an
// entry with the zero value (limits[cpu]: 0): unlike the base layer, unlike
// jsonpatch.MergePatch (the kubelet's drop-in merge, which prunes it) and
// unlike strategicpatch where the base lacks the list.
func TestNullsInReplacedListElements(t *testing.T) {
	const list = "reservedMemory:\n- numaNode: 0\n  limits: {cpu: null, memory: 2Gi}\n"
	want := []kubeletv1beta1.MemoryReservation{{
		NumaNode: 0,
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	for _, base := range []string{"", "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1Gi}\n"} {
		for _, layer := range []string{"base", "drop-in", "instance"} {
			layers := Layers{Base: doc("kubelet.yaml", kubeletHeader+base)}
			switch layer {
			case "base":
				layers.Base = doc("kubelet.yaml", kubeletHeader+list)
			case "drop-in":
				layers.DropIns = []Document{*doc("10.conf", kubeletHeader+list)}
			case "instance":
				layers.Instance = doc("instance.yaml", kubeletHeader+list)
			}
			res, err := p.Merge(layers)
			if err != nil {
				t.Fatalf("%s over base %q: %v", layer, base, err)
			}
			if diff := cmp.Diff(want, res.Object.ReservedMemory); diff != "" {
				t.Errorf("%s over base %q: reservedMemory (-want +got):\n%s", layer, base, diff)
			}
		}

		// The upstream merges the comparison rests on.
		baseJSON, _ := yaml.YAMLToJSON([]byte(kubeletHeader + base))
		patchJSON, _ := yaml.YAMLToJSON([]byte(kubeletHeader + list))
		merged, err := jsonpatch.MergePatch(baseJSON, patchJSON)
		if err != nil {
			t.Fatal(err)
		}
		var fromMergePatch kubeletConfig
		if err := kjson.UnmarshalCaseSensitivePreserveInts(merged, &fromMergePatch); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, fromMergePatch.ReservedMemory); diff != "" {
			t.Errorf("jsonpatch.MergePatch over base %q (-want +got):\n%s", base, diff)
		}
		if base == "" {
			merged, err := strategicpatch.StrategicMergePatch(baseJSON, patchJSON, &kubeletConfig{})
			if err != nil {
				t.Fatal(err)
			}
			var fromStrategic kubeletConfig
			if err := kjson.UnmarshalCaseSensitivePreserveInts(merged, &fromStrategic); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, fromStrategic.ReservedMemory); diff != "" {
				t.Errorf("strategicpatch over an empty base (-want +got):\n%s", diff)
			}
		}
	}
}
