// Command generate writes the feature gate table that the kubelet and
// kube-proxy profiles share, components/internal/featuregates/zz_generated_gates.go,
// from the upstream code this module depends on. Run it with
// `go generate ./components/internal/featuregates` from the repository root
// (or `go run ./conformance/kubeletgates/generate -o FILE` from test/).
// TestGeneratedGatesAreCurrent in test/conformance fails when the file
// checked in differs from what this writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dynconfig/dynconfig/test/conformance/kubeletgates"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "generate: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	src, err := kubeletgates.Render()
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
