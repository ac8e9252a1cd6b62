package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// restartDelay is how long the supervisor waits before restarting an
// exited component: systemd's default RestartSec.
const restartDelay = 100 * time.Millisecond

// stopTimeout is how long a component gets to stop after SIGTERM before it
// is killed.
const stopTimeout = 10 * time.Second

// procEvent is a component process starting or exiting.
type procEvent struct {
	PID    int
	Exited bool
	// Code is the exit code; -1 when a signal ended the process.
	Code int
}

// String says what happened in the supervisor's words.
func (e procEvent) String() string {
	switch {
	case !e.Exited:
		return fmt.Sprintf("pid %d started", e.PID)
	case e.Code == 0:
		return fmt.Sprintf("pid %d exited with code 0 (restart to apply a new config)", e.PID)
	case e.Code > 0:
		return fmt.Sprintf("pid %d exited with code %d (crash)", e.PID, e.Code)
	}
	return fmt.Sprintf("pid %d was killed by a signal", e.PID)
}

// supervisor runs the component as a child process and restarts it
// whenever it exits, like systemd with Restart=always. It records every
// start and exit.
type supervisor struct {
	exe     string   // the program to run
	env     []string // its environment
	logPath string   // receives its stdout and stderr

	mu     sync.Mutex
	live   int // pid of the running component, 0 between runs
	events []procEvent
	err    error // why the supervisor stopped early, if it did
}

// livePID returns the pid of the running component, or 0.
func (s *supervisor) livePID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// eventsFrom returns the events from index i on, and the index after them.
func (s *supervisor) eventsFrom(i int) ([]procEvent, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]procEvent(nil), s.events[i:]...), len(s.events)
}

// failure returns why the supervisor stopped before it was told to.
func (s *supervisor) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *supervisor) record(e procEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	if e.Exited {
		s.live = 0
	} else {
		s.live = e.PID
	}
}

// run starts the component and restarts it after every exit until ctx
// ends; then it stops the running component (SIGTERM, then SIGKILL after
// stopTimeout) and returns. It returns an error only when it cannot start
// the component at all; failure reports it too.
func (s *supervisor) run(ctx context.Context) error {
	err := s.loop(ctx)
	if err != nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return err
}

func (s *supervisor) loop(ctx context.Context) error {
	log, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open component log: %w", err)
	}
	defer log.Close()
	// Every component reads this pipe: when the supervisor ends, for
	// whatever reason, the write end closes and the component stops.
	stdin, keepalive, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("create stdin pipe: %w", err)
	}
	defer stdin.Close()
	defer keepalive.Close()

	for ctx.Err() == nil {
		cmd := exec.Command(s.exe)
		cmd.Env = s.env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, log, log
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start component %s: %w", s.exe, err)
		}
		s.record(procEvent{PID: cmd.Process.Pid})
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait() // the exit code is in cmd.ProcessState
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			stop(cmd, done)
		}
		s.record(procEvent{PID: cmd.Process.Pid, Exited: true, Code: cmd.ProcessState.ExitCode()})

		t := time.NewTimer(restartDelay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// stop ends cmd: SIGTERM first, SIGKILL if it has not exited in time.
func stop(cmd *exec.Cmd, done <-chan struct{}) {
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = cmd.Process.Kill()
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
}
