package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestValidateNodeAllocatable(t *testing.T) {
	enforce := func(keys ...string) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EnforceNodeAllocatable = keys
			kc.SystemReservedCgroup, kc.KubeReservedCgroup = "/system.slice", "/kube.slice"
		}
	}
	runValidationCases(t, []validationCase{
		{"all enforcements with cgroups", enforce("pods", "system-reserved", "kube-reserved"), nil},
		{"compressible enforcements", enforce("pods", "system-reserved-compressible", "kube-reserved-compressible"), nil},
		{"none alone", enforce("none"), nil},
		{"empty list", enforce(), nil},
		{"none with others", enforce("none", "pods"), []fieldErr{invalid("enforceNodeAllocatable")}},
		{"both system forms", enforce("system-reserved", "system-reserved-compressible"), []fieldErr{invalid("enforceNodeAllocatable")}},
		{"both kube forms", enforce("kube-reserved", "kube-reserved-compressible"), []fieldErr{invalid("enforceNodeAllocatable")}},
		{"duplicate", enforce("pods", "pods"), []fieldErr{duplicate("enforceNodeAllocatable[1]")}},
		{"unknown key", enforce("pods", "node"), []fieldErr{notSupported("enforceNodeAllocatable[1]")}},
		{"missing cgroups", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EnforceNodeAllocatable = []string{"system-reserved", "kube-reserved-compressible"}
		}, []fieldErr{required("systemReservedCgroup"), required("kubeReservedCgroup")}},
		{"enforcement without cgroupsPerQOS", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EnforceNodeAllocatable = []string{"pods"}
			kc.CgroupsPerQOS = ptr.To(false)
		}, []fieldErr{invalid("cgroupsPerQOS")}},
		{"none without cgroupsPerQOS", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EnforceNodeAllocatable = []string{"none"}
			kc.CgroupsPerQOS = ptr.To(false)
		}, nil},
	})
}

func TestValidateReservations(t *testing.T) {
	mem := func(node int32, limits corev1.ResourceList) kubeletv1beta1.MemoryReservation {
		return kubeletv1beta1.MemoryReservation{NumaNode: node, Limits: limits}
	}
	q := resource.MustParse
	runValidationCases(t, []validationCase{
		{"reserved resources", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SystemReserved = map[string]string{"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi", "pid": "1000"}
			kc.KubeReserved = map[string]string{"cpu": "0"}
		}, nil},
		{"reserved resources bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.SystemReserved = map[string]string{"gpu": "1", "memory": "-1Gi"}
			kc.KubeReserved = map[string]string{"cpu": "half"}
		}, []fieldErr{
			notSupported("systemReserved[gpu]"), invalid("systemReserved[memory]"), invalid("kubeReserved[cpu]"),
		}},
		{"reserved CPUs", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ReservedSystemCPUs = "0-1,6" }, nil},
		{"reserved CPUs unparseable", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.ReservedSystemCPUs = "0-" },
			[]fieldErr{invalid("reservedSystemCPUs")}},
		{"reserved CPUs with reserved cgroup", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ReservedSystemCPUs, kc.KubeReservedCgroup = "0", "/kube.slice"
		}, []fieldErr{forbidden("reservedSystemCPUs")}},
		{"reserved memory", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ReservedMemory = []kubeletv1beta1.MemoryReservation{
				mem(0, corev1.ResourceList{"memory": q("1Gi"), "hugepages-2Mi": q("64Mi")}),
				mem(1, corev1.ResourceList{"memory": q("1Gi")}),
			}
		}, nil},
		{"reserved memory bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ReservedMemory = []kubeletv1beta1.MemoryReservation{
				mem(0, corev1.ResourceList{"memory": q("1Gi"), "cpu": q("1")}),
				mem(0, corev1.ResourceList{"memory": q("2Gi")}),
				mem(1, corev1.ResourceList{"hugepages-1Gi": q("0")}),
			}
		}, []fieldErr{
			notSupported("reservedMemory[0].limits[cpu]"),
			duplicate("reservedMemory[1].limits[memory]"),
			invalid("reservedMemory[2].limits[hugepages-1Gi]"),
		}},
		{"qos reserved", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.QOSReserved = map[string]string{"memory": "100%"} }, nil},
		{"qos reserved bad", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.QOSReserved = map[string]string{"cpu": "10%", "memory": "101%"}
		}, []fieldErr{notSupported("qosReserved[cpu]"), invalid("qosReserved[memory]")}},
		{"qos reserved fraction", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.QOSReserved = map[string]string{"memory": "50.5%"}
		}, []fieldErr{invalid("qosReserved[memory]")}},
		{"qos reserved without percent sign", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.QOSReserved = map[string]string{"memory": "50"}
		}, []fieldErr{invalid("qosReserved[memory]")}},
	})
}

func TestValidateTaints(t *testing.T) {
	taints := func(ts ...corev1.Taint) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) { kc.RegisterWithTaints = ts }
	}
	runValidationCases(t, []validationCase{
		{"good taints", taints(
			corev1.Taint{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule},
			corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
			corev1.Taint{Key: "no-effect"}, // allowed here, as upstream
		), nil},
		{"bad taints", taints(
			corev1.Taint{Key: "bad key", Value: "ok", Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: "ok", Value: "bad value!", Effect: "Sometimes"},
			corev1.Taint{Key: "ok", TimeAdded: &metav1.Time{}},
		), []fieldErr{
			invalid("registerWithTaints[0].key"),
			invalid("registerWithTaints[1].value"),
			notSupported("registerWithTaints[1].effect"),
			forbidden("registerWithTaints[2].timeAdded"),
		}},
	})
}
