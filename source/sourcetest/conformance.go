package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
)

// DefaultTimeout bounds each wait of RunRemoteConformance when
// Harness.Timeout is zero. Reaching it is a failure, never a pass.
const DefaultTimeout = 30 * time.Second

// overlapWindow is how long the overlap check holds a changed call while
// changes happen, giving an implementation that would call concurrently
// the chance to do so.
const overlapWindow = 200 * time.Millisecond

// settlePoll is how often a wait for goroutines to end looks again.
const settlePoll = 5 * time.Millisecond

// Harness is what RunRemoteConformance needs from the test of one Remote
// implementation.
type Harness struct {
	// New returns a new Backend: a Remote under test that reads a world of
	// its own with no ConfigMap and the empty assignment. Every subtest
	// calls it once and may change the world through it. Required.
	New func(t *testing.T) Backend
	// PayloadKey is the data key the Remote reads when the assignment
	// names none. Required.
	PayloadKey string
	// Fixed is set for a Remote whose assignment is always the ConfigMap
	// named here, at whatever UID it has (source.FixedSource). The test
	// then never calls Backend.Assign and skips what only an assignment
	// can express: the empty assignment, an incomplete or all-nil
	// reference, a uid mismatch and a named payload key.
	Fixed *k8stypes.NamespacedName
	// Timeout bounds each wait for the Remote: for a changed call that
	// sees a change, for Run to return, for its goroutines to end.
	// Default DefaultTimeout.
	Timeout time.Duration
}

// Backend is one Remote under test and the world it reads. Its methods
// report their own failures through t.
type Backend interface {
	// Remote returns the Remote under test, the same one on every call.
	Remote() source.Remote
	// PutConfigMap creates the ConfigMap cm.Namespace/cm.Name with cm's
	// UID and Data, or replaces it (an edit in place when the UID is the
	// same). As an API server does, it must give every version it stores
	// a resourceVersion of its own: cm carries none.
	PutConfigMap(t *testing.T, cm *corev1.ConfigMap)
	// DeleteConfigMap deletes the ConfigMap namespace/name, which exists.
	DeleteConfigMap(t *testing.T, namespace, name string)
	// Assign makes src the assignment: nil is the empty assignment; src
	// may be invalid (all nil, fields missing). Not called when
	// Harness.Fixed is set.
	Assign(t *testing.T, src *corev1.NodeConfigSource)
}

// RunRemoteConformance checks, in subtests, that the Remote h builds keeps
// the documented contract of source.Remote:
//
//   - Assigned resolves an assignment to its source, completed with the
//     ConfigMap's resourceVersion and the payload key (the assignment's,
//     else Harness.PayloadKey), and to the ConfigMap object itself, whole,
//     with its kind and apiVersion, as a copy the caller may change; an
//     edit in place is a new resourceVersion;
//   - the empty assignment resolves to the zero Assignment, without error;
//   - every invalid assignment is a *nodeapi.InvalidError, with the
//     proposal's words, and a zero Assignment: all subfields nil; uid,
//     namespace or name missing; a uid that is not the ConfigMap's; a
//     ConfigMap that does not exist (never created, or deleted); a payload
//     key the ConfigMap does not hold;
//   - Run calls changed once after it starts watching, in every state
//     (assigned, empty, invalid), and a change made between an earlier
//     Assigned and Run is seen by that call;
//   - Run calls changed after every change of the assignment and every
//     edit, deletion or re-creation of the ConfigMap it names, each seen by
//     Assigned within Harness.Timeout;
//   - calls of changed never overlap, even while one blocks;
//   - Run returns nil when its context ends (also when it has ended
//     before Run starts), within Harness.Timeout, calls nothing after it
//     has returned, and leaves no goroutine behind.
//
// Run's subtests count goroutines process-wide: do not run them in
// parallel with other tests.
func RunRemoteConformance(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.PayloadKey == "" {
		t.Fatal("sourcetest: Harness.New and Harness.PayloadKey are required")
	}
	if h.Timeout == 0 {
		h.Timeout = DefaultTimeout
	}
	c := &conformance{h: h}
	if h.Fixed != nil {
		c.a = *h.Fixed
	} else {
		c.a = k8stypes.NamespacedName{Namespace: "conformance-a", Name: "config-a"}
		c.b = k8stypes.NamespacedName{Namespace: "conformance-b", Name: "config-b"}
	}
	t.Run("Assigned", func(t *testing.T) {
		t.Run("resolves the assignment", c.testResolves)
		t.Run("resolves a named payload key", c.testNamedKey)
		t.Run("result is the caller's", c.testResultIsCallers)
		t.Run("edit in place is a new resourceVersion", c.testEdit)
		t.Run("empty assignment", c.testEmpty)
		t.Run("invalid", c.testInvalid)
	})
	t.Run("Run", func(t *testing.T) {
		t.Run("calls changed once it watches", c.testFirstCall)
		t.Run("first call sees changes made before Run", c.testChangeBeforeRun)
		t.Run("calls changed after each change", c.testChanges)
		t.Run("calls never overlap", c.testNoOverlap)
		t.Run("returns nil when its context ends", c.testEnds)
		t.Run("context ended before Run", c.testEndedBefore)
	})
}

