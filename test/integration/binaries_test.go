package integration

import (
	"os"
	"testing"

	"github.com/dynconfig/dynconfig/internal/proctest"
)

// The library's commands these tests run, built by TestMain in the
// library's module (with the build cache its own tests filled) before any
// test starts a clock: a cold build takes minutes on a busy machine, and
// no test's deadline may cover it.
var (
	kubeletLikeBin   = proctest.Binary{Name: "kubelet-like", Package: kubeletLikePackage, Dir: "../.."}
	kubeProxyLikeBin = proctest.Binary{Name: "kube-proxy-like", Package: kubeProxyLikePackage, Dir: "../.."}
	rolloutBin       = proctest.Binary{Name: "dynconfig-rollout", Package: rolloutPackage, Dir: "../.."}
	// dynconfigctl's dependencies (cli-runtime) are in the library's
	// go.sum only; TestCtlStatus and TestFleet run it under -short too.
	dynconfigctlBin = proctest.Binary{Name: "dynconfigctl", Package: "github.com/dynconfig/dynconfig/cmd/dynconfigctl", Dir: "../..", Short: true}
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, &kubeletLikeBin, &kubeProxyLikeBin, &rolloutBin, &dynconfigctlBin))
}
