package sourcetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/source/sourcetest"
)

// brokenEnv selects the broken Remote TestBrokenRemote checks; without it
// TestBrokenRemote is skipped.
const brokenEnv = "SOURCETEST_BROKEN"

// broken wraps a Fake and breaks one point of the Remote contract.
type broken struct {
	*sourcetest.Fake
	how string

	mu   sync.Mutex
	last source.Assignment // for "shares results"
}

func (b *broken) Assigned(ctx context.Context) (source.Assignment, error) {
	a, err := b.Fake.Assigned(ctx)
	switch b.how {
	case "plain errors":
		var ie *nodeapi.InvalidError
		if errors.As(err, &ie) {
			return source.Assignment{}, errors.New(ie.Message)
		}
	case "shares results":
		// Hands out one object as long as the resourceVersion stays: a
		// cache that gives its own copy away.
		b.mu.Lock()
		defer b.mu.Unlock()
		if err == nil && a.ConfigMap != nil && b.last.ConfigMap != nil &&
			b.last.ConfigMap.ResourceVersion == a.ConfigMap.ResourceVersion {
			return b.last, nil
		}
		b.last = a
	}
	return a, err
}

func (b *broken) Run(ctx context.Context, changed func()) error {
	first := true
	var wg sync.WaitGroup
	defer wg.Wait()
	switch b.how {
	case "no first call":
		return b.Fake.Run(ctx, func() {
			if !first {
				changed()
			}
			first = false
		})
	case "only the first call":
		return b.Fake.Run(ctx, func() {
			if first {
				changed()
			}
			first = false
		})
	case "overlapping calls":
		return b.Fake.Run(ctx, func() {
			wg.Add(1)
			go func() { defer wg.Done(); changed() }()
		})
	case "leaks a goroutine":
		go func() { select {} }()
	case "error when ctx ends":
		_ = b.Fake.Run(ctx, changed)
		return ctx.Err()
	case "returns early":
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_ = b.Fake.Run(rctx, func() { changed(); cancel() })
		return nil
	case "calls after return":
		err := b.Fake.Run(ctx, changed)
		// A watch that is never stopped: it calls on every later change.
		go func() { _ = b.Fake.Run(context.Background(), changed) }()
		return err
	}
	return b.Fake.Run(ctx, changed)
}

// TestBrokenRemote runs the conformance test against the broken Remote
// named by $SOURCETEST_BROKEN: it must fail. TestConformanceCatches runs it.
func TestBrokenRemote(t *testing.T) {
	how := os.Getenv(brokenEnv)
	if how == "" {
		t.Skip("run by TestConformanceCatches")
	}
	sourcetest.RunRemoteConformance(t, sourcetest.Harness{
		PayloadKey: "kubelet",
		Timeout:    500 * time.Millisecond,
		New: func(*testing.T) sourcetest.Backend {
			f := sourcetest.NewFake("kubelet")
			return brokenBackend{fakeBackend{f}, &broken{Fake: f, how: how}}
		},
	})
}

type brokenBackend struct {
	fakeBackend
	remote *broken
}

func (b brokenBackend) Remote() source.Remote { return b.remote }

// TestConformanceCatches checks that the conformance test fails each
// broken Remote, at the contract point it breaks, with a message that
// says what is wrong. Each runs in a child test process.
func TestConformanceCatches(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary once per broken Remote (a few seconds)")
	}
	for _, tc := range []struct {
		how, run, want string
	}{
		{"plain errors", "Assigned/invalid/uid_mismatch", "want *nodeapi.InvalidError"},
		{"shares results", "Assigned/result_is_the_caller's", "Assigned: ConfigMap data (-want +got)"},
		{"no first call", "Run/calls_changed_once_it_watches/assigned", "no changed call saw anything (any result will do) within 500ms"},
		{"only the first call", "Run/calls_changed_after_each_change", "no changed call saw conformance-a/config-a uid=uid-a kubelet=a2 within 500ms"},
		{"overlapping calls", "Run/calls_never_overlap", "changed was called while another call had not returned"},
		{"leaks a goroutine", "Run/returns_nil_when_its_context_ends", "goroutines before Run, still"},
		{"error when ctx ends", "Run/returns_nil_when_its_context_ends", "Run returned context canceled when its context ended; want nil"},
		{"returns early", "Run/calls_changed_after_each_change", "Run returned <nil> before its context ended"},
		{"calls after return", "Run/returns_nil_when_its_context_ends", "changed was called after Run returned"},
	} {
		t.Run(tc.how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pattern := "^TestBrokenRemote$"
			for _, part := range strings.Split(tc.run, "/") {
				pattern += "/^" + part + "$"
			}
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.how)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the conformance test did not fail (%v):\n%s", err, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenRemote/"+tc.run) {
				t.Errorf("want a failure of %s:\n%s", tc.run, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("want %q in the output:\n%s", tc.want, out)
			}
		})
	}
}