type conformance struct {
	h Harness
	// a is the ConfigMap the tests assign (Harness.Fixed when set); b
	// another one (unset with Harness.Fixed).
	a, b k8stypes.NamespacedName
}

func (c *conformance) fixed() bool { return c.h.Fixed != nil }

func (c *conformance) skipIfFixed(t *testing.T) {
	t.Helper()
	if c.fixed() {
		t.Skip("the Remote's assignment is fixed (Harness.Fixed)")
	}
}

// configMap is the ConfigMap n with uid, holding value under the payload
// key and under "alt".
func (c *conformance) configMap(n k8stypes.NamespacedName, uid, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name, UID: k8stypes.UID(uid)},
		Data:       map[string]string{c.h.PayloadKey: value, "alt": "alt-" + value},
	}
}

func ref(n k8stypes.NamespacedName, uid, key string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: n.Namespace, Name: n.Name, UID: k8stypes.UID(uid), KubeletConfigKey: key,
	}}
}

// put creates or replaces the ConfigMap n with uid and value.
func (c *conformance) put(t *testing.T, b Backend, n k8stypes.NamespacedName, uid, value string) {
	t.Helper()
	b.PutConfigMap(t, c.configMap(n, uid, value))
}

func (c *conformance) assign(t *testing.T, b Backend, src *corev1.NodeConfigSource) {
	t.Helper()
	if c.fixed() {
		t.Fatal("sourcetest: bug: Assign with a fixed assignment")
	}
	b.Assign(t, src)
}

// setUp returns a new backend where the ConfigMap a (uid-a, value a1) is
// assigned.
func (c *conformance) setUp(t *testing.T) Backend {
	t.Helper()
	b := c.h.New(t)
	c.put(t, b, c.a, "uid-a", "a1")
	if !c.fixed() {
		c.assign(t, b, ref(c.a, "uid-a", ""))
	}
	return b
}

// checkResolved checks that a is n (with uid) holding value under key, as
// Assigned must return it, and returns its resourceVersion.
func (c *conformance) checkResolved(t *testing.T, a source.Assignment, err error, n k8stypes.NamespacedName, uid, key, value string) string {
	t.Helper()
	if err != nil {
		t.Fatalf("Assigned error: %v; want %s (uid %s)", err, n, uid)
	}
	if a.Source == nil || a.ConfigMap == nil {
		t.Fatalf("Assigned = %+v; want %s (uid %s) in Source and ConfigMap", a, n, uid)
	}
	rv := a.ConfigMap.ResourceVersion
	if rv == "" {
		t.Error("Assigned: the ConfigMap has no resourceVersion")
	}
	wantSrc := ref(n, uid, key)
	wantSrc.ConfigMap.ResourceVersion = rv
	if diff := cmp.Diff(wantSrc, a.Source); diff != "" {
		t.Errorf("Assigned: Source (-want +got):\n%s", diff)
	}
	want := c.configMap(n, uid, value)
	got := a.ConfigMap
	if got.Kind != "ConfigMap" || got.APIVersion != "v1" {
		t.Errorf("Assigned: ConfigMap kind %q, apiVersion %q; want ConfigMap, v1 (it is checkpointed whole)", got.Kind, got.APIVersion)
	}
	if got.Namespace != want.Namespace || got.Name != want.Name || got.UID != want.UID {
		t.Errorf("Assigned: ConfigMap %s/%s uid %s; want %s/%s uid %s", got.Namespace, got.Name, got.UID, want.Namespace, want.Name, want.UID)
	}
	if diff := cmp.Diff(want.Data, got.Data); diff != "" {
		t.Errorf("Assigned: ConfigMap data (-want +got):\n%s", diff)
	}
	return rv
}

