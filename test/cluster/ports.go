package cluster

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:PORT") that nothing
// listens on now, for a process a test starts. Another process may take the
// port before it is used; the tests that use it run their servers at once.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	addr, err := net.ResolveTCPAddr("tcp", FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return addr.Port
}
