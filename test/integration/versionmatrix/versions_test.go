//go:build linux

package versionmatrix

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/internal/testenv"
)

// Paths from this package's directory.
const (
	// repoRoot is the library module's root: version N's source.
	repoRoot = "../../.."
	// versionsFile names N-1 and N-2.
	versionsFile = "../../versions.txt"
	// crdPath is the ConfigRollout CRD in a version's tree.
	crdPath = "deploy/rollout/dynconfig.io_configrollouts.yaml"
)

// The packages built for each version, in one go build, and the files
// they become.
const (
	agentPackage      = "./examples/kubelet-like"
	controllerPackage = "./cmd/dynconfig-rollout"
	agentFile         = "kubelet-like"
	controllerFile    = "dynconfig-rollout"
	crdFile           = "configrollouts.yaml"
)

// version is one version of dynconfig in the matrix and its binaries.
type version struct {
	// Name is N, N-1 or N-2.
	Name string
	// Commit is the full commit id; "" for N (the working tree).
	Commit string
	// Why the commit was chosen (test/versions.txt).
	Why string

	dir     string        // holds the agent, the controller and the CRD
	cpu     time.Duration // the CPU time its build took (0: reused)
	missing string        // the clone lacks Commit and could not fetch it
	err     error         // anything else that kept it from being built
}

// versions are N-2, N-1 and N, oldest first, as TestMain built them;
// loadErr is why test/versions.txt could not be read.
var (
	versions []*version
	loadErr  error
)

// Agent returns the version's node agent binary (see path).
func (v *version) Agent(t testing.TB) string { return v.path(t, agentFile) }

// Controller returns the version's rollout controller binary (see path).
func (v *version) Controller(t testing.TB) string { return v.path(t, controllerFile) }

// CRD returns the version's ConfigRollout CRD manifest (see path).
func (v *version) CRD(t testing.TB) string { return v.path(t, crdFile) }

// path returns file of the version's directory. It stops the test when
// the version could not be built: a commit missing from the clone is
// testenv.Missing (a failure in CI), anything else a failure.
func (v *version) path(t testing.TB, file string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds dynconfig from git history and runs it: skipped with -short")
	}
	if v.missing != "" {
		testenv.Missing(t, v.missing, "git fetch --depth=1 origin "+v.Commit+", or a clone with the history")
	}
	if v.err != nil {
		t.Fatalf("version %s: %v", v.Name, v.err)
	}
	if v.dir == "" {
		t.Fatalf("version %s was not built (TestMain builds every version)", v.Name)
	}
	return filepath.Join(v.dir, file)
}

// allVersions returns the versions for a test, failing it when
// test/versions.txt could not be read.
func allVersions(t testing.TB) []*version {
	t.Helper()
	if testing.Short() {
		t.Skip("builds dynconfig from git history and runs it: skipped with -short")
	}
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return versions
}

// TestMain builds every version before m.Run, so that no test's clock
// (go test's -timeout, a context deadline) covers a compile: a cold build
// of an old commit takes a CPU-minute or so.
func TestMain(m *testing.M) {
	flag.Parse()
	var cleanup func()
	if !testing.Short() {
		cleanup = buildAll()
	}
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	os.Exit(code)
}

// buildAll reads test/versions.txt and builds each version; it returns
// what removes version N's temporary binaries.
func buildAll() func() {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		loadErr = err
		return nil
	}
	old, err := readVersions(versionsFile)
	if err != nil {
		loadErr = err
		return nil
	}
	for _, v := range old {
		v.dir = filepath.Join(root, "bin", "versions", v.Commit)
		v.cpu, v.missing, v.err = buildCommit(root, v.Commit, v.dir)
	}
	n := &version{Name: "N", Why: "the working tree"}
	n.dir, n.err = os.MkdirTemp("", "versionmatrix-n-")
	if n.err == nil {
		n.cpu, n.err = build(root, n.dir)
	}
	versions = append(old, n)
	for _, v := range versions {
		switch {
		case v.missing != "":
			fmt.Fprintf(os.Stderr, "versionmatrix: version %s: missing %s\n", v.Name, v.missing)
		case v.err != nil:
			fmt.Fprintf(os.Stderr, "versionmatrix: version %s: %v\n", v.Name, v.err)
		case v.cpu == 0:
			fmt.Fprintf(os.Stderr, "versionmatrix: version %s (%s): built before, reused from %s\n", v.Name, short(v.Commit), v.dir)
		default:
			fmt.Fprintf(os.Stderr, "versionmatrix: version %s (%s): built in %v of CPU\n", v.Name, short(v.Commit), v.cpu.Round(10*time.Millisecond))
		}
	}
	return func() { _ = os.RemoveAll(n.dir) }
}

// short is a commit's short form, "working tree" for N.
func short(commit string) string {
	if commit == "" {
		return "working tree"
	}
	return commit[:7]
}

