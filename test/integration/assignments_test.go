package integration

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// successiveAssignments is how many ConfigMaps TestControllerSuccessiveAssignments
// assigns in turn.
const successiveAssignments = 100

// goroutineSlack is how many goroutines above the baseline count as no
// leak: connection goroutines of the shared HTTP transport come and go. A
// leak of one goroutine per assignment would exceed it many times over.
const goroutineSlack = 10

// TestControllerSuccessiveAssignments assigns 100 ConfigMaps in turn to one
// running Controller that reloads in process, and proves each is adopted
// (Reload with its config, condition True on its UID) without leaking
// goroutines (the ConfigMap watch moves with every assignment) or
// checkpoints (GC keeps only what current and last-known-good name).
func TestControllerSuccessiveAssignments(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t, 10*time.Minute)

	cms := make([]*corev1.ConfigMap, successiveAssignments)
	for i := range cms {
		cms[i] = h.createConfigMap(ctx, t, configMapSpec{name: objectName(t, "cm") + "-" + strconv.Itoa(i), maxPods: 200 + i})
	}
	n := h.newNode(ctx, t)
	// A request on the node's client first, so its connection exists
	// before the baseline.
	n.report(ctx, t)
	before := settledGoroutines(t, -1)

	p := n.start(ctx, t, processOptions{reload: true})
	n.wantReport(ctx, t, localDefaultReport())
	p.run(ctx)
	n.waitReport(ctx, t, localDefaultReport())

	var running int
	for i, cm := range cms {
		n.assign(ctx, t, cm)
		cfg := p.waitReload(t)
		wantMaxPods(t, "reloaded config of assignment "+strconv.Itoa(i), cfg, int32(200+i))
		n.waitReport(ctx, t, currentReport(cm))
		if i == 0 {
			running = settledGoroutines(t, -1)
		}
	}
	if extra := len(p.reloads); extra > 0 {
		t.Errorf("%d reloads more than assignments", extra)
	}
	// While it runs, the count is what it was after the first assignment.
	afterAll := settledGoroutines(t, running+goroutineSlack)
	if got := afterAll; got > running+goroutineSlack {
		t.Errorf("goroutines while running: %d after %d assignments, %d after the first (slack %d)", got, len(cms), running, goroutineSlack)
	}
	last := cms[len(cms)-1]
	wantPointer(t, n.dir, "current", last.UID, last.ResourceVersion)
	if diff := cmp.Diff([]string{checkpointKey(last)}, checkpoints(t, n.dir)); diff != "" {
		t.Errorf("checkpoints after %d assignments (-want +got):\n%s", len(cms), diff)
	}

	p.stop()
	stopped := settledGoroutines(t, before+goroutineSlack)
	if stopped > before+goroutineSlack {
		t.Errorf("goroutines after the Controller stopped: %d, %d before it started (slack %d)", stopped, before, goroutineSlack)
	}
	t.Logf("goroutines: %d before the Controller, %d after the first assignment, %d after %d, %d after it stopped",
		before, running, afterAll, len(cms), stopped)
}

// settledGoroutines returns the goroutine count once it is at most limit,
// polling for a few seconds since stopped goroutines end asynchronously.
// With limit < 0 it waits for the count to stop changing instead. When the
// count does not settle it logs every goroutine's stack and returns the last
// count.
func settledGoroutines(t *testing.T, limit int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	prev, stable := -1, 0
	for {
		n := runtime.NumGoroutine()
		switch {
		case limit >= 0 && n <= limit:
			return n
		case limit < 0 && n == prev:
			if stable++; stable >= 5 {
				return n
			}
		default:
			stable = 0
		}
		prev = n
		if time.Now().After(deadline) {
			if limit >= 0 {
				var buf bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
				t.Logf("%d goroutines (limit %d):\n%s", n, limit, buf.String())
			}
			return n
		}
		<-ticker.C
	}
}
