package proctest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Binary is a command a test package runs, built with `go build` by the
// package's TestMain (Main or RunTests) before m.Run: before any test
// starts a clock (a context deadline, a timed wait, go test's -timeout,
// whose alarm m.Run starts), so that a cold build, minutes on a busy
// machine, never eats into a test's time. A package declares one var per
// binary and passes them all to Main.
type Binary struct {
	// Name is the file name of the built binary (the command's name).
	Name string
	// Package is the package to build, as go build takes it; "" is the
	// package under test (".").
	Package string
	// Dir is the directory go build runs in; "" is the test's working
	// directory (the package under test). The test module builds the
	// library's commands in the library's module ("../.."), as users do and
	// with the build cache its own tests filled.
	Dir string
	// Env is added to the go command's environment (CGO_ENABLED=0 for a
	// static binary).
	Env []string
	// Flags are go build flags, given before the package (-trimpath).
	Flags []string
	// Short builds the binary under -short too, for tests that run it
	// there; otherwise -short builds nothing and Build skips the test.
	Short bool

	dir  string
	path string
	err  error
}

// envParent holds the process ID of a test binary that built its
// binaries: a test binary run again by one of its tests (as a child: another
// user, a traced workload) sees its parent's ID there and builds nothing.
const envParent = "DYNCONFIG_PROCTEST_PARENT"

// Main builds bins (not under -short, which skips the real-process tests,
// unless a Binary says Short; nor in a test binary a test of the same
// package runs again), runs the
// tests of m, removes the binaries and returns the exit code: a package's
// TestMain is os.Exit(proctest.Main(m, &a, &b)). A failed build fails each
// test that asks for that binary, not the others.
func Main(m *testing.M, bins ...*Binary) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !rerun() {
		for _, b := range bins {
			if b.Short || !testing.Short() {
				b.build()
			}
		}
		_ = os.Setenv(envParent, strconv.Itoa(os.Getpid()))
	}
	code := m.Run()
	for _, b := range bins {
		b.Remove()
	}
	return code
}

// rerun reports whether this test binary was started by a test of a test
// binary that built its binaries (Main set envParent to its process ID).
func rerun() bool { return os.Getenv(envParent) == strconv.Itoa(os.Getppid()) }

// RunTests is Main(m, b).
func (b *Binary) RunTests(m *testing.M) int { return Main(m, b) }

func (b *Binary) build() {
	b.dir, b.err = os.MkdirTemp("", b.Name+"-test-")
	if b.err != nil {
		return
	}
	b.path = filepath.Join(b.dir, b.Name)
	pkg := b.Package
	if pkg == "" {
		pkg = "."
	}
	args := append(append([]string{"build"}, b.Flags...), "-o", b.path, pkg)
	// go test puts the go command of its toolchain first on the PATH.
	cmd := exec.Command("go", args...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), b.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		command := strings.TrimSpace(strings.Join(b.Env, " ") + " go " + strings.Join(args, " "))
		b.err = fmt.Errorf("%s (in %q): %w\n%s", command, b.Dir, err, out)
	}
}

// Build returns the path of the binary Main built. It skips the test under
// -short (unless b.Short), and fails it when the build failed or Main did
// not build the binary (a test never builds: its clock may be running).
func (b *Binary) Build(t testing.TB) string {
	t.Helper()
	if testing.Short() && !b.Short {
		t.Skip("real-process test: skipped with -short")
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.path == "" {
		t.Fatalf("proctest: %s was not built: pass it to proctest.Main in the package's TestMain", b.Name)
	}
	return b.path
}

// Remove deletes the built binary, if Main built one.
func (b *Binary) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}
