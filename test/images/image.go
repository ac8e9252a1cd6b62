// Package images builds the project's container images without a
// container engine or a registry: one layer holding a static Go binary
// (CGO_ENABLED=0), an /etc/passwd and /etc/group naming the non-root user
// it runs as, on no base image (FROM scratch), written as an OCI image
// layout in a tar archive that `ctr images import` (and `docker load`,
// `podman load`) reads. Every timestamp, owner and mode is fixed, so the
// same binary gives the same image digest (test/images checks it).
//
// test/cmd/mkimage is the command `make images` runs.
package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the images run as: distroless's "nonroot".
const (
	// UID is the user id every image runs as.
	UID = 65532
	// GID is its group id.
	GID = 65532
)

// epoch is every timestamp in an image: reproducible builds set none.
var epoch = time.Unix(0, 0).UTC()

// Spec describes one image.
type Spec struct {
	// Name is the image's name without a tag (dynconfig-rollout); the
	// binary is /Name in the image and its entrypoint.
	Name string
	// Binary is the path of the static binary to put in it.
	Binary string
	// Ref is the full reference recorded in the archive, which `ctr
	// images import` names the image by (localhost/dynconfig-rollout:dev).
	Ref string
	// Arch is the binary's GOARCH. Default: this program's.
	Arch string
	// Labels are OCI image labels (org.opencontainers.image.*).
	Labels map[string]string
}

// Build returns the image for s.
func Build(s Spec) (v1.Image, error) {
	if s.Name == "" || s.Binary == "" {
		return nil, errors.New("images: Spec.Name and Spec.Binary are required")
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", s.Name, err)
	}
	if len(bin) < 4 || !bytes.Equal(bin[:4], []byte("\x7fELF")) {
		return nil, fmt.Errorf("images: %s: %s is not an ELF binary", s.Name, s.Binary)
	}
	tarData, err := layerTar(s.Name, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarData)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("images: %s: layer: %w", s.Name, err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "test/cmd/mkimage: /" + s.Name, Comment: "static Go binary"},
	})
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", s.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	arch := s.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{"/" + s.Name}
	cf.Config.User = fmt.Sprintf("%d:%d", UID, GID)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/"}
	cf.Config.Labels = s.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("images: %s: config: %w", s.Name, err)
	}
	return img, nil
}

// layerTar is the one layer: /etc/passwd, /etc/group, /tmp and the
// binary, in a fixed order with fixed owners, modes and times.
func layerTar(name string, bin []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	type entry struct {
		name string
		mode int64
		data []byte
		dir  bool
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: name, mode: 0o755, data: bin},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img as an OCI image layout in a tar archive at path
// (replaced atomically), naming it ref, and returns the image's digest.
func WriteArchive(path, ref string, img v1.Image) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".layout-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	annotations := map[string]string{
		// containerd names an imported image by this one,
		"io.containerd.image.name": ref,
		// other tools by this one.
		"org.opencontainers.image.ref.name": ref,
	}
	if err := p.AppendImage(img, layout.WithAnnotations(annotations)); err != nil {
		return v1.Hash{}, err
	}
	tmp := path + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// tarDir writes the files under dir to a tar archive at out, sorted, with
// fixed owners, modes and times.
func tarDir(dir, out string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			if d.IsDir() {
				rel += "/"
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		if n[len(n)-1] == '/' {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			if data, err = os.ReadFile(filepath.Join(dir, n)); err != nil {
				f.Close()
				return err
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
