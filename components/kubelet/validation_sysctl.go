package kubelet

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateDefaultPodSysctls checks defaultPodSysctls the way the kubelet
// does: the field needs the DefaultPodSysctls feature gate, and each key must
// be a well-formed sysctl name that the kernel namespaces per pod (only those
// can be set in a pod's sandbox), named once ("net.core.somaxconn" and
// "net/core/somaxconn" are the same sysctl).
func (v *validator) validateDefaultPodSysctls() {
	m := v.kc.DefaultPodSysctls
	if len(m) == 0 {
		return
	}
	path := field.NewPath("defaultPodSysctls")
	if !v.gates.Enabled(gateDefaultPodSysctls) {
		v.add(field.Forbidden(path, "requires feature gate "+gateDefaultPodSysctls))
		return
	}
	seen := make(map[string]string, len(m))
	for _, name := range sortedKeys(m) {
		if len(name) > maxSysctlLength || !sysctlName.MatchString(name) {
			v.add(field.Invalid(path.Key(name), name, "must be a sysctl name such as \"net.ipv4.ip_unprivileged_port_start\" (lower-case segments separated by '.' or '/')"))
			continue
		}
		normal := normalizeSysctl(name)
		if !namespacedSysctl(normal) {
			v.add(field.Invalid(path.Key(name), name, "is not known to be namespaced: only net.*, user.*, fs.mqueue.* and the IPC and UTS kernel.* sysctls can be set per pod"))
		}
		if other, dup := seen[normal]; dup {
			v.add(field.Duplicate(path.Key(name), other))
		}
		seen[normal] = name
	}
}

const maxSysctlLength = 253

// sysctlName is the grammar of a sysctl name: segments of lower-case letters,
// digits, '-' and '_' (starting and ending with a letter or digit),
// separated by '.' or '/'.
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// normalizeSysctl writes a sysctl name with '.' as the separator: a name
// whose first separator is '/' ("net/ipv4/conf/eth0.100/rp_filter") has its
// '.' and '/' swapped.
func normalizeSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

// namespacedSysctl reports whether the kernel keeps a (normalized) sysctl per
// network, IPC, UTS or user namespace.
func namespacedSysctl(name string) bool {
	switch name {
	case "kernel.domainname",
		"kernel.sem", "kernel.shm", "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
		"kernel.msg", "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni":
		return true
	}
	for _, prefix := range []string{"net.", "fs.mqueue.", "user."} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
