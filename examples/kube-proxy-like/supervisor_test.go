package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real-process tests build this command once per test run and drive the
// binary: alone, or under restartLoop, a small stand-in for systemd's
// Restart=always. They are skipped with -short.

// builtBinary is the binary built for the tests, once; TestMain removes
// its directory.
type builtBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// testBinary is the binary shared by the tests of this package.
var testBinary builtBinary

func TestMain(m *testing.M) {
	code := m.Run()
	if testBinary.dir != "" {
		_ = os.RemoveAll(testBinary.dir)
	}
	os.Exit(code)
}

// buildBinary builds this command with `go build` the first time it is
// called and returns its path; it skips the test under -short.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("real-process test: skipped with -short")
	}
	testBinary.once.Do(func() {
		testBinary.dir, testBinary.err = os.MkdirTemp("", "kube-proxy-like-test-")
		if testBinary.err != nil {
			return
		}
		testBinary.path = filepath.Join(testBinary.dir, "kube-proxy-like")
		// go test puts $GOROOT/bin first on the PATH of the test binary.
		out, err := exec.Command("go", "build", "-o", testBinary.path, ".").CombinedOutput()
		if err != nil {
			testBinary.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if testBinary.err != nil {
		t.Fatal(testBinary.err)
	}
	return testBinary.path
}

// waitTimeout bounds every wait of the real-process tests.
const waitTimeout = 30 * time.Second

// restartDelay is how long restartLoop waits before starting the binary
// again after it exited (systemd's RestartSec, shortened).
const restartDelay = 20 * time.Millisecond

// syncBuffer is a bytes.Buffer safe for a writing child and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is one process of the binary.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{} // closed when the process has exited
	code   int           // exit code, valid after done; -1 when a signal ended it
}

// startProc starts bin with args and env (added to the test's environment)
// in its own process group. The test's cleanup kills the group.
func startProc(t *testing.T, bin string, args, env []string) *proc {
	t.Helper()
	p, err := spawn(bin, args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

func spawn(bin string, args, env []string) (*proc, error) {
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		_ = p.cmd.Wait() // the exit code is in ProcessState
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process group with SIGKILL and waits for the process.
func (p *proc) kill() {
	if !p.exited() {
		// Negative pid: the process group, children included.
		if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
}

// terminate sends SIGTERM and waits for the exit code.
func (p *proc) terminate(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM pid %d: %v", p.pid, err)
	}
	select {
	case <-p.done:
		return p.code
	case <-time.After(waitTimeout):
		t.Fatalf("pid %d did not exit within %v of SIGTERM\nstderr:\n%s", p.pid, waitTimeout, p.stderr.String())
		return 0
	}
}

// servingAddr returns the address from the "serving on" line, or "".
func (p *proc) servingAddr() string {
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		if addr, ok := strings.CutPrefix(line, "serving on "); ok {
			return addr
		}
	}
	return ""
}

// restartLoop runs the binary and starts it again whenever it exits,
// whatever the exit code, until the test ends (or stopAfter says so). It
// keeps every process it started, in order.
type restartLoop struct {
	bin  string
	args []string
	// stopAfter, when set, is asked after every exit; true stops the loop
	// from starting the binary again.
	stopAfter func() bool

	mu      sync.Mutex
	env     []string
	procs   []*proc
	err     error         // why the loop stopped on its own, if it did
	stopped chan struct{} // closed when the loop no longer starts anything
}

// startLoop starts a restartLoop; the test's cleanup stops it and kills
// the process group of the running process, so nothing outlives the test.
func startLoop(t *testing.T, bin string, args []string, stopAfter func() bool) *restartLoop {
	t.Helper()
	l := &restartLoop{bin: bin, args: args, stopAfter: stopAfter, stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		l.loop(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return l
}

// setEnv sets environment entries (KEY=VALUE) for the processes started
// from now on.
func (l *restartLoop) setEnv(kv ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.env = append(l.env, kv...)
}

// all returns the processes started so far.
func (l *restartLoop) all() []*proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*proc(nil), l.procs...)
}

// failure returns why the loop stopped on its own, if it did.
func (l *restartLoop) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *restartLoop) loop(ctx context.Context) {
	defer close(l.stopped)
	for ctx.Err() == nil {
		l.mu.Lock()
		env := append([]string(nil), l.env...)
		l.mu.Unlock()
		p, err := spawn(l.bin, l.args, env)
		if err != nil {
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		l.procs = append(l.procs, p)
		l.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			p.kill()
			return
		}
		if l.stopAfter != nil && l.stopAfter() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

// exitCodes lists the exit code of each process, "running" for one that
// has not exited.
func exitCodes(procs []*proc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		if p.exited() {
			out[i] = fmt.Sprintf("exit %d", p.code)
		} else {
			out[i] = "running"
		}
	}
	return out
}

// describeProcs is the tail of each process's stderr, for failure messages.
func describeProcs(procs []*proc) string {
	var b strings.Builder
	for i, p := range procs {
		state := "running"
		if p.exited() {
			state = fmt.Sprintf("exit %d", p.code)
		}
		fmt.Fprintf(&b, "--- process %d (pid %d, %s), stderr tail:\n%s\n", i+1, p.pid, state, tail(p.stderr.String(), 6))
	}
	return b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond until it holds or waitTimeout passes; then it fails
// the test with what it waited for, the last reason cond gave, and more.
func waitFor(t *testing.T, what string, cond func() (bool, string), more func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			extra := ""
			if more != nil {
				extra = more()
			}
			t.Fatalf("timed out after %v waiting for %s; last: %s\n%s", waitTimeout, what, why, extra)
		}
		<-tick.C
	}
}
