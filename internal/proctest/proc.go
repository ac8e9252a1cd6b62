package proctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// WaitTimeout bounds every wait of the real-process tests.
const WaitTimeout = 30 * time.Second

// RestartDelay is how long a RestartLoop waits before starting the binary
// again after it exited (systemd's RestartSec, shortened).
const RestartDelay = 20 * time.Millisecond

// SyncBuffer is a bytes.Buffer safe for one goroutine (or child process)
// writing and another reading; its zero value is empty and ready.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Proc is one process of the binary.
type Proc struct {
	cmd    *exec.Cmd
	pid    int
	stdout SyncBuffer
	stderr SyncBuffer
	done   chan struct{} // closed when the process has exited
	code   int           // exit code, valid after done; -1 when a signal ended it
}

// Start starts bin with args and env (added to the test's environment) in
// its own process group. The test's cleanup kills the group.
func Start(t testing.TB, bin string, args, env []string) *Proc {
	t.Helper()
	p, err := spawn(bin, args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func spawn(bin string, args, env []string) (*Proc, error) {
	p := &Proc{done: make(chan struct{})}
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

// PID is the process id.
func (p *Proc) PID() int { return p.pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Code is the exit code, -1 when a signal ended the process; it is valid
// once Done is closed.
func (p *Proc) Code() int { return p.code }

// Stdout is what the process wrote to stdout so far.
func (p *Proc) Stdout() string { return p.stdout.String() }

// Stderr is what the process wrote to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill ends the process group with SIGKILL and waits for the process.
func (p *Proc) Kill() {
	if !p.Exited() {
		// Negative pid: the process group, children included.
		if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
}

// Terminate sends SIGTERM and waits for the exit code.
func (p *Proc) Terminate(t testing.TB) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM pid %d: %v", p.pid, err)
	}
	select {
	case <-p.done:
		return p.code
	case <-time.After(WaitTimeout):
		t.Fatalf("pid %d did not exit within %v of SIGTERM\nstderr:\n%s", p.pid, WaitTimeout, p.stderr.String())
		return 0
	}
}

// ServingAddr returns the address from the "serving on" line, or "".
func (p *Proc) ServingAddr() string {
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		if addr, ok := strings.CutPrefix(line, "serving on "); ok {
			return addr
		}
	}
	return ""
}

// WaitServing waits for the "serving on" line and returns its address; it
// fails the test if the process exits first.
func (p *Proc) WaitServing(t testing.TB) string {
	t.Helper()
	WaitFor(t, "the serving line", func() (bool, string) {
		if p.Exited() {
			t.Fatalf("exited with code %d:\n%s", p.code, p.stderr.String())
		}
		return p.ServingAddr() != "", p.stdout.String()
	}, nil)
	return p.ServingAddr()
}

// RunToExit runs bin to completion and returns its exit code, stdout and
// stderr.
func RunToExit(t testing.TB, bin string, args ...string) (int, string, string) {
	t.Helper()
	p := Start(t, bin, args, nil)
	select {
	case <-p.done:
	case <-time.After(WaitTimeout):
		t.Fatalf("%s %v still runs after %v", bin, args, WaitTimeout)
	}
	return p.code, p.stdout.String(), p.stderr.String()
}

// ExpectStartError runs bin with args to completion and checks that it
// failed before serving: exit code 1, nothing on stdout, and on stderr an
// error, the text from the last occurrence of prefix (klog lines may come
// before it), that contains each of want. It returns that error text.
func ExpectStartError(t testing.TB, bin, prefix string, args, want []string) string {
	t.Helper()
	code, stdout, stderr := RunToExit(t, bin, args...)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing (it must not serve)", stdout)
	}
	i := strings.LastIndex(stderr, prefix)
	if i < 0 {
		t.Fatalf("no error on stderr:\n%s", stderr)
	}
	msg := stderr[i:]
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not contain %q:\n%s", w, msg)
		}
	}
	return msg
}

// RestartLoop runs the binary and starts it again whenever it exits,
// whatever the exit code, until the test ends (or stopAfter says so). It
// keeps every process it started, in order.
type RestartLoop struct {
	bin  string
	args []string
	// stopAfter, when set, is asked after every exit; true stops the loop
	// from starting the binary again.
	stopAfter func() bool

	mu      sync.Mutex
	env     []string
	procs   []*Proc
	err     error         // why the loop stopped on its own, if it did
	stopped chan struct{} // closed when the loop no longer starts anything
}

// StartLoop starts a RestartLoop of bin with args; stopAfter, when not
// nil, is asked after every exit, and true stops the loop from starting
// the binary again. The test's cleanup stops the loop and kills the
// process group of the running process, so nothing outlives the test.
func StartLoop(t testing.TB, bin string, args []string, stopAfter func() bool) *RestartLoop {
	t.Helper()
	l := &RestartLoop{bin: bin, args: args, stopAfter: stopAfter, stopped: make(chan struct{})}
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

// SetEnv sets environment entries (KEY=VALUE) for the processes started
// from now on.
func (l *RestartLoop) SetEnv(kv ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.env = append(l.env, kv...)
}

// All returns the processes started so far.
func (l *RestartLoop) All() []*Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Proc(nil), l.procs...)
}

// Failure returns why the loop stopped on its own, if it did.
func (l *RestartLoop) Failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Stopped is closed when the loop no longer starts anything.
func (l *RestartLoop) Stopped() <-chan struct{} { return l.stopped }

func (l *RestartLoop) loop(ctx context.Context) {
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
			p.Kill()
			return
		}
		if l.stopAfter != nil && l.stopAfter() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(RestartDelay):
		}
	}
}

// ExitCodes lists the exit code of each process, "running" for one that
// has not exited.
func ExitCodes(procs []*Proc) []string {
	out := make([]string, len(procs))
	for i, p := range procs {
		if p.Exited() {
			out[i] = fmt.Sprintf("exit %d", p.code)
		} else {
			out[i] = "running"
		}
	}
	return out
}

// DescribeProcs is the tail of each process's stderr, for failure messages.
func DescribeProcs(procs []*Proc) string {
	var b strings.Builder
	for i, p := range procs {
		state := "running"
		if p.Exited() {
			state = fmt.Sprintf("exit %d", p.code)
		}
		fmt.Fprintf(&b, "--- process %d (pid %d, %s), stderr tail:\n%s\n", i+1, p.pid, state, Tail(p.stderr.String(), 6))
	}
	return b.String()
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitFor polls cond until it holds or WaitTimeout passes; then it fails
// the test with what it waited for, the last reason cond gave, and more
// (when not nil).
func WaitFor(t testing.TB, what string, cond func() (bool, string), more func() string) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
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
			t.Fatalf("timed out after %v waiting for %s; last: %s\n%s", WaitTimeout, what, why, extra)
		}
		<-tick.C
	}
}
