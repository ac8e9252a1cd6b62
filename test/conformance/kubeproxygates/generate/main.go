// Command generate writes components/kubeproxy/zz_generated_gates.go, the
// kube-proxy's feature gate table, from the upstream code this module depends
// on. Run it with `go generate ./components/kubeproxy` from the repository root
// (or `go run ./conformance/kubeproxygates/generate -o FILE` from test/).
// TestGeneratedKubeProxyGatesAreCurrent in test/conformance fails when the file
// checked in differs from what this writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dynconfig/dynconfig/test/conformance/kubeproxygates"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	flag.Parse()
	src, err := kubeproxygates.Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
	if *out == "" {
		os.Stdout.Write(src)
		return
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}
