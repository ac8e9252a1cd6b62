package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// envChild makes the test binary a child of TestMissingFailsInCI.
const envChild = "DYNCONFIG_TESTENV_CHILD"

// TestMissingChild is the child of TestMissingFailsInCI: it reports a
// missing part, and then says it went on.
func TestMissingChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("the child of TestMissingFailsInCI")
	}
	Missing(t, "strace", "apt-get install strace")
	t.Log("after Missing")
}

// TestMissingFailsInCI runs TestMissingChild with DYNCONFIG_CI=1 in a
// child process: the test fails, naming what is missing and the package,
// stops there, and writes no skip log.
func TestMissingFailsInCI(t *testing.T) {
	log := filepath.Join(t.TempDir(), "skips")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", CIEnv+"=1", SkipLogEnv+"="+log)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the child in CI: %v, want exit code 1\n%s", err, out)
	}
	for _, want := range []string{"--- FAIL: TestMissingChild", "missing strace (apt-get install strace)", CIEnv + "=1"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the child's output lacks %q:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("after Missing")) || bytes.Contains(out, []byte("SKIP")) {
		t.Errorf("the child went on or skipped after Missing:\n%s", out)
	}
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("in CI the skip log was written (%v)", err)
	}
}

// TestMissingSkipsOutsideCI: outside CI Missing skips, and appends one
// line per skip to the log, with the package, the test, what and how.
func TestMissingSkipsOutsideCI(t *testing.T) {
	for i, v := range []string{"", "0"} {
		t.Setenv(CIEnv, v)
		log := filepath.Join(t.TempDir(), "skips")
		t.Setenv(SkipLogEnv, log)
		var after bool
		for _, name := range []string{"a", "b"} {
			t.Run(fmt.Sprint(name, i), func(t *testing.T) {
				Missing(t, "the tool\n"+name, "apt-get install\ttool")
				after = true
			})
		}
		if after {
			t.Fatalf("%s=%q: the test went on after Missing", CIEnv, v)
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("internal/testenv\tTestMissingSkipsOutsideCI/a%d\tthe tool a\tapt-get install tool\n"+
			"internal/testenv\tTestMissingSkipsOutsideCI/b%d\tthe tool b\tapt-get install tool\n", i, i)
		if string(data) != want {
			t.Fatalf("%s=%q: the skip log is\n%q\nwant\n%q", CIEnv, v, data, want)
		}
	}
	// Without a log, still a skip.
	t.Setenv(SkipLogEnv, "")
	t.Run("no log", func(t *testing.T) {
		defer func() {
			if !t.Skipped() {
				t.Error("Missing without a skip log did not skip")
			}
		}()
		Missing(t, "x", "y")
	})
}

// TestLookPathAndRoot: a command on the PATH is found; one missing stops
// the test by Missing, as does Root for a user other than root.
func TestLookPathAndRoot(t *testing.T) {
	t.Setenv(CIEnv, "")
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipLogEnv, log)
	dir := t.TempDir()
	tool := filepath.Join(dir, "dynconfig-testenv-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if got := LookPath(t, "dynconfig-testenv-tool", "never"); got != tool {
		t.Fatalf("LookPath = %q, want %q", got, tool)
	}
	t.Run("missing", func(t *testing.T) {
		LookPath(t, "dynconfig-testenv-absent", "apt-get install absent")
	})
	t.Run("root", func(t *testing.T) {
		Root(t, "to test Root")
	})
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "internal/testenv\tTestLookPathAndRoot/missing\tdynconfig-testenv-absent\tapt-get install absent\n"
	if os.Geteuid() != 0 {
		want += "internal/testenv\tTestLookPathAndRoot/root\troot (to test Root)\trun the tests as root, as .ci/run does\n"
	}
	if string(data) != want {
		t.Fatalf("the skip log is\n%q\nwant\n%q", data, want)
	}
}

// TestREADMEInstallCommand: the README gives the command that installs
// every real part, with exactly the packages .ci/run installs (the list
// `make test` ends with when it skipped tests reads .ci/run too).
func TestREADMEInstallCommand(t *testing.T) {
	run, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^pkgs=\(([^)]*)\)$`).FindSubmatch(run)
	if m == nil {
		t.Fatal(".ci/run has no pkgs=(...) line")
	}
	want := "sudo apt-get install -y --no-install-recommends " + strings.Join(strings.Fields(string(m[1])), " ")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), want) {
		t.Fatalf("README.md does not give .ci/run's install command:\n%s", want)
	}
	if !strings.Contains(string(run), "export "+CIEnv+"=1") {
		t.Fatalf(".ci/run does not export %s=1", CIEnv)
	}
}
