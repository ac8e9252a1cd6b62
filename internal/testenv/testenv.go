package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	// CIEnv is the environment variable that says the tests run in CI:
	// .ci/run sets it to 1, and a missing part fails the test instead of
	// skipping it.
	CIEnv = "DYNCONFIG_CI"
	// SkipLogEnv names the file a skip for a missing part is appended to
	// outside CI (`make test` sets it and prints the file at the end).
	SkipLogEnv = "DYNCONFIG_SKIP_LOG"
)

// InCI reports whether the tests run in CI: CIEnv is set to a value other
// than "" and "0".
func InCI() bool {
	v := os.Getenv(CIEnv)
	return v != "" && v != "0"
}

// Missing stops t because this machine lacks what (for example "strace" or
// "root"); how says how to get it (for example "apt-get install strace").
// In CI it fails t naming both; elsewhere it records the skip in the file
// SkipLogEnv names, if any, and skips t.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if InCI() {
		t.Fatalf("missing %s (%s); %s=1 makes a missing part a failure", what, how, CIEnv)
	}
	if path := os.Getenv(SkipLogEnv); path != "" {
		if err := appendSkip(path, t.Name(), what, how); err != nil {
			t.Logf("cannot record the skip in %s=%s: %v", SkipLogEnv, path, err)
		}
	}
	t.Skipf("missing %s (%s)", what, how)
}

// LookPath returns the path of the command name, and stops t with Missing
// (how says how to install it) when the command is not on the PATH.
func LookPath(t testing.TB, name, how string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, how)
	}
	return p
}

// Root stops t with Missing unless the test runs as root; why says what
// root is needed for (for example "to mount a tmpfs").
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root ("+why+")", "run the tests as root, as .ci/run does")
	}
}

// appendSkip appends one line to the skip log: the package directory (the
// test's working directory, relative to the repository), the test's name,
// what is missing and how to get it, separated by tabs.
func appendSkip(path, test, what, how string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	line := strings.Join([]string{packageDir(), test, oneLine(what), oneLine(how)}, "\t") + "\n"
	_, err = f.WriteString(line) // one write: O_APPEND keeps lines whole
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// packageDir is the working directory (go test runs a test binary in its
// package's directory) relative to the repository's root, the nearest
// parent holding .ci/run; the absolute path when there is none.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, ".ci", "run")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return rel
			}
			return wd
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}

// oneLine keeps a field of the log on its line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\t", " ").Replace(s)
}
