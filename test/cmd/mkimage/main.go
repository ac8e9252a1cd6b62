// Command mkimage writes one container image, FROM scratch, holding a
// static Go binary, as an OCI image layout in a tar archive (package
// images). `make images` runs it for every binary that runs in a cluster:
//
//	mkimage -name dynconfig-rollout -binary bin/images/build/dynconfig-rollout \
//	  -ref localhost/dynconfig-rollout:dev -out bin/images/dynconfig-rollout.oci.tar
//
// It prints the image digest.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dynconfig/dynconfig/test/images"
)

func main() {
	var s images.Spec
	var out, source, version string
	flag.StringVar(&s.Name, "name", "", "the image name; the binary is /NAME in the image and its entrypoint")
	flag.StringVar(&s.Binary, "binary", "", "the static binary (CGO_ENABLED=0)")
	flag.StringVar(&s.Ref, "ref", "", "the reference recorded in the archive (default localhost/NAME:dev)")
	flag.StringVar(&s.Arch, "arch", "", "the binary's GOARCH (default this program's)")
	flag.StringVar(&out, "out", "", "the archive to write (an OCI image layout in a tar)")
	flag.StringVar(&source, "source", "https://github.com/dynconfig/dynconfig", "the org.opencontainers.image.source label")
	flag.StringVar(&version, "version", "", "the org.opencontainers.image.version label (empty: none)")
	flag.Parse()
	if s.Name == "" || s.Binary == "" || out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -name NAME -binary PATH -out ARCHIVE [-ref REF] [-arch GOARCH]")
		os.Exit(2)
	}
	if s.Ref == "" {
		s.Ref = "localhost/" + s.Name + ":dev"
	}
	s.Labels = map[string]string{"org.opencontainers.image.source": source, "org.opencontainers.image.title": s.Name}
	if version != "" {
		s.Labels["org.opencontainers.image.version"] = version
	}
	img, err := images.Build(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	digest, err := images.WriteArchive(out, s.Ref, img)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %s: %v\n", out, err)
		os.Exit(1)
	}
	fmt.Printf("%s %s %s\n", s.Ref, digest, out)
}
