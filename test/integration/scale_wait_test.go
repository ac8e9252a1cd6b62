package integration

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// Messages of the nodeWaiter tests: what the nodes report before and after
// the change.
const (
	waitOld = "using current (UID: old)"
	waitNew = "using current (UID: new)"
)

// waitCluster is a fake clientset holding scale Nodes, whose watches are
// FakeWatchers the test drives: updates made through the clientset reach no
// watch, as events a real watch missed.
type waitCluster struct {
	client  *fake.Clientset
	names   []string
	watches chan *watch.FakeWatcher // each watch opened, in order
}

// newWaitCluster creates the Nodes, each reporting msgs[i] ("" for no
// condition).
func newWaitCluster(t *testing.T, msgs ...string) *waitCluster {
	t.Helper()
	c := &waitCluster{client: fake.NewClientset(), watches: make(chan *watch.FakeWatcher, 100)}
	for i, msg := range msgs {
		name := "scale-node-" + string(rune('a'+i))
		c.names = append(c.names, name)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{scaleLabel: "true"}}}
		if msg != "" {
			node.Status.Conditions = []corev1.NodeCondition{configOK(msg)}
		}
		if _, err := c.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(10, false)
		c.watches <- w
		return true, w, nil
	})
	return c
}

func configOK(msg string) corev1.NodeCondition {
	return corev1.NodeCondition{Type: nodeapi.ConditionType, Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed, Message: msg}
}

// report makes node i report msg, returning the updated Node; no watch sees
// it.
func (c *waitCluster) report(t *testing.T, i int, msg string) *corev1.Node {
	t.Helper()
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), c.names[i], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{configOK(msg)}
	node, err = c.client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// nextWatch returns the next watch the waiter opens.
func (c *waitCluster) nextWatch(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-c.watches:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter opened no watch")
		return nil
	}
}

// start builds a waiter for waitNew and runs it in the background.
func (c *waitCluster) start(t *testing.T, timeout, relistEvery time.Duration) (*nodeWaiter, *watch.FakeWatcher, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	w, err := newNodeWaiter(ctx, c.client, c.names, waitNew)
	if err != nil {
		t.Fatal(err)
	}
	w.relistEvery, w.retryEvery = relistEvery, 10*time.Millisecond
	first := c.nextWatch(t)
	done := make(chan error, 1)
	go func() { done <- w.run(ctx, timeout) }()
	return w, first, done
}

// wantAllAdopted checks that run ended without error, every node adopted,
// and the waiter made lists LIST and watches WATCH requests.
func wantAllAdopted(t *testing.T, w *nodeWaiter, done <-chan error, lists, watches int) {
	t.Helper()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	for i, at := range w.adopted {
		if at.IsZero() {
			t.Errorf("node %s has no adoption time", w.names[i])
		}
	}
	if w.lists != lists || w.watches != watches {
		t.Errorf("the waiter made %d LISTs and %d WATCHes, want %d and %d", w.lists, w.watches, lists, watches)
	}
}

// The failure of issue 13: the API server ends the watch (a timeout, or a
// watcher too slow for the watch cache) and the nodes' later reports reach
// no watch. The wait lists again and finds them, instead of waiting out
// its deadline.
func TestNodeWaiterRelistsWhenTheWatchEnds(t *testing.T) {
	c := newWaitCluster(t, waitOld, waitOld, waitOld)
	w, first, done := c.start(t, 5*time.Second, time.Hour)
	first.Modify(c.report(t, 0, waitNew))
	c.report(t, 1, waitNew)
	c.report(t, 2, waitNew)
	first.Stop()
	wantAllAdopted(t, w, done, 2, 2)
}

// A watch that fails with "too old resource version" (410 Gone) sends an
// ERROR event and may stay open; the wait lists again.
func TestNodeWaiterRelistsOnAWatchError(t *testing.T) {
	c := newWaitCluster(t, waitOld, waitOld)
	w, first, done := c.start(t, 5*time.Second, time.Hour)
	c.report(t, 0, waitNew)
	c.report(t, 1, waitNew)
	first.Error(&apierrors.NewResourceExpired("too old resource version: 1 (5)").ErrStatus)
	wantAllAdopted(t, w, done, 2, 2)
}

