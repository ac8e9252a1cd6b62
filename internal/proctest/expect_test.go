package proctest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recordingTB records the failures of a helper under test; Fatalf ends
// the goroutine as testing.T does. Everything else goes to the real test.
type recordingTB struct {
	testing.TB
	failures []string
	fatal    bool
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit()
}

// TestExpectStartError runs shell scripts that fail as a component must
// (and ways they do not) and checks what ExpectStartError reports.
func TestExpectStartError(t *testing.T) {
	for _, tc := range []struct {
		name         string
		script       string
		want         []string
		wantFailures []string
		wantFatal    bool
		wantMsg      string
	}{{
		name:    "the error after klog lines",
		script:  `echo "thing: logged earlier" >&2; echo "thing: bad field x in f.yaml" >&2; exit 1`,
		want:    []string{"field x", "f.yaml"},
		wantMsg: "thing: bad field x in f.yaml\n",
	}, {
		name:         "exit 0 and output",
		script:       `echo "serving on x"; echo "thing: oops" >&2`,
		want:         []string{"oops"},
		wantFailures: []string{"exit code 0, want 1", `stdout "serving on x\n", want nothing (it must not serve)`},
		wantMsg:      "thing: oops\n",
	}, {
		name:         "an error that lacks a wanted text",
		script:       `echo "thing: bad" >&2; exit 1`,
		want:         []string{"bad", "field"},
		wantFailures: []string{"error does not contain \"field\":\nthing: bad\n"},
		wantMsg:      "thing: bad\n",
	}, {
		name:         "no error line",
		script:       `echo "other: bad" >&2; exit 1`,
		wantFailures: []string{"no error on stderr:\nother: bad\n"},
		wantFatal:    true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			var msg string
			done := make(chan struct{})
			go func() {
				defer close(done)
				bin, args := sh(tc.script)
				msg = ExpectStartError(rec, bin, "thing: ", args, tc.want)
			}()
			<-done
			if diff := cmp.Diff(tc.wantFailures, rec.failures); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
			if rec.fatal != tc.wantFatal || msg != tc.wantMsg {
				t.Errorf("fatal %t, message %q; want %t, %q", rec.fatal, msg, tc.wantFatal, tc.wantMsg)
			}
		})
	}
}
