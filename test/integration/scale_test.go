package integration

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// scaleEnv holds the number of Controllers TestScale runs; unset, it skips.
const scaleEnv = "DYNCONFIG_SCALE"

// scaleLabel marks the Nodes of TestScale, so one watch sees them all.
const scaleLabel = "dynconfig.io/scale-test"

// scaleWorkers bounds the concurrent setup calls and assignment patches.
const scaleWorkers = 8

// scaleRequestBudget is how many API requests a Controller may make, on
// average per node, for one change of its assignment: the PATCH of its
// Node's status, the POST of the ConfigChanged Event, and the WATCH of the
// new ConfigMap (the WATCH counted is the old ConfigMap's, which ends as
// the watch moves; the new one counts when it ends in turn). The new
// watch's initial list comes in the WATCH request itself (client-go's
// WatchListClient), and the Node source calls the Controller back only
// once that watch synced, so the Controller reads the ConfigMap from the
// cache: no GET (issue 13; it was 4 before). TestScale fails above it,
// beyond scaleRequestSlack.
const scaleRequestBudget = 3

// scaleRequestSlack is how far above scaleRequestBudget the average may go
// before TestScale fails: 2 requests in 100 nodes, so an occasional extra
// request (one run at N=200 counted 201 GETs of ConfigMaps, not seen
// again in ten runs; a Controller's second sync can race the first sync of
// its new ConfigMap watch and read the ConfigMap again) passes, while a
// request more for every node, or for 1 node in 50, fails.
const scaleRequestSlack = 0.02

