package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestIsTestModule(t *testing.T) {
	tests := []struct {
		name    string
		content *string // nil: no go.mod at all
		want    bool
	}{
		{"test module", ptr("module github.com/dynconfig/dynconfig/test\n\ngo 1.26.0\n"), true},
		{"quoted path", ptr("// comment\nmodule \"github.com/dynconfig/dynconfig/test\"\n"), true},
		{"root module", ptr("module github.com/dynconfig/dynconfig\n"), false},
		{"other module", ptr("module example.com/test\n"), false},
		{"no module line", ptr("go 1.26.0\n"), false},
		{"no go.mod", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "go.mod")
			if tt.content != nil {
				writeFile(t, path, *tt.content, 0o600)
			}
			if got := isTestModule(path); got != tt.want {
				t.Errorf("isTestModule(%q) = %v, want %v", path, got, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestDefaultBinDir(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "repo", "go.mod"), "module github.com/dynconfig/dynconfig\n", 0o600)
	writeFile(t, filepath.Join(root, "repo", "test", "go.mod"), "module github.com/dynconfig/dynconfig/test\n", 0o600)
	deep := filepath.Join(root, "repo", "test", "integration", "sub")
	outside := filepath.Join(root, "elsewhere")
	for _, d := range []string{deep, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		wd      string
		want    string
		wantErr string
	}{
		{name: "module dir", wd: filepath.Join(root, "repo", "test"), want: filepath.Join(root, "repo", "bin")},
		{name: "package below it", wd: deep, want: filepath.Join(root, "repo", "bin")},
		{name: "root module is not it", wd: filepath.Join(root, "repo"), wantErr: "no go.mod of module github.com/dynconfig/dynconfig/test"},
		{name: "outside", wd: outside, wantErr: "no go.mod of module github.com/dynconfig/dynconfig/test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(tt.wd)
			got, err := DefaultBinDir()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DefaultBinDir() = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DefaultBinDir(): %v", err)
			}
			if got != tt.want {
				t.Errorf("DefaultBinDir() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFindBinaries(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]os.FileMode
		missing string // empty: both found
	}{
		{name: "both missing", missing: "kube-apiserver and etcd"},
		{name: "apiserver missing", files: map[string]os.FileMode{"etcd": 0o700}, missing: "kube-apiserver"},
		{name: "etcd not executable", files: map[string]os.FileMode{"kube-apiserver": 0o700, "etcd": 0o600}, missing: "etcd"},
		{name: "both present", files: map[string]os.FileMode{"kube-apiserver": 0o700, "etcd": 0o755}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, mode := range tt.files {
				writeFile(t, filepath.Join(dir, name), "#!/bin/false\n", mode)
			}
			api, etcd, err := findBinaries(dir)
			if tt.missing != "" {
				want := tt.missing + " missing or not executable in " + dir + ": run test/hack/ensure-bins.sh first"
				if err == nil || err.Error() != want {
					t.Fatalf("findBinaries() = %q, %q, %v; want error %q", api, etcd, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("findBinaries(): %v", err)
			}
			got := []string{api, etcd}
			want := []string{filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFindControlPlaneBinaries: Options.ControlPlane's binaries are looked
// up, and reported missing, as the API server's are.
func TestFindControlPlaneBinaries(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kube-scheduler"), "#!/bin/false\n", 0o755)
	_, err := findExecutables(dir, ControllerManagerBinary, SchedulerBinary)
	want := "kube-controller-manager missing or not executable in " + dir + ": run test/hack/ensure-bins.sh first"
	if err == nil || err.Error() != want {
		t.Fatalf("findExecutables() error %v; want %q", err, want)
	}
	writeFile(t, filepath.Join(dir, "kube-controller-manager"), "#!/bin/false\n", 0o755)
	got, err := findExecutables(dir, ControllerManagerBinary, SchedulerBinary)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(dir, "kube-controller-manager"), filepath.Join(dir, "kube-scheduler")}, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

// fatalRecorder records the first Fatalf and ends the goroutine as a real
// testing.TB would; everything else goes to the embedded test.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestStartFailsWithHintWhenBinariesMissing proves a fresh checkout gets the
// command to run rather than an envtest error about /usr/local/kubebuilder.
func TestStartFailsWithHintWhenBinariesMissing(t *testing.T) {
	binDir := t.TempDir()
	rec := &fatalRecorder{TB: t}
	done := make(chan *Cluster)
	go func() {
		defer close(done)
		done <- StartWithOptions(rec, Options{BinDir: binDir})
	}()
	if c, ok := <-done; ok {
		t.Fatalf("StartWithOptions returned %v with no binaries; want a fatal error", c)
	}
	for _, want := range []string{"kube-apiserver and etcd missing", binDir, "run test/hack/ensure-bins.sh"} {
		if !strings.Contains(rec.fatal, want) {
			t.Errorf("fatal message %q does not contain %q", rec.fatal, want)
		}
	}
}
