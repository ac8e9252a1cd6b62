package monitoring

import (
	"os"
	"testing"

	"github.com/dynconfig/dynconfig/internal/proctest"
)

// rolloutBin is the controller TestPrometheusAlertFires runs, built by
// TestMain in the library's module before any test starts a clock (no
// test's deadline may cover a cold build).
var rolloutBin = proctest.Binary{Name: "dynconfig-rollout", Package: "./cmd/dynconfig-rollout", Dir: "../.."}

func TestMain(m *testing.M) {
	os.Exit(rolloutBin.RunTests(m))
}
