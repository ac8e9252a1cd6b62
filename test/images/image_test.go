package images

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fakeBinary writes an ELF-looking file: the image builder copies bytes,
// it does not run them.
func fakeBinary(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, []byte("\x7fELF"+content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Same inputs, same digest and the same archive bytes; a different binary,
// a different digest.
func TestReproducible(t *testing.T) {
	bin := fakeBinary(t, "one")
	s := Spec{Name: "dynconfig-rollout", Binary: bin, Ref: "localhost/dynconfig-rollout:dev", Arch: "amd64"}
	dir := t.TempDir()
	var digests []string
	var archives [][]byte
	for i := range 2 {
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "img"+string(rune('a'+i))+".tar")
		d, err := WriteArchive(out, s.Ref, img)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		archives = append(archives, data)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same binary: digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds of the same binary wrote different archives (%d and %d bytes)", len(archives[0]), len(archives[1]))
	}
	s.Binary = fakeBinary(t, "two")
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() == digests[0] {
		t.Errorf("a different binary gave the same digest %s", d)
	}
}

// The image runs the binary as the non-root user, from scratch.
func TestConfig(t *testing.T) {
	img, err := Build(Spec{Name: "node-greeter", Binary: fakeBinary(t, "x"), Arch: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/node-greeter" ||
		cf.Architecture != "arm64" || cf.OS != "linux" || !cf.Created.IsZero() && cf.Created.Unix() != 0 {
		t.Errorf("config %+v", cf)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1 (FROM scratch)", len(layers), err)
	}
	if _, err := Build(Spec{Name: "x", Binary: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing binary built an image")
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(Spec{Name: "x", Binary: notELF}); err == nil {
		t.Error("a shell script built an image")
	}
}
