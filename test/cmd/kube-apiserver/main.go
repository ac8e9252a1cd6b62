// Command kube-apiserver is the upstream Kubernetes API server, built from
// the k8s.io/kubernetes module pinned in test/go.mod so the integration tests
// run against a real server without downloading release binaries.
//
// test/hack/ensure-bins.sh builds it into the repository's bin/ directory.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	// Same side-effect registrations as the upstream binary: the JSON log
	// format and the client-go and version metrics.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
