package proctest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestKillEndsTheProcessGroup starts a shell with a child of its own and
// checks that Kill ends the child too, not only the shell. The child's
// output does not go to the shell's pipes, so nothing but the group kill
// can end it before the wait times out.
func TestKillEndsTheProcessGroup(t *testing.T) {
	bin, args := sh(`sleep 600 >/dev/null 2>&1 & echo "child $!"; wait`)
	p := Start(t, bin, args, nil)
	var child int
	WaitFor(t, "the child's pid", func() (bool, string) {
		_, after, ok := strings.Cut(p.Stdout(), "child ")
		if !ok || !strings.HasSuffix(after, "\n") {
			return false, p.Stdout()
		}
		n, err := strconv.Atoi(strings.TrimSpace(after))
		child = n
		return err == nil, fmt.Sprint(err)
	}, nil)
	t.Cleanup(func() {
		if _, gone := procState(child); !gone {
			_ = syscall.Kill(child, syscall.SIGKILL) // only if the test failed
		}
	})
	p.Kill()
	if !p.Exited() {
		t.Fatal("Kill returned before the process exited")
	}
	WaitFor(t, fmt.Sprintf("the end of child pid %d", child), func() (bool, string) {
		state, gone := procState(child)
		return gone || state == "Z", "state " + state
	}, nil)
}

// procState is the state letter of pid in /proc; gone is true when there
// is no such process.
func procState(pid int) (state string, gone bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", true
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+3 > len(data) {
		return "?", false
	}
	return string(data[i+2]), false
}
