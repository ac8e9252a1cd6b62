//go:build unix && !linux

package proctest

import "syscall"

// sysProcAttr puts a child in its own process group, so the whole group can
// be killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
