package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	content := bytes.Repeat([]byte("0123456789"), 1000)
	if err := os.WriteFile(file, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRegular(file, 1<<20)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(content))
	}
	if got, err := ReadRegular(filepath.Join(dir, "empty"), 10); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %q, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		max  int64
		want error
	}{
		{"missing", 10, fs.ErrNotExist},
		{"link", 1 << 20, ErrSymlink},
		{"dir", 1 << 20, ErrNotRegular},
		{"fifo", 1 << 20, ErrNotRegular},
		{"f", int64(len(content)) - 1, ErrTooLarge},
	} {
		_, err := ReadRegular(filepath.Join(dir, tc.name), tc.max)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
}
