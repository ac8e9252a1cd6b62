package main

import (
	"os"
	"testing"

	"github.com/dynconfig/dynconfig/examples/internal/proctest"
)

// The real-process tests build this command once per test run and drive the
// binary: alone, or under a proctest.RestartLoop, a small stand-in for
// systemd's Restart=always. They are skipped with -short.

// testBinary is the binary shared by the tests of this package.
var testBinary = proctest.Binary{Name: "kube-proxy-like"}

func TestMain(m *testing.M) {
	code := m.Run()
	testBinary.Remove()
	os.Exit(code)
}
