package provision

import (
	"testing"

	"sigs.k8s.io/yaml"
)

const benchDoc = header + `address: 192.168.0.8
port: 20250
serializeImagePulls: false
maxPods: 64
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
  imagefs.available: 15%
systemReserved:
  cpu: 500m
  memory: 1Gi
`

// BenchmarkValidate is the steady state: one Validator, one document.
func BenchmarkValidate(b *testing.B) {
	v := eksaValidator(b, EKSAProposedPolicy, ProviderVSphere, EKSAOptions{ResolvConf: "/etc/eksa.conf"})
	data := []byte(benchDoc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Validate(data, "kubelet.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateMap adds marshalling the caller's map.
func BenchmarkValidateMap(b *testing.B) {
	v := eksaValidator(b, EKSAProposedPolicy, ProviderVSphere, EKSAOptions{ResolvConf: "/etc/eksa.conf"})
	var m map[string]any
	if err := yaml.Unmarshal([]byte(benchDoc), &m); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.ValidateMap(m, "kubelet.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateKubeletConfiguration is the one-shot package function,
// which builds a Validator per call.
func BenchmarkValidateKubeletConfiguration(b *testing.B) {
	data := []byte(benchDoc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateKubeletConfiguration(data, "kubelet.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewValidator is the cost of preparing a policy.
func BenchmarkNewValidator(b *testing.B) {
	managed, err := EKSAManagedFields(ProviderNutanix)
	if err != nil {
		b.Fatal(err)
	}
	p, err := EKSAProposedPolicy(EKSAOptions{Managed: managed, ResolvConf: "/etc/eksa.conf"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewValidator(p); err != nil {
			b.Fatal(err)
		}
	}
}