func (c *conformance) testResolves(t *testing.T) {
	b := c.setUp(t)
	a, err := b.Remote().Assigned(context.Background())
	c.checkResolved(t, a, err, c.a, "uid-a", c.h.PayloadKey, "a1")
}

func (c *conformance) testNamedKey(t *testing.T) {
	c.skipIfFixed(t)
	b := c.setUp(t)
	c.assign(t, b, ref(c.a, "uid-a", "alt"))
	a, err := b.Remote().Assigned(context.Background())
	c.checkResolved(t, a, err, c.a, "uid-a", "alt", "a1")
}

func (c *conformance) testResultIsCallers(t *testing.T) {
	b := c.setUp(t)
	ctx := context.Background()
	first, err := b.Remote().Assigned(ctx)
	rv := c.checkResolved(t, first, err, c.a, "uid-a", c.h.PayloadKey, "a1")
	first.ConfigMap.Data[c.h.PayloadKey] = "changed by the caller"
	first.ConfigMap.Name = "changed"
	first.Source.ConfigMap.Name = "changed"
	again, err := b.Remote().Assigned(ctx)
	if got := c.checkResolved(t, again, err, c.a, "uid-a", c.h.PayloadKey, "a1"); got != rv {
		t.Errorf("resourceVersion %q, then %q without a change", rv, got)
	}
}

func (c *conformance) testEdit(t *testing.T) {
	b := c.setUp(t)
	ctx := context.Background()
	a, err := b.Remote().Assigned(ctx)
	rv := c.checkResolved(t, a, err, c.a, "uid-a", c.h.PayloadKey, "a1")
	c.put(t, b, c.a, "uid-a", "a2")
	a, err = b.Remote().Assigned(ctx)
	if rv2 := c.checkResolved(t, a, err, c.a, "uid-a", c.h.PayloadKey, "a2"); rv2 == rv {
		t.Errorf("an edit kept resourceVersion %q", rv)
	}
}

func (c *conformance) testEmpty(t *testing.T) {
	c.skipIfFixed(t)
	b := c.h.New(t)
	ctx := context.Background()
	checkEmpty := func(when string) {
		t.Helper()
		a, err := b.Remote().Assigned(ctx)
		if err != nil || a.Source != nil || a.ConfigMap != nil {
			t.Errorf("%s: Assigned = %+v, %v; want the empty assignment, nil", when, a, err)
		}
	}
	checkEmpty("new backend")
	c.put(t, b, c.a, "uid-a", "a1")
	c.assign(t, b, ref(c.a, "uid-a", ""))
	c.assign(t, b, nil)
	checkEmpty("assigned, then the empty assignment")
}

// invalidCase is an invalid assignment and the error it must give.
type invalidCase struct {
	name string
	// set makes the assignment of a backend where a is assigned (see
	// setUp) invalid.
	set   func(t *testing.T, b Backend)
	want  string
	fixed bool // also for a fixed assignment
}

func (c *conformance) invalidCases() []invalidCase {
	a := c.a
	absent := k8stypes.NamespacedName{Namespace: a.Namespace, Name: "absent"}
	missing := "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: "
	assign := func(src *corev1.NodeConfigSource) func(*testing.T, Backend) {
		return func(t *testing.T, b Backend) { c.assign(t, b, src) }
	}
	return []invalidCase{
		{name: "all nil", set: assign(&corev1.NodeConfigSource{}),
			want: "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"},
		{name: "missing uid", set: assign(ref(a, "", "")), want: missing + "uid"},
		{name: "missing namespace", set: assign(ref(k8stypes.NamespacedName{Name: a.Name}, "uid-a", "")), want: missing + "namespace"},
		{name: "missing name", set: assign(ref(k8stypes.NamespacedName{Namespace: a.Namespace}, "uid-a", "")), want: missing + "name"},
		{name: "missing all", set: assign(ref(k8stypes.NamespacedName{}, "", "")), want: missing + "uid, namespace, name"},
		{name: "uid mismatch", set: assign(ref(a, "uid-x", "")),
			want: fmt.Sprintf("invalid NodeConfigSource.ConfigMap, uid uid-x and %s do not refer to the same object (its uid is uid-a)", a)},
		{name: "ConfigMap absent", set: assign(ref(absent, "uid-z", "")),
			want: fmt.Sprintf("ConfigMap %s does not exist", absent)},
		{name: "ConfigMap deleted", fixed: true,
			set:  func(t *testing.T, b Backend) { b.DeleteConfigMap(t, a.Namespace, a.Name) },
			want: fmt.Sprintf("ConfigMap %s does not exist", a)},
		{name: "named key missing", set: assign(ref(a, "uid-a", "nope")),
			want: fmt.Sprintf(`ConfigMap %s (UID: uid-a) has no key "nope"`, a)},
		{name: "default key missing", fixed: true,
			set: func(t *testing.T, b Backend) {
				cm := c.configMap(a, "uid-a", "a1")
				delete(cm.Data, c.h.PayloadKey)
				b.PutConfigMap(t, cm)
			},
			want: fmt.Sprintf(`ConfigMap %s (UID: uid-a) has no key %q`, a, c.h.PayloadKey)},
	}
}

