package proctest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sh runs script with /bin/sh, as a Proc or under a RestartLoop.
func sh(script string) (string, []string) { return "/bin/sh", []string{"-c", script} }

func TestRunToExit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		script     string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "exit 0", script: "echo out", wantCode: 0, wantStdout: "out\n"},
		{name: "exit 3 with stderr", script: "echo out; echo err >&2; exit 3", wantCode: 3, wantStdout: "out\n", wantStderr: "err\n"},
		{name: "killed by a signal", script: "kill -KILL $$", wantCode: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, args := sh(tc.script)
			code, stdout, stderr := RunToExit(t, bin, args...)
			if code != tc.wantCode || stdout != tc.wantStdout || stderr != tc.wantStderr {
				t.Errorf("RunToExit = %d, %q, %q; want %d, %q, %q", code, stdout, stderr, tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// TestServingAndTerminate waits for a "serving on" line and ends the
// process with SIGTERM: a process that handles it exits with its own code,
// one that does not is ended by the signal (-1).
func TestServingAndTerminate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   string
		wantCode int
	}{
		{name: "handles SIGTERM", script: `trap 'exit 0' TERM; echo "serving on 127.0.0.1:9"; while :; do sleep 0.01; done`, wantCode: 0},
		{name: "does not handle it", script: `echo "starting"; echo "serving on 127.0.0.1:9"; exec sleep 60`, wantCode: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, args := sh(tc.script)
			p := Start(t, bin, args, nil)
			if addr := p.WaitServing(t); addr != "127.0.0.1:9" {
				t.Errorf("WaitServing = %q, want 127.0.0.1:9", addr)
			}
			if p.Exited() {
				t.Fatal("exited before SIGTERM")
			}
			if code := p.Terminate(t); code != tc.wantCode {
				t.Errorf("Terminate = %d, want %d", code, tc.wantCode)
			}
			if !p.Exited() || p.Code() != tc.wantCode {
				t.Errorf("after Terminate: Exited %t, Code %d", p.Exited(), p.Code())
			}
			select {
			case <-p.Done():
			default:
				t.Error("Done is not closed after Terminate")
			}
		})
	}
}

func TestStartPassesEnv(t *testing.T) {
	bin, args := sh(`echo "$PROCTEST_A $PROCTEST_B"`)
	p := Start(t, bin, args, []string{"PROCTEST_A=1", "PROCTEST_B=two"})
	<-p.Done()
	if got := p.Stdout(); got != "1 two\n" {
		t.Errorf("stdout %q, want the environment entries", got)
	}
	if p.PID() <= 0 {
		t.Errorf("PID %d", p.PID())
	}
}

// TestRestartLoop restarts a process that exits with $CODE until stopAfter
// says stop; the environment set after the first exit applies from the
// second start on.
func TestRestartLoop(t *testing.T) {
	bin, args := sh(`echo "run $CODE"; exit ${CODE:-0}`)
	var exits atomic.Int32
	var l *RestartLoop
	started := make(chan struct{}) // closed once l is set
	l = StartLoop(t, bin, args, func() bool {
		switch exits.Add(1) {
		case 1:
			<-started
			l.SetEnv("CODE=4")
			return false
		case 2:
			return false
		default:
			return true
		}
	})
	close(started)
	<-l.Stopped()
	procs := l.All()
	if diff := cmp.Diff([]string{"exit 0", "exit 4", "exit 4"}, ExitCodes(procs)); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
	var outs []string
	for _, p := range procs {
		outs = append(outs, p.Stdout())
	}
	if diff := cmp.Diff([]string{"run \n", "run 4\n", "run 4\n"}, outs); diff != "" {
		t.Errorf("stdout of each start (-want +got):\n%s", diff)
	}
	if err := l.Failure(); err != nil {
		t.Errorf("Failure = %v, want nil: stopAfter stopped the loop", err)
	}
	d := DescribeProcs(procs)
	for i, p := range procs {
		if want := fmt.Sprintf("--- process %d (pid %d, exit ", i+1, p.PID()); !strings.Contains(d, want) {
			t.Errorf("DescribeProcs lacks process %d (pid %d):\n%s", i+1, p.PID(), d)
		}
	}
}

func TestRestartLoopStopsWhenStartFails(t *testing.T) {
	l := StartLoop(t, "/nonexistent/proctest-binary", nil, nil)
	<-l.Stopped()
	if err := l.Failure(); err == nil || !strings.Contains(err.Error(), "/nonexistent/proctest-binary") {
		t.Errorf("Failure = %v, want an error naming the binary", err)
	}
	if n := len(l.All()); n != 0 {
		t.Errorf("%d processes started, want none", n)
	}
}

// TestRestartLoopCleanupKillsTheRunningProcess runs a loop in a subtest
// and checks that the subtest's cleanup ended the running process.
func TestRestartLoopCleanupKillsTheRunningProcess(t *testing.T) {
	var p *Proc
	t.Run("loop", func(t *testing.T) {
		bin, args := sh(`echo "serving on x"; exec sleep 60`)
		l := StartLoop(t, bin, args, nil)
		WaitFor(t, "the first start", func() (bool, string) {
			procs := l.All()
			return len(procs) == 1 && procs[0].ServingAddr() == "x", DescribeProcs(procs)
		}, nil)
		p = l.All()[0]
	})
	if !p.Exited() || p.Code() != -1 {
		t.Errorf("after the subtest: Exited %t, Code %d; want killed by a signal", p.Exited(), p.Code())
	}
}

func TestExitCodesAndTail(t *testing.T) {
	done := &Proc{done: make(chan struct{}), code: 2}
	close(done.done)
	running := &Proc{done: make(chan struct{})}
	if diff := cmp.Diff([]string{"exit 2", "running"}, ExitCodes([]*Proc{done, running})); diff != "" {
		t.Errorf("ExitCodes (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{s: "a\nb\nc\n", n: 2, want: "b\nc"},
		{s: "a\nb", n: 5, want: "a\nb"},
		{s: "", n: 3, want: ""},
	} {
		if got := Tail(tc.s, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
