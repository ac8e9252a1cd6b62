// Command generate writes the feature gate table of a component from the
// upstream code this module depends on: components/kubelet/zz_generated_gates.go
// (-component kubelet, the default) or components/kubeproxy/zz_generated_gates.go
// (-component kube-proxy). Run it with `go generate ./components/kubelet` or
// `go generate ./components/kubeproxy` from the repository root (or
// `go run ./conformance/kubeletgates/generate [-component C] -o FILE` from
// test/). TestGeneratedGatesAreCurrent and
// TestGeneratedKubeProxyGatesAreCurrent in test/conformance fail when a file
// checked in differs from what this writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dynconfig/dynconfig/test/conformance/kubeletgates"
	"github.com/dynconfig/dynconfig/test/conformance/kubeproxygates"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	component := flag.String("component", "kubelet", "kubelet or kube-proxy")
	flag.Parse()
	render := map[string]func() ([]byte, error){"kubelet": kubeletgates.Render, "kube-proxy": kubeproxygates.Render}[*component]
	if render == nil {
		fmt.Fprintf(os.Stderr, "generate: -component %q: want kubelet or kube-proxy\n", *component)
		os.Exit(2)
	}
	src, err := render()
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