var (
	versionName = regexp.MustCompile(`^N-[1-9][0-9]*$`)
	commitID    = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// readVersions reads the versions file: blank lines and lines starting
// with # aside, one line per version, "NAME COMMIT WHY", NAME N-1 or N-2
// (each once) and COMMIT a full commit id. It returns them oldest first.
func readVersions(path string) ([]*version, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byName := map[string]*version{}
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		text := strings.TrimSpace(s.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want NAME COMMIT WHY, got %q", path, line, text)
		}
		name, commit := fields[0], fields[1]
		switch {
		case !versionName.MatchString(name):
			return nil, fmt.Errorf("%s:%d: NAME %q: want N-1 or N-2", path, line, name)
		case !commitID.MatchString(commit):
			return nil, fmt.Errorf("%s:%d: COMMIT %q: want a full commit id (40 hex digits)", path, line, commit)
		case byName[name] != nil:
			return nil, fmt.Errorf("%s:%d: NAME %s: given twice", path, line, name)
		}
		byName[name] = &version{Name: name, Commit: commit, Why: strings.Join(fields[2:], " ")}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []*version
	for _, name := range []string{"N-2", "N-1"} {
		v := byName[name]
		if v == nil {
			return nil, fmt.Errorf("%s: no line for version %s", path, name)
		}
		out = append(out, v)
		delete(byName, name)
	}
	for name := range byName {
		return nil, fmt.Errorf("%s: version %s: only N-1 and N-2 are run", path, name)
	}
	return out, nil
}

// builtStamp is the file that says a version's directory holds complete
// binaries of its commit, built by the Go toolchain it names: a commit's
// source never changes, so they are reused until the toolchain does.
const builtStamp = "built"

// buildCommit builds commit's agent and controller into dir (under the
// repository's git-ignored bin/), or reuses the ones built there before.
// The commit's tree is extracted to dir/src (always the same path, so that
// the shared build cache, which keys a package by its directory, holds it
// from one run to the next) and removed after the build. missing says why
// the clone lacks the commit when git fetch could not get it.
func buildCommit(root, commit, dir string) (cpu time.Duration, missing string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, "", err
	}
	// One build per directory at a time (two go test runs in one clone).
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return 0, "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return 0, "", fmt.Errorf("locking %s: %w", dir, err)
	}
	stamp := runtime.Version() + " " + commit + "\n"
	if b, err := os.ReadFile(filepath.Join(dir, builtStamp)); err == nil && string(b) == stamp {
		return 0, "", nil
	}
	_ = os.Remove(filepath.Join(dir, builtStamp))
	if why := haveCommit(root, commit); why != "" {
		return 0, why, nil
	}
	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return 0, "", err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return 0, "", err
	}
	defer os.RemoveAll(src)
	if err := extract(root, commit, src); err != nil {
		return 0, "", err
	}
	if cpu, err = build(src, dir); err != nil {
		return cpu, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, builtStamp), []byte(stamp), 0o644); err != nil {
		return cpu, "", err
	}
	return cpu, "", nil
}

// build builds the agent and the controller of the tree at src into dir
// with one go build (one link each, the packages they share compiled
// once), and copies the tree's ConfigRollout CRD there. It returns the CPU
// time the go command and its children took.
func build(src, dir string) (time.Duration, error) {
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), agentPackage, controllerPackage)
	cmd.Dir = src
	// The tree's own go.mod, never a go.work above it.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return cpu, fmt.Errorf("go build -o %s %s %s (in %s): %w\n%s", dir, agentPackage, controllerPackage, src, err, out)
	}
	crd, err := os.ReadFile(filepath.Join(src, crdPath))
	if err != nil {
		return cpu, err
	}
	return cpu, os.WriteFile(filepath.Join(dir, crdFile), crd, 0o644)
}

// haveCommit makes sure the clone at root has commit, fetching it from
// origin when it does not (a shallow clone, as CI systems make, has only
// the newest commits). It returns why the commit is missing, or "".
func haveCommit(root, commit string) string {
	has := func() bool {
		return exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run() == nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "git (to build commit " + commit + " from the history; apt-get install git)"
	}
	if has() {
		return ""
	}
	out, err := exec.Command("git", "-C", root, "fetch", "--quiet", "--no-tags", "--depth=1", "origin", commit).CombinedOutput()
	if err == nil && has() {
		fmt.Fprintf(os.Stderr, "versionmatrix: fetched commit %s from origin (the clone lacked it)\n", commit)
		return ""
	}
	if err == nil {
		err = errors.New("the fetch left it missing")
	}
	return fmt.Sprintf("commit %s of the git history (git fetch --depth=1 origin %s: %v: %s)",
		commit, commit, err, strings.TrimSpace(string(out)))
}

// extract writes commit's tree into dir with git archive (no worktree,
// the repository untouched).
func extract(root, commit, dir string) error {
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var archiveErr, untarErr strings.Builder
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return fmt.Errorf("git archive %s: %w: %s", commit, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("tar -x of commit %s: %w: %s", commit, err, untarErr.String())
	}
	return nil
}

// TestReadVersions checks test/versions.txt and the reader's refusals.
func TestReadVersions(t *testing.T) {
	got, err := readVersions(versionsFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "N-2" || got[1].Name != "N-1" || !strings.HasPrefix(got[1].Why, "the skew rule") {
		t.Errorf("read %+v %+v", got[0], got[1])
	}
	dir := t.TempDir()
	c := strings.Repeat("a", 40)
	for _, tc := range []struct{ body, want string }{
		{"N-1 " + c + " why\n", "no line for version N-2"},
		{"N-1 " + c + "\n", "want NAME COMMIT WHY"},
		{"N-1 abc why\nN-2 " + c + " why\n", "want a full commit id"},
		{"N-1 " + c + " a\nN-1 " + c + " b\n", "given twice"},
		{"N-3 " + c + " a\nN-1 " + c + " b\nN-2 " + c + " c\n", "only N-1 and N-2"},
		{"M " + c + " a\n", "want N-1 or N-2"},
	} {
		path := filepath.Join(dir, "versions.txt")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readVersions(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}