func (c *conformance) testInvalid(t *testing.T) {
	for _, tc := range c.invalidCases() {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.fixed {
				c.skipIfFixed(t)
			}
			b := c.setUp(t)
			tc.set(t, b)
			a, err := b.Remote().Assigned(context.Background())
			checkInvalid(t, a, err, tc.want)
		})
	}
	t.Run("ConfigMap never created", func(t *testing.T) {
		b := c.h.New(t)
		if !c.fixed() {
			c.assign(t, b, ref(c.a, "uid-a", ""))
		}
		a, err := b.Remote().Assigned(context.Background())
		checkInvalid(t, a, err, fmt.Sprintf("ConfigMap %s does not exist", c.a))
	})
}

func checkInvalid(t *testing.T, a source.Assignment, err error, want string) {
	t.Helper()
	var ie *nodeapi.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("Assigned error = %v (%T); want *nodeapi.InvalidError %q", err, err, want)
	}
	if err.Error() != want {
		t.Errorf("Assigned error\n%s\nwant\n%s", err, want)
	}
	if a.Source != nil || a.ConfigMap != nil {
		t.Errorf("Assigned returned %+v with its error; want the zero Assignment", a)
	}
}

// result is what Assigned returned in one changed call.
type result struct {
	call int
	a    source.Assignment
	err  error
}

func (r result) String() string {
	switch {
	case r.err != nil:
		return fmt.Sprintf("call %d: error %q", r.call, r.err)
	case r.a.Source == nil || r.a.Source.ConfigMap == nil || r.a.ConfigMap == nil:
		return fmt.Sprintf("call %d: empty %+v", r.call, r.a)
	default:
		s := r.a.Source.ConfigMap
		return fmt.Sprintf("call %d: %s/%s uid=%s rv=%s key=%s data=%v", r.call, s.Namespace, s.Name, s.UID,
			s.ResourceVersion, s.KubeletConfigKey, r.a.ConfigMap.Data)
	}
}

// want is a predicate on a changed call's result, with its description.
type want struct {
	what string
	ok   func(result) bool
}

func anyCall() want { return want{"anything (any result will do)", func(result) bool { return true }} }

func (c *conformance) wantConfigMap(n k8stypes.NamespacedName, uid, value string) want {
	return want{fmt.Sprintf("%s uid=%s %s=%s", n, uid, c.h.PayloadKey, value), func(r result) bool {
		return r.err == nil && r.a.Source != nil && r.a.Source.ConfigMap != nil && r.a.ConfigMap != nil &&
			r.a.Source.ConfigMap.Namespace == n.Namespace && r.a.Source.ConfigMap.Name == n.Name &&
			string(r.a.Source.ConfigMap.UID) == uid && r.a.ConfigMap.Data[c.h.PayloadKey] == value
	}}
}

func wantEmpty() want {
	return want{"the empty assignment", func(r result) bool { return r.err == nil && r.a.Source == nil && r.a.ConfigMap == nil }}
}

func wantInvalid(msg string) want {
	return want{"*nodeapi.InvalidError " + msg, func(r result) bool {
		var ie *nodeapi.InvalidError
		return errors.As(r.err, &ie) && r.err.Error() == msg
	}}
}

