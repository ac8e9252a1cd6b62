package kubelet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/merge"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// TestDropInMergesIntoTheDefaultedBase: the kubelet defaults its config file
// before it merges the --config-dir drop-ins into it, so a drop-in that sets
// one eviction signal keeps the other default signals.
func TestDropInMergesIntoTheDefaultedBase(t *testing.T) {
	p, err := NewPipeline(merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		base    string
		dropIns []string
		check   func(t *testing.T, c *kubeletv1beta1.KubeletConfiguration)
	}{
		{
			name:    "one eviction signal keeps the default disk signals",
			base:    "maxPods: 50\n",
			dropIns: []string{"evictionHard:\n  memory.available: 200Mi\n"},
			check: func(t *testing.T, c *kubeletv1beta1.KubeletConfiguration) {
				want := DefaultEvictionHard()
				want["memory.available"] = "200Mi"
				if diff := cmp.Diff(want, c.EvictionHard); diff != "" {
					t.Errorf("evictionHard (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "a default decided from the base stays decided",
			base:    "maxPods: 50\n",
			dropIns: []string{"nodeStatusUpdateFrequency: 20s\n"},
			check: func(t *testing.T, c *kubeletv1beta1.KubeletConfiguration) {
				// The base's report frequency defaulted to 5m before the
				// drop-in set the update frequency.
				if got := c.NodeStatusReportFrequency.Duration.String(); got != "5m0s" {
					t.Errorf("nodeStatusReportFrequency = %s, want 5m0s", got)
				}
			},
		},
		{
			name:    "a field a drop-in deletes gets its default again",
			base:    "port: 10260\n",
			dropIns: []string{"port: null\n"},
			check: func(t *testing.T, c *kubeletv1beta1.KubeletConfiguration) {
				if c.Port != DefaultPort {
					t.Errorf("port = %d, want %d", c.Port, DefaultPort)
				}
			},
		},
		{
			name:    "evictionHard deleted by a drop-in is not defaulted again",
			base:    "maxPods: 50\n",
			dropIns: []string{"evictionHard: null\n"},
			check: func(t *testing.T, c *kubeletv1beta1.KubeletConfiguration) {
				if c.EvictionHard != nil {
					t.Errorf("evictionHard = %v, want none (the kubelet applies its eviction defaults to the config file only)", c.EvictionHard)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dropIns []merge.Document
			for i, d := range tc.dropIns {
				dropIns = append(dropIns, merge.Document{Name: "drop-in " + string(rune('a'+i)), Data: []byte(header + d)})
			}
			res, err := p.Merge(merge.Layers{Base: &merge.Document{Name: "kubelet.yaml", Data: []byte(header + tc.base)}, DropIns: dropIns})
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			tc.check(t, res.Object)
		})
	}
}