// TestScale is the benchmark of issue 3, run only when DYNCONFIG_SCALE=N is
// set (it is not part of `go test ./...`):
//
//	cd test && DYNCONFIG_SCALE=100 go test -count=1 -timeout 60m -run TestScale ./integration/ -v
//
// N Controllers run in this process, each with its own Node, client and
// state dir, all assigned one shared ConfigMap, in Reload mode (no process
// restarts), with the Node status and Event reporters. The test then
// assigns all of them a new ConfigMap (one PATCH of each Node's annotation)
// and measures, per node, the time from the start of its PATCH to the
// first sight of its Node showing ConfigOK True on the new UID (p50, p90,
// p99, max); the API requests per node for the change, from the API
// server's apiserver_request_total scraped before and after (resource
// requests on the Controllers' resources only, by verb, resource and
// subresource, the test's own left out; a WATCH counts when it ends); and
// the heap in use and goroutines per Controller. Its wait for the reports
// is a nodeWaiter: a watch resumed by a list whenever it ends or fails,
// and a list at least every 30s, so a missed event cannot make it wait out
// its 10-minute deadline (issue 13); a deadline failure says how many
// nodes report what. The latency target (p99 <= 2s at 1000 nodes) is
// logged, not asserted; the test fails when a node does not converge or
// reloads other than once, when the Controllers make more than
// scaleRequestBudget requests per node for the change (3;
// see scaleRequestSlack),
// and when their open watches differ after the change.
func TestScale(t *testing.T) {
	raw := os.Getenv(scaleEnv)
	if raw == "" {
		t.Skipf("set %s=N to run N Controllers against the API server", scaleEnv)
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number of Controllers", scaleEnv, raw)
	}
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	// N Controllers log a lot at the default level; keep errors only.
	ctx = klog.NewContext(ctx, klog.Background().V(10))

	oldCM := h.createConfigMap(ctx, t, configMapSpec{name: "scale-old", maxPods: 100})
	newCM := h.createConfigMap(ctx, t, configMapSpec{name: "scale-new", maxPods: 101})
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-node-%05d", i)
	}
	oldAssignment := assignmentFor(oldCM)
	if err := parallel(n, func(i int) error {
		_, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        names[i],
			Labels:      map[string]string{scaleLabel: "true"},
			Annotations: map[string]string{nodeapi.AssignmentAnnotation: oldAssignment},
		}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("creating Nodes: %v", err)
	}

	heapBefore, goroutinesBefore := heapInUse()
	setupStart := time.Now()
	controllers := make([]*dynconfig.Controller[kubeletConfig], n)
	reloads := make([]atomic.Int32, n)
	stateRoot := t.TempDir()
	if err := parallel(n, func(i int) error {
		c, err := newScaleController(h, names[i], filepath.Join(stateRoot, names[i]), func(context.Context, *kubeletConfig) error {
			reloads[i].Add(1)
			return nil
		})
		if err != nil {
			return err
		}
		controllers[i] = c
		cfg, err := c.Bootstrap(ctx)
		if err != nil {
			return fmt.Errorf("node %s: Bootstrap: %w", names[i], err)
		}
		if cfg.MaxPods != 100 {
			return fmt.Errorf("node %s: Bootstrap chose maxPods %d, want 100", names[i], cfg.MaxPods)
		}
		return nil
	}); err != nil {
		t.Fatalf("starting Controllers: %v", err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() {
		stopRun()
		running.Wait()
		for _, c := range controllers {
			if c != nil {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		}
	})
	for i, c := range controllers {
		running.Add(1)
		go func() {
			defer running.Done()
			if err := c.Run(runCtx); err != nil {
				t.Errorf("node %s: Run: %v", names[i], err)
			}
		}()
	}
	oldMessage := currentReport(oldCM).Message
	if err := waitAllNodes(ctx, h.client, names, oldMessage); err != nil {
		t.Fatal(err)
	}
	if err := quiesce(ctx, h.client); err != nil {
		t.Fatal(err)
	}
	setupTime := time.Since(setupStart)
	heapAfter, goroutinesAfter := heapInUse()

	// The change: the wait for the new reports starts first (a list and a
	// watch of the Nodes), then every Node is patched.
	newMessage := currentReport(newCM).Message
	waiter, err := newNodeWaiter(ctx, h.client, names, newMessage)
	if err != nil {
		t.Fatal(err)
	}
	before, openBefore, err := scrape(ctx, h.client)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own requests of the change: from here on, the waiter's
	// lists after this one, and every watch it opened (a WATCH counts when
	// it ends, and the waiter stops its watches before run returns); open
	// now, its watch.
	listsBefore := waiter.lists
	ownOpen := requestCount{{"WATCH", "nodes", ""}: 1}
	patched := make([]time.Time, n)
	var patchedMu sync.Mutex
	waited := make(chan error, 1)
	go func() { waited <- waiter.run(ctx, scaleDeadline) }()
	patch := []byte(mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{nodeapi.AssignmentAnnotation: assignmentFor(newCM)}}}))
	if err := parallel(n, func(i int) error {
		start := time.Now()
		patchedMu.Lock()
		patched[i] = start
		patchedMu.Unlock()
		_, err := h.client.CoreV1().Nodes().Patch(ctx, names[i], types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}); err != nil {
		t.Fatalf("assigning the new ConfigMap: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	adopted := waiter.adopted
	if err := quiesce(ctx, h.client); err != nil {
		t.Fatal(err)
	}
	after, openAfter, err := scrape(ctx, h.client)
	if err != nil {
		t.Fatal(err)
	}

	for i := range reloads {
		if got := reloads[i].Load(); got != 1 {
			t.Errorf("node %s reloaded %d times, want 1", names[i], got)
		}
	}
	patchedMu.Lock()
	lat := make([]time.Duration, n)
	first, last := patched[0], adopted[0]
	for i := range lat {
		lat[i] = adopted[i].Sub(patched[i])
		if patched[i].Before(first) {
			first = patched[i]
		}
		if adopted[i].After(last) {
			last = adopted[i]
		}
	}
	patchedMu.Unlock()
	slices.Sort(lat)

	own := requestCount{
		{"PATCH", "nodes", ""}: float64(n),
		{"LIST", "nodes", ""}:  float64(waiter.lists - listsBefore),
		{"WATCH", "nodes", ""}: float64(waiter.watches),
	}
	delta := after.sub(before).only(scaleResources, true)
	background := after.sub(before).only(scaleResources, false)
	byControllers := delta.sub(own)
	var total, controllersTotal float64
	for _, v := range delta {
		total += v
	}
	for _, v := range byControllers {
		controllersTotal += v
	}
	perNode := controllersTotal / float64(n)
	// The Controllers' open watches: the same after the change as before.
	// A WATCH request counts only when it ends, so a Controller that kept
	// its old ConfigMap watch open would cost one request less here.
	openAfter = openAfter.only(scaleResources, true)
	openControllers := openBefore.only(scaleResources, true).sub(ownOpen)
	openChanged := openAfter.sub(openControllers)

	var b strings.Builder
	fmt.Fprintf(&b, "%d Controllers (Reload mode, Node status and Event reporters), one shared ConfigMap reassigned\n", n)
	fmt.Fprintf(&b, "setup: %v for %d Bootstraps, Runs and the first reports (%d workers)\n", setupTime.Round(time.Millisecond), n, scaleWorkers)
	fmt.Fprintf(&b, "memory: heap in use %+.1f KiB per Controller (%.1f MiB -> %.1f MiB), %+.1f goroutines per Controller\n",
		float64(int64(heapAfter)-int64(heapBefore))/1024/float64(n), float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20),
		float64(goroutinesAfter-goroutinesBefore)/float64(n))
	fmt.Fprintf(&b, "latency from a node's PATCH to its ConfigOK True on the new UID: p50 %v, p90 %v, p99 %v, max %v (target p99 <= 2s at 1000 nodes)\n",
		percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), percentile(lat, 100))
	fmt.Fprintf(&b, "whole change: %v from the first PATCH to the last node adopting\n", last.Sub(first).Round(time.Millisecond))
	fmt.Fprintf(&b, "API requests per node for the change: %.3f in all, %.3f by the Controllers (budget %d)\n",
		total/float64(n), perNode, scaleRequestBudget)
	for _, k := range byControllers.keys() {
		fmt.Fprintf(&b, "  %-7s %-12s %-8s %8.0f  %.2f per node\n", k.verb, k.resource, k.subresource, byControllers[k], byControllers[k]/float64(n))
	}
	fmt.Fprintf(&b, "  left out, the test's own: %s (its Node PATCHes; its waiter listed the Nodes %d times, watched them %d times)\n",
		own.String(), waiter.lists, waiter.watches)
	if len(background) > 0 {
		fmt.Fprintf(&b, "  left out, the API server's own (other resources): %s\n", background.String())
	}
	open := make([]string, 0, len(openAfter))
	for _, k := range openAfter.keys() {
		open = append(open, fmt.Sprintf("%s %.0f (%.0f before)", k.resource, openAfter[k], openControllers[k]))
	}
	fmt.Fprintf(&b, "open watches on those resources after the change, the API server's own included: %s\n", strings.Join(open, ", "))
	t.Log(b.String())

	if perNode > scaleRequestBudget+scaleRequestSlack+1e-9 {
		t.Errorf("%.3f API requests per node for the change by the Controllers, over the budget of %d (scaleRequestBudget, slack %v): %s",
			perNode, scaleRequestBudget, scaleRequestSlack, byControllers)
	}
	for k, v := range byControllers {
		if v < 0 {
			t.Errorf("the API server counted %.0f fewer %s %s requests than the test made itself: the budget's accounting is wrong", -v, k.verb, k.resource)
		}
	}
	if len(openChanged) > 0 {
		t.Errorf("the Controllers' open watches changed with the change (after - before: %s): a WATCH counts only when it ends, so the request count does not show this", openChanged)
	}
}

