package proctest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// errStopped is what recorder panics with where testing.T would end the test.
var errStopped = errors.New("test stopped")

// recorder is a testing.TB that records how Build stopped the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatal(args ...any)                 { r.fatal = fmt.Sprint(args...); panic(errStopped) }
func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }
func (r *recorder) Skip(args ...any)                  { r.skip = fmt.Sprint(args...); panic(errStopped) }

// build calls b.Build with a recorder and returns its path or how it
// stopped.
func build(b *Binary) (path string, r *recorder) {
	r = &recorder{}
	defer func() {
		if v := recover(); v != nil && v != errStopped {
			panic(v)
		}
	}()
	return b.Build(r), r
}

// TestBinaryBuild: Main's build of a Binary with Env and Flags is the
// binary Build returns, Remove deletes it; a Binary Main did not build,
// or whose build failed, fails the test that asks for it, naming why.
func TestBinaryBuild(t *testing.T) {
	b := &Binary{Name: "hello", Package: "./testdata/hello", Env: []string{"CGO_ENABLED=0"}, Flags: []string{"-trimpath"}, Short: true}
	if path, r := build(b); path != "" || !strings.Contains(r.fatal, "hello was not built: pass it to proctest.Main") {
		t.Fatalf("Build before Main built it: %q, fatal %q", path, r.fatal)
	}
	b.build()
	path, r := build(b)
	if path == "" {
		t.Fatalf("Build after the build: %+v", r)
	}
	out, err := exec.Command(path).CombinedOutput()
	if err != nil || string(out) != "hello CGO_ENABLED=0\n" {
		t.Fatalf("the built binary: %v, %q, want hello with CGO_ENABLED=0", err, out)
	}
	b.Remove()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Remove: %v", err)
	}

	bad := &Binary{Name: "nosuch", Package: "./testdata/nosuch", Short: true}
	bad.build()
	defer bad.Remove()
	if path, r := build(bad); path != "" || !strings.Contains(r.fatal, "go build -o") || !strings.Contains(r.fatal, "./testdata/nosuch") {
		t.Fatalf("Build after a failed build: %q, fatal %q", path, r.fatal)
	}
}

// TestRerun: a test binary its parent test binary started (envParent is
// the parent's process ID) builds nothing; any other does.
func TestRerun(t *testing.T) {
	t.Setenv(envParent, "")
	if rerun() {
		t.Fatal("rerun with no parent recorded")
	}
	t.Setenv(envParent, strconv.Itoa(os.Getpid()))
	if rerun() {
		t.Fatal("rerun when this process, not its parent, built")
	}
	t.Setenv(envParent, strconv.Itoa(os.Getppid()))
	if !rerun() {
		t.Fatal("not a rerun when the parent built")
	}
}
