package damage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/internal/testenv"
)

// Nobody is the uid and gid a test runs as with AsUser: an unprivileged
// user that owns nothing, like a component that does not run as root.
const Nobody = 65534

// envChild selects, in a test binary started by AsUser, the test to run as
// the other user; envArg carries the parent's argument to it.
const (
	envChild = "DYNCONFIG_DAMAGE_AS_USER_TEST"
	envArg   = "DYNCONFIG_DAMAGE_AS_USER_ARG"
)

// InChild reports whether this process is the child AsUser started for t,
// and returns the argument the parent gave it. A test that needs a damage
// root cannot make (a file the component's user cannot read, a directory
// it cannot search) is written as
//
//	if arg, ok := damage.InChild(t); ok {
//		... the part that runs as the unprivileged user, on arg ...
//		return
//	}
//	... as root: prepare the damage under a dir, chown it ...
//	damage.AsUser(t, damage.Nobody, dir, 30*time.Second)
//
// Permission bits do not stop root, so this is how EACCES is made real.
func InChild(t *testing.T) (arg string, ok bool) {
	if os.Getenv(envChild) != t.Name() {
		return "", false
	}
	return os.Getenv(envArg), true
}

// AsUser runs test t again in a child process of this test binary with
// the given uid and gid (which needs root: it skips t otherwise), with arg
// for InChild, and fails t if the child fails or has not ended within
// timeout (its whole process group is then killed: a hang is a failure,
// not a stuck test). The test binary is copied to a directory of the test
// the user can read. The child's output is logged.
func AsUser(t *testing.T, uid int, arg string, timeout time.Duration) {
	t.Helper()
	testenv.Root(t, "to run a child as another user")
	bin := userBinary(t)
	pattern := make([]string, 0, 4)
	for _, part := range strings.Split(t.Name(), "/") {
		pattern = append(pattern, "^"+regexp.QuoteMeta(part)+"$")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run="+strings.Join(pattern, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"="+t.Name(), envArg+"="+arg)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("child as uid %d (%v):\n%s", uid, time.Since(start).Round(time.Millisecond), out.String())
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the child running as uid %d did not end within %v: it hangs", uid, timeout)
	case err != nil:
		t.Fatalf("the child running as uid %d failed: %v", uid, err)
	case !strings.Contains(out.String(), "--- PASS: "+t.Name()):
		t.Fatalf("the child running as uid %d did not run %s", uid, t.Name())
	}
}

// userBinary copies the running test binary to a directory of the test
// that others may read (the go command's build directories are private to
// root); the test's cleanup removes it.
func userBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	if err := copyFile(self, bin, 0o755); err != nil {
		t.Fatalf("copy the test binary for another user: %v", err)
	}
	return bin
}

func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// ChownTree gives dir and everything under it to uid (and gid uid), and
// makes every parent of dir searchable by others, so that a child started
// by AsUser reaches it. Only root can.
func ChownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); p != "/" && p != "."; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ReadOnlyMount makes dir a read-only bind mount of itself, a real EROFS as
// a state dir on a read-only mount gives, and returns the function that
// undoes it (also run at the end of the test; a second call does nothing).
// It needs root, and skips t otherwise.
func ReadOnlyMount(t testing.TB, dir string) (unmount func()) {
	t.Helper()
	testenv.Root(t, "to bind-mount a directory read-only")
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		testenv.Missing(t, "a bind mount of "+dir+" ("+err.Error()+")", "CAP_SYS_ADMIN in the test's mount namespace")
	}
	var once sync.Once
	unmount = func() {
		once.Do(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	t.Cleanup(unmount)
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		testenv.Missing(t, "a read-only remount of "+dir+" ("+err.Error()+")", "CAP_SYS_ADMIN in the test's mount namespace")
	}
	probe := filepath.Join(dir, ".probe")
	if err := os.WriteFile(probe, nil, 0o600); !errors.Is(err, syscall.EROFS) {
		_ = os.Remove(probe)
		t.Fatalf("the read-only mount %s is writable: %v", dir, err)
	}
	return unmount
}
