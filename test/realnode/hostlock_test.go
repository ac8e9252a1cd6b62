package realnode

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// hostLockPath is the file whose flock a real node holds for the whole
// test. A real node changes host-wide state (the kubepods cgroups, the CNI
// bridge, /var/lib/kubelet/device-plugins, iptables chains) and its
// cleanup removes it, so two at once on one host — two checkouts' test
// runs, or two packages' — break each other: seen as a pod's cgroup files
// vanishing under a running kubelet ("failed to read memory.limit_in_bytes
// ... no such file or directory") and its containers crash-looping.
const hostLockPath = "/run/dynconfig-realnode.lock"

// lockHost waits until no other real node runs on this host and holds
// the host until the test ends. It logs how long it waited.
func lockHost(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(hostLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("realnode: host lock: %v", err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("realnode: host lock %s: %v", hostLockPath, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("realnode: waited %v for another real node on this host to end (%s)", d.Round(time.Second), hostLockPath)
	}
	t.Cleanup(func() { f.Close() })
}
