package merge

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// smallDefaults defaults two fields, to see "defaults" in provenance.
type smallDefaults struct{}

func (smallDefaults) GroupVersionKind() schema.GroupVersionKind { return kubeletGVK }
func (smallDefaults) Validate(*kubeletConfig) field.ErrorList   { return nil }
func (smallDefaults) Default(c *kubeletConfig) {
	if c.Port == 0 {
		c.Port = 10250
	}
	if c.EvictionHard == nil {
		c.EvictionHard = map[string]string{"memory.available": "100Mi"}
	}
	if c.SystemReserved == nil {
		c.SystemReserved = map[string]string{}
	}
	if c.FeatureGates != nil {
		c.FeatureGates["FromDefaults"] = true
	}
}

func TestProvenance(t *testing.T) {
	base := kubeletHeader + `
port: 1
featureGates: {A: true}
clusterDNS: [10.0.0.1]
authentication:
  webhook:
    enabled: true
memorySwap: {}
`
	dropIn := kubeletHeader + "featureGates: {B: true}\nport: null\n"
	instance := kubeletHeader + "featureGates: {A: false}\nevictionSoft:\n  $patch: replace\n  memory.available: 1Gi\n"
	tests := []struct {
		name    string
		profile Profile[kubeletConfig]
		layers  Layers
		want    map[string]string
	}{
		{
			name:    "base only",
			profile: nopKubelet(),
			layers:  Layers{Base: doc("base.yaml", base)},
			want: map[string]string{
				"apiVersion":                     "base.yaml",
				"kind":                           "base.yaml",
				"port":                           "base.yaml",
				"featureGates[A]":                "base.yaml",
				"clusterDNS":                     "base.yaml",
				"authentication.webhook.enabled": "base.yaml",
				"memorySwap":                     "base.yaml",
			},
		},
		{
			name:    "every layer",
			profile: nopKubelet(),
			layers: Layers{
				Base:     doc("base.yaml", base),
				DropIns:  []Document{{Name: "10.conf", Data: []byte(dropIn)}},
				Instance: doc("instance.yaml", instance),
				Flags:    []Override{{Path: "maxPods", Value: 3, Source: "flag --max-pods"}, {Path: "clusterDNS", Value: []string{"10.0.0.2"}}},
			},
			want: map[string]string{
				"apiVersion":                     "instance.yaml",
				"kind":                           "instance.yaml",
				"featureGates[A]":                "instance.yaml",
				"featureGates[B]":                "10.conf",
				"clusterDNS":                     "flags",
				"authentication.webhook.enabled": "base.yaml",
				"memorySwap":                     "base.yaml",
				"evictionSoft[memory.available]": "instance.yaml",
				"maxPods":                        "flag --max-pods",
			},
		},
		{
			name:    "defaults fill what no layer set",
			profile: smallDefaults{},
			layers: Layers{
				Base:    doc("base.yaml", base),
				DropIns: []Document{{Name: "10.conf", Data: []byte(dropIn)}},
			},
			want: map[string]string{
				"apiVersion":                     "10.conf",
				"kind":                           "10.conf",
				"port":                           DefaultsLayer,
				"featureGates[A]":                "base.yaml",
				"featureGates[B]":                "10.conf",
				"featureGates[FromDefaults]":     DefaultsLayer,
				"clusterDNS":                     "base.yaml",
				"authentication.webhook.enabled": "base.yaml",
				"memorySwap":                     "base.yaml",
				"evictionHard[memory.available]": DefaultsLayer,
				"systemReserved":                 DefaultsLayer,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(t, tt.profile, Options{})
			res, err := p.Merge(tt.layers)
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if diff := cmp.Diff(tt.want, res.Provenance); diff != "" {
				t.Errorf("provenance (-want +got):\n%s", diff)
			}
		})
	}
}