// newScaleController builds a Controller like a component on its node
// would: its own client (the kubelet's default limits, 50 QPS, burst 100),
// the kubelet profile with the default local config, the node's annotation,
// Node status and Event reporters, and reload in process.
func newScaleController(h *harness, node, dir string, reload func(context.Context, *kubeletConfig) error) (*dynconfig.Controller[kubeletConfig], error) {
	client, err := kubernetes.NewForConfig(limited(h.cl.Config, 50, 100))
	if err != nil {
		return nil, err
	}
	pipeline, err := kubelet.NewPipeline(merge.Options{})
	if err != nil {
		return nil, err
	}
	layers, err := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{})
	if err != nil {
		return nil, err
	}
	remote, err := source.NewNode(source.NodeOptions{Client: client, NodeName: node, PayloadKey: kubelet.PayloadKey})
	if err != nil {
		return nil, err
	}
	reporter, err := status.NewNodeReporter(status.NodeReporterOptions{Client: client, NodeName: node})
	if err != nil {
		return nil, err
	}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: client, NodeName: node, Component: "kubelet"})
	if err != nil {
		return nil, err
	}
	return dynconfig.New(dynconfig.Options[kubeletConfig]{
		Profile: kubelet.Profile{}, Layers: layers, StateDir: dir, ComponentVersion: componentVersion,
		Remote: remote, Reporter: reporter, Events: events, Reload: reload,
	})
}

