package dynconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/merge"
)

// Hostile input: the local layers of NewLayers (the component's --config,
// --config-dir and instance file) are read with merge.ReadFile: a FIFO, a
// character device or a 1 GiB file in any of them fails Build at once (a
// wall budget: a FIFO waited on never returns) with an error naming it.
func TestLayersRefuseHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	writeFile(t, huge, "")
	if err := os.Truncate(huge, 1<<30); err != nil {
		t.Fatal(err)
	}
	dropIns := filepath.Join(dir, "conf.d")
	writeFile(t, filepath.Join(dropIns, "10-ok.conf"), kubeletHeader+"maxPods: 60\n")
	if err := os.Symlink(fifo, filepath.Join(dropIns, "20-fifo.conf")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		local LocalConfig
		want  string
	}{
		{"init file is a FIFO", LocalConfig{InitFile: fifo}, fifo + ": not a regular file"},
		{"init file is /dev/zero", LocalConfig{InitFile: "/dev/zero"}, "/dev/zero: not a regular file"},
		{"init file is 1 GiB", LocalConfig{InitFile: huge}, huge + ": larger than a config document may be"},
		{"instance file is a FIFO", LocalConfig{InstanceFile: fifo}, fifo + ": not a regular file"},
		{"a drop-in is a FIFO", LocalConfig{DropInDir: dropIns}, filepath.Join(dropIns, "20-fifo.conf") + ": not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := kubeletLayers(t, tc.local)
			done := make(chan error, 1)
			go func() { _, err := l.Build(nil); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Build = %v; want an error saying %q", err, tc.want)
				}
				if !errors.Is(err, merge.ErrNotRegular) && !errors.Is(err, merge.ErrTooLarge) {
					t.Errorf("Build = %v; want it to match merge.ErrNotRegular or merge.ErrTooLarge", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Build did not return within 20s: it hangs on %+v", tc.local)
			}
		})
	}
}
