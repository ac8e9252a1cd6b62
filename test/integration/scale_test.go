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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// scaleEnv holds the number of Controllers TestScale runs; unset, it skips.
const scaleEnv = "DYNCONFIG_SCALE"

// scaleLabel marks the Nodes of TestScale, so one watch sees them all.
const scaleLabel = "dynconfig.io/scale-test"

// scaleWorkers bounds the concurrent setup calls and assignment patches.
const scaleWorkers = 8

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
// first Node watch event showing ConfigOK True on the new UID (p50, p90,
// p99, max); the API requests per node for the change, from the API
// server's apiserver_request_total scraped before and after (resource
// requests only, by verb, resource and subresource; a WATCH counts when it
// ends); and the heap in use and goroutines per Controller. The targets
// (p99 <= 2s at 1000 nodes, <= 3 requests per node per change) are logged
// with the measurements, not asserted: the test fails only when a node does
// not converge or reloads other than once.
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
	index := make(map[string]int, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-node-%05d", i)
		index[names[i]] = i
	}
	oldAssignment := assignmentFor(oldCM)
	if err := parallel(n, func(i int) error {
		_, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        names[i],
			Labels:      map[string]string{scaleLabel: "true"},
			Annotations: map[string]string{source.AnnotationKey: oldAssignment},
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
	if err := waitAllNodes(ctx, h.client, n, oldMessage); err != nil {
		t.Fatal(err)
	}
	if err := quiesce(ctx, h.client); err != nil {
		t.Fatal(err)
	}
	setupTime := time.Since(setupStart)
	heapAfter, goroutinesAfter := heapInUse()

	// The change: a watch on the Nodes first, then every Node patched.
	list, err := h.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scaleLabel})
	if err != nil {
		t.Fatalf("listing Nodes: %v", err)
	}
	w, err := h.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: scaleLabel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watching Nodes: %v", err)
	}
	defer w.Stop()
	before, err := requestCounts(ctx, h.client)
	if err != nil {
		t.Fatal(err)
	}
	patched := make([]time.Time, n)
	adopted := make([]time.Time, n)
	var patchedMu sync.Mutex
	allAdopted := make(chan struct{})
	newMessage := currentReport(newCM).Message
	go func() {
		remaining := n
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			i, ok := index[node.Name]
			if !ok || !adopted[i].IsZero() {
				continue
			}
			if c := status.Find(node.Status.Conditions); c != nil && c.Status == corev1.ConditionTrue && c.Message == newMessage {
				adopted[i] = time.Now()
				if remaining--; remaining == 0 {
					close(allAdopted)
					return
				}
			}
		}
	}()
	patch := []byte(mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{source.AnnotationKey: assignmentFor(newCM)}}}))
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
	select {
	case <-allAdopted:
	case <-time.After(10 * time.Minute):
		t.Fatalf("not every node reported %q within 10m", newMessage)
	}
	if err := quiesce(ctx, h.client); err != nil {
		t.Fatal(err)
	}
	after, err := requestCounts(ctx, h.client)
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

	delta := after.sub(before)
	var total, testPatches float64
	for k, v := range delta {
		total += v
		if k.verb == "PATCH" && k.resource == "nodes" && k.subresource == "" {
			testPatches += v
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d Controllers (Reload mode, Node status and Event reporters), one shared ConfigMap reassigned\n", n)
	fmt.Fprintf(&b, "setup: %v for %d Bootstraps, Runs and the first reports (%d workers)\n", setupTime.Round(time.Millisecond), n, scaleWorkers)
	fmt.Fprintf(&b, "memory: heap in use %+.1f KiB per Controller (%.1f MiB -> %.1f MiB), %+.1f goroutines per Controller\n",
		float64(int64(heapAfter)-int64(heapBefore))/1024/float64(n), float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20),
		float64(goroutinesAfter-goroutinesBefore)/float64(n))
	fmt.Fprintf(&b, "latency from a node's PATCH to its ConfigOK True on the new UID: p50 %v, p90 %v, p99 %v, max %v (target p99 <= 2s at 1000 nodes)\n",
		percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), percentile(lat, 100))
	fmt.Fprintf(&b, "whole change: %v from the first PATCH to the last node adopting\n", last.Sub(first).Round(time.Millisecond))
	fmt.Fprintf(&b, "API requests per node for the change: %.2f in all, %.2f by the Controllers (without the test's Node PATCH) (target <= 3)\n",
		total/float64(n), (total-testPatches)/float64(n))
	for _, k := range delta.keys() {
		fmt.Fprintf(&b, "  %-7s %-12s %-8s %8.0f  %.2f per node\n", k.verb, k.resource, k.subresource, delta[k], delta[k]/float64(n))
	}
	t.Log(b.String())
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
// message.
func waitAllNodes(ctx context.Context, client kubernetes.Interface, n int, message string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scaleLabel})
		if err != nil {
			return fmt.Errorf("listing Nodes: %w", err)
		}
		ok := 0
		for _, node := range list.Items {
			if c := status.Find(node.Status.Conditions); c != nil && c.Status == corev1.ConditionTrue && c.Message == message {
				ok++
			}
		}
		if ok == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes report %q after 10m", ok, n, message)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
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

// requestKey is one series of apiserver_request_total, summed over codes,
// scopes and versions.
type requestKey struct{ verb, resource, subresource string }

// requestCount maps series to request counts.
type requestCount map[requestKey]float64

// sub returns c - prev, keeping only the series that changed.
func (c requestCount) sub(prev requestCount) requestCount {
	out := requestCount{}
	for k, v := range c {
		if d := v - prev[k]; d != 0 {
			out[k] = d
		}
	}
	return out
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

// requestCounts scrapes the API server's /metrics.
func requestCounts(ctx context.Context, client kubernetes.Interface) (requestCount, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping /metrics: %w", err)
	}
	return parseRequestCounts(body)
}

// parseRequestCounts sums apiserver_request_total of the text exposition
// format by verb, resource and subresource, leaving out non-resource
// requests (/metrics, /readyz: no resource label value).
func parseRequestCounts(body []byte) (requestCount, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	out := requestCount{}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return nil, fmt.Errorf("/metrics has no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		var k requestKey
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				k.verb = l.GetValue()
			case "resource":
				k.resource = l.GetValue()
			case "subresource":
				k.subresource = l.GetValue()
			}
		}
		if k.resource == "" {
			continue
		}
		out[k] += m.GetCounter().GetValue()
	}
	return out, nil
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1].Round(time.Millisecond)
}