// runner runs a Remote and records what Assigned returns in each changed
// call, and every breach of the contract it can see.
type runner struct {
	c         *conformance
	remote    source.Remote
	timeout   time.Duration
	before    int               // goroutines before Run
	beforeIDs map[string]string // their stacks by header
	cancel    context.CancelFunc
	done      chan error
	// hook, when set, runs first in each changed call, with its number
	// (from 1).
	hook func(call int)

	inflight atomic.Int32
	returned atomic.Bool
	calls    atomic.Int32

	mu         sync.Mutex
	results    []result
	violations []string
	signal     chan struct{} // a result or a violation was recorded
	stopped    bool
}

// start runs b's Remote with a context of its own (ended already when
// ended is set). The test's cleanup stops it.
func (c *conformance) start(t *testing.T, b Backend, hook func(int), ended bool) *runner {
	t.Helper()
	r := &runner{c: c, remote: b.Remote(), timeout: c.h.Timeout, done: make(chan error, 1), hook: hook,
		signal: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if ended {
		cancel()
	}
	r.beforeIDs = goroutines()
	r.before = runtime.NumGoroutine()
	go func() {
		err := r.remote.Run(ctx, func() { r.changed(ctx) })
		r.returned.Store(true)
		r.done <- err
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *runner) changed(ctx context.Context) {
	if r.returned.Load() {
		r.violate("changed was called after Run returned")
	}
	if r.inflight.Add(1) > 1 {
		r.violate("changed was called while another call had not returned")
	}
	defer r.inflight.Add(-1)
	n := int(r.calls.Add(1))
	if r.hook != nil {
		r.hook(n)
	}
	a, err := r.remote.Assigned(ctx)
	r.mu.Lock()
	r.results = append(r.results, result{call: n, a: a, err: err})
	r.mu.Unlock()
	r.poke()
}

func (r *runner) violate(msg string) {
	r.mu.Lock()
	r.violations = append(r.violations, msg)
	r.mu.Unlock()
	r.poke()
}

func (r *runner) poke() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// checkViolations fails t for each breach seen so far.
func (r *runner) checkViolations(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	v := r.violations
	r.violations = nil
	r.mu.Unlock()
	for _, msg := range v {
		t.Error(msg)
	}
}

// waitFor waits for a changed call, after the one numbered after, whose
// result w accepts, and returns it. Other calls (spurious ones, or ones
// that saw an earlier state) are skipped: the contract allows them.
func (r *runner) waitFor(t *testing.T, after int, w want) result {
	t.Helper()
	deadline := time.NewTimer(r.timeout)
	defer deadline.Stop()
	var seen []string
	next := 0
	for {
		r.mu.Lock()
		pending := r.results[next:]
		next = len(r.results)
		r.mu.Unlock()
		for _, res := range pending {
			if res.call <= after {
				continue
			}
			if w.ok(res) {
				r.checkViolations(t)
				return res
			}
			seen = append(seen, res.String())
		}
		r.checkViolations(t)
		select {
		case <-r.signal:
		case err := <-r.done:
			r.done <- err
			t.Fatalf("Run returned %v before its context ended, while waiting for a changed call that sees %s; calls saw %q",
				err, w.what, seen)
		case <-deadline.C:
			t.Fatalf("no changed call saw %s within %v; calls saw %q", w.what, r.timeout, seen)
		}
	}
}

// lastCall is the number of the latest changed call that returned.
func (r *runner) lastCall() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.results) == 0 {
		return 0
	}
	return r.results[len(r.results)-1].call
}

// stop ends Run's context and checks that Run returns nil within the
// timeout and that its goroutines end. Later calls do nothing.
func (r *runner) stop(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	stopped := r.stopped
	r.stopped = true
	r.mu.Unlock()
	if stopped {
		return
	}
	r.cancel()
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run returned %v when its context ended; want nil", err)
		}
	case <-timer.C:
		t.Fatalf("Run did not return within %v of its context ending", r.timeout)
	}
	r.checkViolations(t)
	r.checkGoroutines(t)
}

// checkGoroutines waits until no more goroutines run than before Run
// started, and fails t when that does not happen within the timeout. Run
// has returned, but goroutines past their last statement may still be
// counted for a moment.
func (r *runner) checkGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.NewTimer(r.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for {
		n := runtime.NumGoroutine()
		if n <= r.before {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			var added []string
			for id, stack := range goroutines() {
				if _, ok := r.beforeIDs[id]; !ok {
					added = append(added, stack)
				}
			}
			sort.Strings(added)
			t.Errorf("%d goroutines before Run, still %d %v after it returned; new since Run started:\n%s",
				r.before, n, r.timeout, strings.Join(added, "\n\n"))
			return
		}
	}
}

