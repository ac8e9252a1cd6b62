package deploy

import (
	"os"
	"testing"

	"github.com/dynconfig/dynconfig/internal/proctest"
)

// The library's commands the README and deploy/ tests run, built by
// TestMain in the library's module before any test starts a clock (no
// test's deadline may cover a cold build).
var (
	kubeletLikeBin   = proctest.Binary{Name: "kubelet-like", Package: "./examples/kubelet-like", Dir: "../.."}
	kubeProxyLikeBin = proctest.Binary{Name: "kube-proxy-like", Package: "./examples/kube-proxy-like", Dir: "../.."}
	rolloutBin       = proctest.Binary{Name: "dynconfig-rollout", Package: "./cmd/dynconfig-rollout", Dir: "../.."}
	dynconfigctlBin  = proctest.Binary{Name: "dynconfigctl", Package: "./cmd/dynconfigctl", Dir: "../.."}
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, &kubeletLikeBin, &kubeProxyLikeBin, &rolloutBin, &dynconfigctlBin))
}
