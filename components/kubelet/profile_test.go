package kubelet

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/components"
)

func TestProfileIdentity(t *testing.T) {
	var p Profile
	want := schema.GroupVersionKind{Group: "kubelet.config.k8s.io", Version: "v1beta1", Kind: "KubeletConfiguration"}
	if diff := cmp.Diff(want, p.GroupVersionKind()); diff != "" {
		t.Errorf("GroupVersionKind (-want +got):\n%s", diff)
	}
	if got := p.PayloadKey(); got != "kubelet" {
		t.Errorf("PayloadKey() = %q, want %q", got, "kubelet")
	}
}

func TestProfileDelegates(t *testing.T) {
	var p Profile
	viaProfile, direct := &kubeletv1beta1.KubeletConfiguration{}, &kubeletv1beta1.KubeletConfiguration{}
	p.Default(viaProfile)
	Default(direct)
	if diff := cmp.Diff(direct, viaProfile, quantityCmp); diff != "" {
		t.Errorf("Profile.Default differs from Default (-direct +profile):\n%s", diff)
	}
	viaProfile.MaxPods = -1
	if diff := cmp.Diff([]fieldErr{invalid("maxPods")}, project(p.Validate(viaProfile))); diff != "" {
		t.Errorf("Profile.Validate (-want +got):\n%s", diff)
	}
}

func TestProfileTrial(t *testing.T) {
	var p Profile
	tests := []struct {
		name    string
		ann     map[string]string
		want    components.Trial
		wantErr bool
	}{
		{name: "no annotations", ann: nil, want: components.DefaultTrial()},
		{name: "annotations", ann: map[string]string{
			components.TrialDurationAnnotation: "2m", components.CrashLoopThresholdAnnotation: "1",
		}, want: components.Trial{Duration: 2 * time.Minute, CrashLoopThreshold: 1}},
		{name: "bad threshold", ann: map[string]string{components.CrashLoopThresholdAnnotation: "12"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Trial(tc.ann)
			if tc.wantErr {
				var ae *components.AnnotationError
				if !errors.As(err, &ae) || ae.Annotation != components.CrashLoopThresholdAnnotation {
					t.Fatalf("Trial() error = %v, want an AnnotationError for %s", err, components.CrashLoopThresholdAnnotation)
				}
				return
			}
			if err != nil {
				t.Fatalf("Trial() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Trial() (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDefaultValidate decodes arbitrary bytes (as YAML or JSON) into a
// KubeletConfiguration, leniently, and runs Default and Validate on whatever
// came out. Neither may panic; Default must be idempotent; Validate must not
// modify its argument and every error must carry a field path.
func FuzzDefaultValidate(f *testing.F) {
	for _, kc := range []*kubeletv1beta1.KubeletConfiguration{{}, realisticConfig(), fullySetConfig()} {
		b, err := json.Marshal(kc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("evictionHard:\n  memory.available: 100Mi\n  bogus: \"NaN%\"\nmergeDefaultEvictionSettings: true\n"))
	f.Add([]byte(`{"podPidsLimit":-5,"maxParallelImagePulls":3,"nodeStatusUpdateFrequency":"1s"}`))
	f.Add([]byte(`{"featureGates":{"NodeSwap":false,"MemoryQoS":true},"memoryThrottlingFactor":0}`))
	f.Add([]byte(`{"reservedMemory":[{"numaNode":0,"limits":{"memory":"0"}}],"tlsCurvePreferences":[0,-1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var kc kubeletv1beta1.KubeletConfiguration
		if err := yaml.Unmarshal(data, &kc); err != nil {
			return
		}
		Default(&kc)
		once := kc.DeepCopy()
		Default(&kc)
		if diff := cmp.Diff(once, &kc, quantityCmp, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("Default is not idempotent (-first +second):\n%s", diff)
		}
		errs := Validate(&kc)
		if diff := cmp.Diff(once, &kc, quantityCmp, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("Validate modified its argument:\n%s", diff)
		}
		for _, e := range errs {
			if e.Field == "" || strings.HasPrefix(e.Field, ".") {
				t.Fatalf("error without a field path: %#v", e)
			}
		}
	})
}
