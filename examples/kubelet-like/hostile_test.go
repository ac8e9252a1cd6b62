package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dynconfig/dynconfig/internal/proctest"
)

// TestHostileConfigPaths gives the real binary a FIFO, a character device,
// a 1 GiB file and a directory as its --config, and a FIFO, a device and a
// huge file as a drop-in of --config-dir (and as --config-dir itself): each
// start fails at once (within proctest.WaitTimeout: a FIFO is never waited
// on, /dev/zero never read), exit 1, with an error naming the path and
// what it is; nothing is counted as a startup.
func TestHostileConfigPaths(t *testing.T) {
	bin := testBinary.Build(t)
	valid := kubeletDoc("maxPods: 10")
	for _, tc := range []struct {
		name string
		// make lays the hostile path out under dir.
		make func(t *testing.T, dir string)
		args []string // DIR is the node's dir
		want []string
	}{
		{"--config is a FIFO", mkfifo("hostile"), []string{"--config=DIR/hostile"},
			[]string{"DIR/hostile", "not a regular file (p---------)"}},
		{"--config is /dev/zero", nothing, []string{"--config=/dev/zero"},
			[]string{"/dev/zero", "not a regular file (Dc---------)"}},
		{"--config is a 1 GiB file", sparse("hostile", 1<<30), []string{"--config=DIR/hostile"},
			[]string{"DIR/hostile", "larger than a config document may be: 1073741824 bytes"}},
		{"--config is a directory", mkdir("hostile"), []string{"--config=DIR/hostile"},
			[]string{"DIR/hostile", "is a directory"}},
		{"a drop-in is a FIFO", mkfifo("conf.d/20-hostile.conf"), []string{"--config=DIR/init.yaml", "--config-dir=DIR/conf.d"},
			[]string{"DIR/conf.d/20-hostile.conf", "not a regular file (p---------)"}},
		{"a drop-in is /dev/zero", symlink("/dev/zero", "conf.d/20-hostile.conf"), []string{"--config=DIR/init.yaml", "--config-dir=DIR/conf.d"},
			[]string{"DIR/conf.d/20-hostile.conf", "not a regular file (Dc---------)"}},
		{"a drop-in is a 1 GiB file", sparse("conf.d/20-hostile.conf", 1<<30), []string{"--config=DIR/init.yaml", "--config-dir=DIR/conf.d"},
			[]string{"DIR/conf.d/20-hostile.conf", "larger than a config document may be"}},
		{"--config-dir is a FIFO", mkfifo("hostile"), []string{"--config=DIR/init.yaml", "--config-dir=DIR/hostile"},
			[]string{"DIR/hostile", "not a directory"}},
		{"--config-dir is /dev/zero", nothing, []string{"--config=DIR/init.yaml", "--config-dir=/dev/zero"},
			[]string{"/dev/zero", "not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node{proctest.NewNode(t)}
			n.WriteFiles(t, map[string]string{"init.yaml": valid, "conf.d/10-ok.conf": kubeletDoc("kubeAPIQPS: 7")})
			tc.make(t, n.Dir)
			proctest.ExpectStartError(t, bin, "kubelet-like: ", n.Args(n.ExpandDir(tc.args)...), n.ExpandDir(tc.want))
			if _, err := os.Stat(n.startupsPath()); err == nil {
				t.Errorf("a start on a hostile config path was counted as a startup")
			}
		})
	}
}

func nothing(*testing.T, string) {}

func mkfifo(rel string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := syscall.Mkfifo(filepath.Join(dir, rel), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdir(rel string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Mkdir(filepath.Join(dir, rel), 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(target, rel string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
}

// sparse makes a file of size bytes that takes no space.
func sparse(rel string, size int64) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, rel)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
}