// parallel runs f(0..n-1) on scaleWorkers goroutines and returns the first
// error.
func parallel(n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, scaleWorkers)
	for range scaleWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					next.Store(int64(n)) // stop handing out work
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// heapInUse returns the heap in use after a garbage collection, and the
// number of goroutines.
func heapInUse() (uint64, int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, runtime.NumGoroutine()
}

// waitAllNodes waits until every scale Node reports ConfigOK True with
// message, polling; after 10m it fails saying how many nodes report what.
func waitAllNodes(ctx context.Context, client kubernetes.Interface, names []string, message string) error {
	deadline := time.Now().Add(scaleDeadline)
	index := indexOf(names)
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scaleLabel})
		if err != nil {
			return fmt.Errorf("listing Nodes: %w", err)
		}
		reports := make([]nodeReport, len(names))
		ok := 0
		for k := range list.Items {
			if i, found := index[list.Items[k].Name]; found {
				reports[i] = reportOf(&list.Items[k])
				if reports[i].is(message) {
					ok++
				}
			}
		}
		if ok == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %s", scaleDeadline, summarize(names, reports, message))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// scaleDeadline bounds each wait for all the nodes' reports.
const scaleDeadline = 10 * time.Minute

// indexOf maps each name to its position.
func indexOf(names []string) map[string]int {
	index := make(map[string]int, len(names))
	for i, name := range names {
		index[name] = i
	}
	return index
}

// nodeReport is a node's ConfigOK condition as last seen.
type nodeReport struct {
	seen      bool // the node was in a list or a watch event
	condition bool // it had a ConfigOK condition
	status    corev1.ConditionStatus
	reason    string
	message   string
}

func reportOf(node *corev1.Node) nodeReport {
	c := status.Find(node.Status.Conditions)
	if c == nil {
		return nodeReport{seen: true}
	}
	return nodeReport{seen: true, condition: true, status: c.Status, reason: c.Reason, message: c.Message}
}

// is reports whether r is ConfigOK True with message.
func (r nodeReport) is(message string) bool {
	return r.condition && r.status == corev1.ConditionTrue && r.message == message
}

func (r nodeReport) String() string {
	switch {
	case !r.seen:
		return "never seen"
	case !r.condition:
		return "no " + string(nodeapi.ConditionType) + " condition"
	}
	return fmt.Sprintf("%s %s (%s) %q", nodeapi.ConditionType, r.status, r.reason, r.message)
}

// summarize says how many nodes report ConfigOK True with message and,
// grouped by what they report, what the others do, naming a few.
func summarize(names []string, reports []nodeReport, message string) string {
	ok := 0
	others := map[string][]string{}
	for i, r := range reports {
		if r.is(message) {
			ok++
			continue
		}
		others[r.String()] = append(others[r.String()], names[i])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d nodes report %s True %q", ok, len(names), nodeapi.ConditionType, message)
	groups := make([]string, 0, len(others))
	for g := range others {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if len(others[groups[i]]) != len(others[groups[j]]) {
			return len(others[groups[i]]) > len(others[groups[j]])
		}
		return groups[i] < groups[j]
	})
	for _, g := range groups {
		nodes := others[g]
		fmt.Fprintf(&b, "; %d: %s (%s", len(nodes), g, strings.Join(nodes[:min(len(nodes), 3)], ", "))
		if len(nodes) > 3 {
			b.WriteString(", ...")
		}
		b.WriteString(")")
	}
	return b.String()
}

// nodeWaiter follows the scale Nodes until every one reports ConfigOK True
// with one message, and records when it first saw each do so. It lists the
// Nodes and watches them from the list's resourceVersion; when the watch
// ends (the API server closes watches that time out or fall too far
// behind) or fails (an ERROR event, such as a resourceVersion too old), it
// lists again and watches from there, so an event the watch missed is
// found by the list. It also lists every relistEvery, so even a watch that
// stays open but misses an event delays the wait by at most that. A failed
// list or watch is retried after retryEvery. Not safe for concurrent use.
type nodeWaiter struct {
	client  kubernetes.Interface
	names   []string
	index   map[string]int
	message string
	// relistEvery is the longest time between two lists; retryEvery the
	// wait before listing again after a failed list or watch.
	relistEvery, retryEvery time.Duration

	w       watch.Interface // the open watch, nil when there is none
	reports []nodeReport    // what each node reported when last seen
	// adopted is when each node was first seen reporting message (by a
	// watch event, or by a list: then the time is an upper bound).
	adopted   []time.Time
	remaining int // nodes not adopted yet
	// lists and watches count the LIST and WATCH requests of Nodes made,
	// failed ones included; every watch is stopped by the time run returns.
	lists, watches int
	lastErr        error // of the last failed list or watch, or ERROR event
}

