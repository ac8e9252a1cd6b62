package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Binary is the command of the test's package, built with `go build` the
// first time Build is called. A package declares one for all its tests and
// runs them with RunTests (or calls Remove) from TestMain.
type Binary struct {
	// Name is the file name of the built binary (the command's name).
	Name string

	once sync.Once
	dir  string
	path string
	err  error
}

// Build builds the package in the test's working directory (the package
// under test) once and returns the binary's path; it skips the test under
// -short and fails it if the build failed.
func (b *Binary) Build(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("real-process test: skipped with -short")
	}
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", b.Name+"-test-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, b.Name)
		// go test puts $GOROOT/bin first on the PATH of the test binary.
		out, err := exec.Command("go", "build", "-o", b.path, ".").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// RunTests runs the tests of m, then removes the binary, and returns the
// exit code: a package's TestMain is os.Exit(b.RunTests(m)).
func (b *Binary) RunTests(m *testing.M) int {
	code := m.Run()
	b.Remove()
	return code
}

// Remove deletes the built binary, if Build built one.
func (b *Binary) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}
