package proctest

import "syscall"

// sysProcAttr puts a child in its own process group, so the whole group can
// be killed, and has the kernel kill it if the test process dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
