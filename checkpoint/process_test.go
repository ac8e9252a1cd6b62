package checkpoint_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/internal/atomicfile"
)

// child returns a command that runs this test binary as a child process in
// the given mode (see TestMain).
func child(t *testing.T, mode, dir string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envChild+"="+mode, envDir+"="+dir)
	cmd.Env = append(cmd.Env, extraEnv...)
	return cmd
}

func runLockChild(t *testing.T, dir string) string {
	t.Helper()
	out, err := child(t, "lock", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("lock child: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}

	// Another process cannot open the state dir.
	out := runLockChild(t, dir)
	if !strings.HasPrefix(out, "ERROR: ") || !strings.Contains(out, "state dir "+dir+" is locked") {
		t.Errorf("child while the lock is held: %q, want an error saying %s is locked", out, dir)
	}

	// Neither can another Store in this process.
	s2, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: testLogger(t, nil)})
	if err == nil {
		s2.Close()
		t.Fatal("a second Open in the same process succeeded")
	}
	if !errors.Is(err, checkpoint.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second Open: %v, want ErrLocked naming %s", err, dir)
	}
	// The failed Open did not break the first Store.
	if _, err := s.Save(newConfigMap("uid-a", "1")); err != nil {
		t.Errorf("Save after a failed second Open: %v", err)
	}

	// Close releases the lock.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out := runLockChild(t, dir); out != "OPENED" {
		t.Errorf("child after Close: %q, want OPENED", out)
	}
	s3, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s3.Close()
}

// TestCrashConsistency SIGKILLs a child that writes checkpoints and pointers
// in a loop at random moments, and checks after each kill that the state dir
// opens and that every file in it is whole: every checkpoint loads and
// verifies, both pointers decode, and what they point at loads.
//
// A SIGKILL tests the atomicity of the writes (rename over a complete,
// closed file), not their durability across a power loss: the page cache
// survives a killed process.
func TestCrashConsistency(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	dir := filepath.Join(t.TempDir(), "state")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var staleTemps, keysSeen int
	start := time.Now()
	for round := range rounds {
		cmd := child(t, "crash", dir, fmt.Sprintf("%s=%d", envRound, round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) != "READY" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: child said %q (%v), stderr:\n%s", round, line, err, stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(20_001)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v before it was killed; stderr:\n%s", round, err, stderr.String())
		}

		staleTemps += countTemps(t, dir)
		keysSeen += verifyStateDir(t, dir, round)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d kills in %v; %d stale temporary files found and removed by GC; %d checkpoints verified",
		rounds, time.Since(start).Round(time.Millisecond), staleTemps, keysSeen)
}

func countTemps(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// verifyStateDir opens dir after a crash and checks that everything in it is
// whole. It returns the number of checkpoints it verified.
func verifyStateDir(t *testing.T, dir string, round int) int {
	t.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir, ComponentVersion: "v1", Logger: quiet})
	if err != nil {
		t.Fatalf("round %d: Open after the kill: %v", round, err)
	}
	defer s.Close()
	keys, err := s.List()
	if err != nil {
		t.Fatalf("round %d: List: %v", round, err)
	}
	for _, k := range keys {
		cm, err := s.Load(k)
		if err != nil {
			t.Errorf("round %d: Load(%v): %v", round, k, err)
			continue
		}
		if err := checkCrashConfigMap(cm); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
	}
	for name, get := range map[string]func() (checkpoint.Pointer, error){"current": s.Current, "last-known-good": s.LastKnownGood} {
		p, err := get()
		if err != nil {
			t.Errorf("round %d: %s: %v", round, name, err)
			continue
		}
		k, ok := checkpoint.KeyFromSource(p.Source)
		if !ok {
			if name == "current" {
				t.Errorf("round %d: current is local; the child always sets a ConfigMap", round)
			}
			continue
		}
		if _, err := s.Load(k); err != nil {
			t.Errorf("round %d: %s points at %v, which does not load: %v", round, name, k, err)
		}
	}
	// A start leaves the temporary files of the interrupted write alone
	// (no start lists a directory); garbage collection removes them all.
	if _, err := s.GC(); err != nil {
		t.Errorf("round %d: GC: %v", round, err)
	}
	if n := countTemps(t, dir); n != 0 {
		t.Errorf("round %d: %d temporary files left after GC", round, n)
	}
	return len(keys)
}