// newNodeWaiter lists the Nodes and starts watching them.
func newNodeWaiter(ctx context.Context, client kubernetes.Interface, names []string, message string) (*nodeWaiter, error) {
	w := &nodeWaiter{client: client, names: names, index: indexOf(names), message: message,
		relistEvery: 30 * time.Second, retryEvery: time.Second,
		reports: make([]nodeReport, len(names)), adopted: make([]time.Time, len(names)), remaining: len(names)}
	if !w.relist(ctx) {
		return nil, w.lastErr
	}
	return w, nil
}

// run waits until every node reports the message, at most timeout. At the
// deadline it lists once more, and fails saying how many nodes report what.
func (w *nodeWaiter) run(ctx context.Context, timeout time.Duration) error {
	defer w.stopWatch()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	relist := time.NewTimer(w.relistEvery)
	defer relist.Stop()
	for w.remaining > 0 {
		var events <-chan watch.Event
		var retry <-chan time.Time
		if w.w != nil {
			events = w.w.ResultChan()
		} else {
			retry = time.After(w.retryEvery)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the nodes to report %q: %w; %s", w.message, ctx.Err(), w.summary())
		case <-deadline.C:
			if w.relist(ctx) && w.remaining == 0 {
				return nil
			}
			return fmt.Errorf("after %v: %s", timeout, w.summary())
		case <-relist.C:
			w.relist(ctx)
			relist.Reset(w.relistEvery)
		case <-retry:
			w.relist(ctx)
		case ev, ok := <-events:
			switch {
			case !ok:
				w.relist(ctx)
			case ev.Type == watch.Error:
				w.lastErr = fmt.Errorf("watching Nodes: %w", apierrors.FromObject(ev.Object))
				w.relist(ctx)
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				if node, ok := ev.Object.(*corev1.Node); ok {
					w.observe(node, time.Now())
				}
			}
		}
	}
	return nil
}

// relist replaces the watch by a list and a watch from there. It reports
// whether both succeeded; a failure is kept in lastErr.
func (w *nodeWaiter) relist(ctx context.Context) bool {
	w.stopWatch()
	w.lists++
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	list, err := w.client.CoreV1().Nodes().List(lctx, metav1.ListOptions{LabelSelector: scaleLabel})
	cancel()
	if err != nil {
		w.lastErr = fmt.Errorf("listing Nodes: %w", err)
		return false
	}
	now := time.Now()
	for k := range list.Items {
		w.observe(&list.Items[k], now)
	}
	w.watches++
	w.w, err = w.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: scaleLabel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		w.w = nil
		w.lastErr = fmt.Errorf("watching Nodes: %w", err)
		return false
	}
	return true
}

// observe records what node reports, seen at.
func (w *nodeWaiter) observe(node *corev1.Node, at time.Time) {
	i, ok := w.index[node.Name]
	if !ok {
		return
	}
	w.reports[i] = reportOf(node)
	if w.adopted[i].IsZero() && w.reports[i].is(w.message) {
		w.adopted[i] = at
		w.remaining--
	}
}

func (w *nodeWaiter) stopWatch() {
	if w.w != nil {
		w.w.Stop()
		w.w = nil
	}
}

// summary says how many nodes were seen reporting what, and the last error.
func (w *nodeWaiter) summary() string {
	s := summarize(w.names, w.reports, w.message)
	if w.lastErr != nil {
		s += fmt.Sprintf(" (as last seen; last error: %v)", w.lastErr)
	}
	return s
}