// goroutines returns the stack of every goroutine by its "goroutine N"
// header.
func goroutines() map[string]string {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		out[id] = g
	}
	return out
}

// Run tests.

func (c *conformance) testFirstCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fixed bool
		set   func(t *testing.T) Backend
		want  want
	}{
		{"assigned", true, c.setUp, c.wantConfigMap(c.a, "uid-a", "a1")},
		{"empty", false, c.h.New, wantEmpty()},
		{"ConfigMap absent", true, func(t *testing.T) Backend {
			b := c.h.New(t)
			if !c.fixed() {
				c.assign(t, b, ref(c.a, "uid-a", ""))
			}
			return b
		}, wantInvalid(fmt.Sprintf("ConfigMap %s does not exist", c.a))},
		{"uid mismatch", false, func(t *testing.T) Backend {
			b := c.setUp(t)
			c.assign(t, b, ref(c.a, "uid-x", ""))
			return b
		}, wantInvalid(fmt.Sprintf("invalid NodeConfigSource.ConfigMap, uid uid-x and %s do not refer to the same object (its uid is uid-a)", c.a))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.fixed {
				c.skipIfFixed(t)
			}
			b := tc.set(t)
			r := c.start(t, b, nil, false)
			first := r.waitFor(t, 0, anyCall())
			if !tc.want.ok(first) {
				t.Errorf("the first changed call saw %s; want %s", first, tc.want.what)
			}
			r.stop(t)
		})
	}
}

// testChangeBeforeRun: a change made after an earlier Assigned and before
// Run is seen by Run's first call.
func (c *conformance) testChangeBeforeRun(t *testing.T) {
	b := c.setUp(t)
	a, err := b.Remote().Assigned(context.Background())
	c.checkResolved(t, a, err, c.a, "uid-a", c.h.PayloadKey, "a1")
	c.put(t, b, c.a, "uid-a", "a2")
	r := c.start(t, b, nil, false)
	first := r.waitFor(t, 0, anyCall())
	if w := c.wantConfigMap(c.a, "uid-a", "a2"); !w.ok(first) {
		t.Errorf("the first changed call saw %s; want %s", first, w.what)
	}
	r.stop(t)
}

// step is one change made while Run runs, and what a changed call must
// then see.
type step struct {
	name string
	do   func(t *testing.T, b Backend)
	want want
}

func (c *conformance) steps() []step {
	a, bb := c.a, c.b
	put := func(n k8stypes.NamespacedName, uid, value string) func(*testing.T, Backend) {
		return func(t *testing.T, b Backend) { c.put(t, b, n, uid, value) }
	}
	del := func(n k8stypes.NamespacedName) func(*testing.T, Backend) {
		return func(t *testing.T, b Backend) { b.DeleteConfigMap(t, n.Namespace, n.Name) }
	}
	absent := wantInvalid(fmt.Sprintf("ConfigMap %s does not exist", a))
	if c.fixed() {
		return []step{
			{"edit in place", put(a, "uid-a", "a2"), c.wantConfigMap(a, "uid-a", "a2")},
			{"ConfigMap deleted", del(a), absent},
			{"ConfigMap re-created with another uid", put(a, "uid-a2", "a3"), c.wantConfigMap(a, "uid-a2", "a3")},
			{"payload key removed", func(t *testing.T, b Backend) {
				cm := c.configMap(a, "uid-a2", "a3")
				delete(cm.Data, c.h.PayloadKey)
				b.PutConfigMap(t, cm)
			}, wantInvalid(fmt.Sprintf("ConfigMap %s (UID: uid-a2) has no key %q", a, c.h.PayloadKey))},
			{"payload key back", put(a, "uid-a2", "a4"), c.wantConfigMap(a, "uid-a2", "a4")},
		}
	}
	assign := func(src *corev1.NodeConfigSource) func(*testing.T, Backend) {
		return func(t *testing.T, b Backend) { c.assign(t, b, src) }
	}
	return []step{
		{"edit in place", put(a, "uid-a", "a2"), c.wantConfigMap(a, "uid-a", "a2")},
		{"assignment moves to another ConfigMap", assign(ref(bb, "uid-b", "")), c.wantConfigMap(bb, "uid-b", "b1")},
		{"edit in place after the move", put(bb, "uid-b", "b2"), c.wantConfigMap(bb, "uid-b", "b2")},
		{"empty assignment", assign(nil), wantEmpty()},
		{"from empty to a ConfigMap", assign(ref(a, "uid-a", "")), c.wantConfigMap(a, "uid-a", "a2")},
		{"uid mismatch", assign(ref(a, "uid-x", "")),
			wantInvalid(fmt.Sprintf("invalid NodeConfigSource.ConfigMap, uid uid-x and %s do not refer to the same object (its uid is uid-a)", a))},
		{"all nil", assign(&corev1.NodeConfigSource{}),
			wantInvalid("invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil")},
		{"valid again", assign(ref(a, "uid-a", "")), c.wantConfigMap(a, "uid-a", "a2")},
		{"assigned ConfigMap deleted", del(a), absent},
		{"ConfigMap re-created with another uid", put(a, "uid-a2", "a3"),
			wantInvalid(fmt.Sprintf("invalid NodeConfigSource.ConfigMap, uid uid-a and %s do not refer to the same object (its uid is uid-a2)", a))},
		{"assignment follows the new uid", assign(ref(a, "uid-a2", "")), c.wantConfigMap(a, "uid-a2", "a3")},
		{"edit in place of the new object", put(a, "uid-a2", "a4"), c.wantConfigMap(a, "uid-a2", "a4")},
	}
}

