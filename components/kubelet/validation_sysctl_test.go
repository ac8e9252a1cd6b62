package kubelet

import (
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestValidateDefaultPodSysctls(t *testing.T) {
	sysctls := func(gate bool, m map[string]string) mutation {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.FeatureGates = map[string]bool{gateDefaultPodSysctls: gate}
			kc.DefaultPodSysctls = m
		}
	}
	runValidationCases(t, []validationCase{
		{"namespaced sysctls", sysctls(true, map[string]string{
			"net.ipv4.ip_unprivileged_port_start": "0", "kernel.shm_rmid_forced": "1",
			"fs.mqueue.msg_max": "10", "user.max_user_namespaces": "0", "net/ipv4/ping_group_range": "0 1",
		}), nil},
		{"without the gate (alpha, off)", sysctls(false, map[string]string{"net.core.somaxconn": "1024"}),
			[]fieldErr{forbidden("defaultPodSysctls")}},
		{"empty map without the gate", sysctls(false, map[string]string{}), nil},
		{"not a sysctl name", sysctls(true, map[string]string{"Net.Core": "1", "net..core": "1", "net.core/": "1"}),
			[]fieldErr{invalid("defaultPodSysctls[Net.Core]"), invalid("defaultPodSysctls[net..core]"), invalid("defaultPodSysctls[net.core/]")}},
		{"not namespaced", sysctls(true, map[string]string{"vm.swappiness": "10", "kernel.pid_max": "1"}),
			[]fieldErr{invalid("defaultPodSysctls[kernel.pid_max]"), invalid("defaultPodSysctls[vm.swappiness]")}},
		{"the same sysctl twice", sysctls(true, map[string]string{"net.core.somaxconn": "1", "net/core/somaxconn": "2"}),
			[]fieldErr{duplicate("defaultPodSysctls[net/core/somaxconn]")}},
	})
}