// quiesce waits until the API server has served no resource request for
// two scrapes in a row, a second apart: the Controllers are done with what
// the last change caused.
func quiesce(ctx context.Context, client kubernetes.Interface) error {
	deadline := time.Now().Add(5 * time.Minute)
	prev, err := requestCounts(ctx, client)
	if err != nil {
		return err
	}
	quiet := 0
	for quiet < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server kept serving requests for 5m: %v", prev)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		cur, err := requestCounts(ctx, client)
		if err != nil {
			return err
		}
		if len(cur.sub(prev)) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
	return nil
}

// scaleResources are the resources the Controllers of TestScale use. The
// API server makes requests of its own on others (it renews its lease
// every 10s), which are not the change's.
var scaleResources = []string{"configmaps", "events", "nodes"}

// only returns the series of c whose resource is (in true) or is not (in
// false) one of resources.
func (c requestCount) only(resources []string, in bool) requestCount {
	out := requestCount{}
	for k, v := range c {
		if slices.Contains(resources, k.resource) == in {
			out[k] = v
		}
	}
	return out
}

// requestKey is one series of apiserver_request_total, summed over codes,
// scopes and versions.
type requestKey struct{ verb, resource, subresource string }

// requestCount maps series to request counts.
type requestCount map[requestKey]float64

// sub returns c - prev, keeping only the series that changed (a series
// only prev has counts as 0 in c).
func (c requestCount) sub(prev requestCount) requestCount {
	out := requestCount{}
	for k, v := range c {
		if d := v - prev[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range prev {
		if _, ok := c[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}

// String lists the non-zero series, most requests first: "PATCH nodes/status 50, ...".
func (c requestCount) String() string {
	parts := make([]string, 0, len(c))
	for _, k := range c.keys() {
		if c[k] == 0 {
			continue
		}
		r := k.resource
		if k.subresource != "" {
			r += "/" + k.subresource
		}
		parts = append(parts, fmt.Sprintf("%s %s %.0f", k.verb, r, c[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// keys returns the series, most requests first.
func (c requestCount) keys() []requestKey {
	keys := make([]requestKey, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		a, b := keys[i], keys[j]
		return a.verb+a.resource+a.subresource < b.verb+b.resource+b.subresource
	})
	return keys
}

// requestCounts scrapes the API server's /metrics for its request counts.
func requestCounts(ctx context.Context, client kubernetes.Interface) (requestCount, error) {
	requests, _, err := scrape(ctx, client)
	return requests, err
}

// scrape reads the API server's /metrics: its request counts and its open
// watches.
func scrape(ctx context.Context, client kubernetes.Interface) (requests, watches requestCount, err error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("scraping /metrics: %w", err)
	}
	return parseMetrics(body)
}

// parseRequestCounts sums apiserver_request_total of the text exposition
// format by verb, resource and subresource, leaving out non-resource
// requests (/metrics, /readyz: no resource label value).
func parseRequestCounts(body []byte) (requestCount, error) {
	requests, _, err := parseMetrics(body)
	return requests, err
}

// parseMetrics sums, by verb, resource and subresource and leaving out
// non-resource requests (/metrics, /readyz: no resource label value),
// apiserver_request_total (required) and the WATCH series of
// apiserver_longrunning_requests, the watches open now (none when the
// gauge is missing).
func parseMetrics(body []byte) (requests, watches requestCount, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return nil, nil, fmt.Errorf("/metrics has no apiserver_request_total")
	}
	requests = requestCount{}
	for _, m := range fam.GetMetric() {
		if k := keyOf(m.GetLabel()); k.resource != "" {
			requests[k] += m.GetCounter().GetValue()
		}
	}
	watches = requestCount{}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		if k := keyOf(m.GetLabel()); k.resource != "" && k.verb == "WATCH" && m.GetGauge().GetValue() != 0 {
			watches[k] += m.GetGauge().GetValue()
		}
	}
	return requests, watches, nil
}

// labelPair is a label of a series (the client_model LabelPair).
type labelPair interface {
	GetName() string
	GetValue() string
}

// keyOf returns the verb, resource and subresource of a series' labels.
func keyOf[L labelPair](labels []L) requestKey {
	var k requestKey
	for _, l := range labels {
		switch l.GetName() {
		case "verb":
			k.verb = l.GetValue()
		case "resource":
			k.resource = l.GetValue()
		case "subresource":
			k.subresource = l.GetValue()
		}
	}
	return k
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1].Round(time.Millisecond)
}