func (c *conformance) testChanges(t *testing.T) {
	b := c.setUp(t)
	if !c.fixed() {
		c.put(t, b, c.b, "uid-b", "b1")
	}
	r := c.start(t, b, nil, false)
	r.waitFor(t, 0, c.wantConfigMap(c.a, "uid-a", "a1"))
	for _, s := range c.steps() {
		// Calls that returned before the change cannot have seen it.
		after := r.lastCall()
		s.do(t, b)
		t.Logf("%s: waiting for a changed call that sees %s", s.name, s.want.what)
		r.waitFor(t, after, s.want)
	}
	r.stop(t)
}

// testNoOverlap holds the first changed call while changes happen: an
// implementation that calls back concurrently (a goroutine per event, say)
// would call again meanwhile.
func (c *conformance) testNoOverlap(t *testing.T) {
	b := c.setUp(t)
	if !c.fixed() {
		c.put(t, b, c.b, "uid-b", "b1")
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	r := c.start(t, b, func(call int) {
		if call != 1 {
			return
		}
		close(entered)
		select {
		case <-release:
		case <-time.After(c.h.Timeout): // never hold Run past the test
		}
	}, false)
	select {
	case <-entered:
	case <-time.After(c.h.Timeout):
		close(release)
		t.Fatalf("no changed call within %v of Run starting", c.h.Timeout)
	}
	final := c.wantConfigMap(c.a, "uid-a", "a3")
	c.put(t, b, c.a, "uid-a", "a2")
	if !c.fixed() {
		c.assign(t, b, ref(c.b, "uid-b", ""))
		c.assign(t, b, ref(c.a, "uid-a", ""))
	}
	c.put(t, b, c.a, "uid-a", "a3")
	window := time.NewTimer(overlapWindow)
	select {
	case <-window.C:
	case <-r.signal: // a violation (no call can have returned yet)
		window.Stop()
	}
	close(release)
	r.waitFor(t, 1, final)
	r.stop(t)
}

func (c *conformance) testEnds(t *testing.T) {
	b := c.setUp(t)
	r := c.start(t, b, nil, false)
	r.waitFor(t, 0, c.wantConfigMap(c.a, "uid-a", "a1"))
	r.stop(t)
	// Nothing of Run may still react to a change.
	before := r.calls.Load()
	c.put(t, b, c.a, "uid-a", "a2")
	r.checkGoroutines(t)
	r.checkViolations(t)
	if n := r.calls.Load(); n != before {
		t.Errorf("%d changed calls after Run returned, after a change", n-before)
	}
}

func (c *conformance) testEndedBefore(t *testing.T) {
	b := c.setUp(t)
	r := c.start(t, b, nil, true)
	r.stop(t)
}