// A watch that stays open but misses an event costs at most relistEvery.
func TestNodeWaiterRelistsPeriodically(t *testing.T) {
	c := newWaitCluster(t, waitOld, waitOld)
	w, first, done := c.start(t, 5*time.Second, 100*time.Millisecond)
	first.Modify(c.report(t, 0, waitNew))
	c.report(t, 1, waitNew)
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if w.lists < 2 {
		t.Errorf("the waiter made %d LISTs, want at least 2", w.lists)
	}
}

// Failed lists are retried.
func TestNodeWaiterRetriesAFailedList(t *testing.T) {
	c := newWaitCluster(t, waitOld)
	var lists atomic.Int32
	c.client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if n := lists.Add(1); n == 2 || n == 3 { // the lists after newNodeWaiter's
			return true, nil, apierrors.NewInternalError(errors.New("etcd is gone"))
		}
		return false, nil, nil
	})
	w, first, done := c.start(t, 5*time.Second, time.Hour)
	c.report(t, 0, waitNew)
	first.Stop()
	wantAllAdopted(t, w, done, 4, 2)
}

// At its deadline the wait fails saying how many nodes report what, from
// a last list, and the last list or watch error.
func TestNodeWaiterDeadlineSays(t *testing.T) {
	c := newWaitCluster(t, waitOld, waitOld, waitOld, "", waitOld)
	_, first, done := c.start(t, 300*time.Millisecond, time.Hour)
	first.Modify(c.report(t, 0, waitNew))
	c.report(t, 2, waitNew) // seen by the last list only
	c.report(t, 4, "using current (UID: other)")
	err := <-done
	if err == nil {
		t.Fatal("run: no error, want a deadline failure")
	}
	for _, want := range []string{
		`2 of 5 nodes report ConfigOK True "using current (UID: new)"`,
		`1: ConfigOK True (all checks passed) "using current (UID: old)" (scale-node-b)`,
		`1: ConfigOK True (all checks passed) "using current (UID: other)" (scale-node-e)`,
		`1: no ConfigOK condition (scale-node-d)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run: %v\nwant it to contain %s", err, want)
		}
	}
}

// When the API server cannot be read at the deadline, the failure says so
// and reports what the nodes reported when last seen.
func TestNodeWaiterDeadlineWithoutAPIServer(t *testing.T) {
	c := newWaitCluster(t, waitOld, waitOld)
	var down atomic.Bool
	c.client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server is down")
		}
		return false, nil, nil
	})
	_, first, done := c.start(t, 300*time.Millisecond, time.Hour)
	down.Store(true)
	first.Modify(c.report(t, 0, waitNew))
	first.Stop()
	err := <-done
	if err == nil {
		t.Fatal("run: no error, want a deadline failure")
	}
	for _, want := range []string{
		`1 of 2 nodes report ConfigOK True "using current (UID: new)"`,
		`1: ConfigOK True (all checks passed) "using current (UID: old)" (scale-node-b) (as last seen; last error: listing Nodes: the API server is down)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run: %v\nwant it to contain %s", err, want)
		}
	}
}

// TestSummarize proves the grouping of a deadline failure: most common
// first, at most three names each.
func TestSummarize(t *testing.T) {
	ok := nodeReport{seen: true, condition: true, status: corev1.ConditionTrue, reason: "R", message: "new"}
	old := nodeReport{seen: true, condition: true, status: corev1.ConditionTrue, reason: "R", message: "old"}
	failed := nodeReport{seen: true, condition: true, status: corev1.ConditionUnknown, reason: "failed", message: "new"}
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	got := summarize(names, []nodeReport{ok, old, old, old, old, {seen: true}, {}, failed}, "new")
	want := `1 of 8 nodes report ConfigOK True "new"; 4: ConfigOK True (R) "old" (b, c, d, ...); ` +
		`1: ConfigOK Unknown (failed) "new" (h); 1: never seen (g); 1: no ConfigOK condition (f)`
	if got != want {
		t.Errorf("summarize:\n got %s\nwant %s", got, want)
	}
}
