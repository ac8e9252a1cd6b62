package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// benchSizes are the fleets of BenchmarkRolloutController, smallest
// first: DYNCONFIG_ROLLOUT_BENCH_SIZES (comma-separated), default 1000,
// 5000 and 10000. The fleet grows from one size to the next on the same
// API server and the same controller process.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_SIZES")
	if v == "" {
		return []int{1000, 5000, 10000}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 || (len(out) > 0 && n <= out[len(out)-1]) {
			b.Fatalf("DYNCONFIG_ROLLOUT_BENCH_SIZES=%q: want growing sizes of at least 10", v)
		}
		out = append(out, n)
	}
	return out
}

// benchFailEvery: one simulated component in this many rolls each config
// back (the rollout's maxFailures lets them fail).
const benchFailEvery = 200

// benchQPS is the controller's client rate limit in the benchmark.
// 0: dynconfig-rollout's default.
var benchQPS = envInt("DYNCONFIG_ROLLOUT_BENCH_QPS", 0)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchTrial is how long the simulated components of
// BenchmarkRolloutController keep a config in trial.
var benchTrial = time.Duration(envInt("DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS", 2000)) * time.Millisecond

// benchResult is what BenchmarkRolloutController measured at one size.
type benchResult struct {
	nodes                    int
	objectKiB                float64 // the largest ConfigRollout object seen
	stepSeconds, overheadSec float64 // per step; overhead beyond the trial waits
	requestsPerNode          float64
	cpuSeconds               float64 // the controller's, per rollout
	heapMiB, rssMiB          float64
}

// BenchmarkRolloutController measures what the rollout controller adds to a
// rollout as the fleet grows: at each size (benchSizes) the Nodes exist on
// one real kube-apiserver, and their components are simulated by one
// informer that answers each assignment through the API server as a
// component does: Trial at once, Promoted benchTrial later (the status
// annotation, through nodes/status), or RolledBack for one node in
// benchFailEvery. Each iteration rolls one ConfigMap out
// in 5 steps (1, 10%, 25%, 50%, 100%; maxUnavailable 10%), alternating
// between two ConfigMaps; a step waits for each of its batches of
// maxUnavailable nodes in turn (12 waits over the 5 steps).
//
// Per size it reports: the largest ConfigRollout object seen during the
// rollout (KiB; goal at most 256), seconds per step and the overhead per
// step beyond the trial waits (goal below 1 s), the controller's API
// requests per node (counted by the API server: its Node PATCHes, status
// updates and Events; goal at most 2), the controller's CPU per rollout
// and its heap and RSS. With DYNCONFIG_ROLLOUT_BENCH_PLOT_DIR set it writes
// rollout-scale.svg (the growth of each against the fleet) and
// rollout-scale.txt there. DYNCONFIG_ROLLOUT_BENCH_QPS sets the
// controller's client rate limit (burst twice that; default:
// dynconfig-rollout's defaults, 250 and 500),
// DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS the trial, and
// DYNCONFIG_ROLLOUT_BENCH_CPUPROFILE=FILE writes the controller's CPU
// profile of the first 30 s there.
//
//	cd test && go test -run XXX -bench RolloutController -benchtime 1x ./integration/
func BenchmarkRolloutController(b *testing.B) {
	sizes := benchSizes(b)
	cl := cluster.Start(b)
	h := &harness{cl: cl, client: newClient(b, cl.Config, 500, 1000)}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.Background().V(10)), 90*time.Minute)
	defer cancel()
	installRolloutCRD(ctx, b, h)
	label := "rollout-bench"
	var cms [2]*corev1.ConfigMap
	for i := range cms {
		cm, err := h.client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: namespace},
			Data:       map[string]string{kubelet.PayloadKey: kubeletPayload(100 + i)},
			Immutable:  ptr.To(true),
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cms[i] = cm
	}
	reported := func(cm *corev1.ConfigMap, phase nodeapi.ConfigPhase) string {
		src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: kubelet.PayloadKey,
		}}
		st := &nodeapi.ConfigStatus{Phase: phase, Assigned: src, Active: src}
		if phase == nodeapi.PhasePromoted {
			st.LastKnownGood = src
		}
		v, err := st.MarshalAnnotation()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	// The fleet, grown to each size in turn. A new node starts on the
	// ConfigMap the previous rollout left the others on, so that the next
	// rollout assigns every node (rollouts alternate between the two).
	created, rollouts := 0, 0
	grow := func(n int) {
		on := cms[(rollouts+1)%2]
		if err := parallel(n-created, func(i int) error {
			name := fmt.Sprintf("bench-node-%05d", created+i)
			_, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{label: "true"},
				Annotations: map[string]string{nodeapi.AssignmentAnnotation: assignmentFor(on), nodeapi.StatusAnnotation: reported(on, nodeapi.PhasePromoted)},
			}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			b.Fatalf("growing the fleet to %d nodes: %v", n, err)
		}
		created = n
	}

	// The simulated components: whatever is assigned, report it in trial
	// and promoted once the trial is over.
	simClient := newClient(b, protobuf(cl.Config), 1000, 2000)
	promoted := map[types.UID]string{cms[0].UID: reported(cms[0], nodeapi.PhasePromoted), cms[1].UID: reported(cms[1], nodeapi.PhasePromoted)}
	inTrial := map[types.UID]string{cms[0].UID: reported(cms[0], nodeapi.PhaseTrial), cms[1].UID: reported(cms[1], nodeapi.PhaseTrial)}
	// One node in benchFailEvery rolls each new config back after its
	// trial, as a component that cannot run it.
	rolledBack := map[types.UID]string{}
	for i, cm := range cms {
		src := func(cm *corev1.ConfigMap) *corev1.NodeConfigSource {
			return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
				Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: kubelet.PayloadKey,
			}}
		}
		st := &nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack, Assigned: src(cm), Active: src(cms[1-i]), LastKnownGood: src(cms[1-i]),
			Error: "failed to validate current (simulated)"}
		v, err := st.MarshalAnnotation()
		if err != nil {
			b.Fatal(err)
		}
		rolledBack[cm.UID] = v
	}
	fails := func(node string) bool {
		var i int
		_, err := fmt.Sscanf(node, "bench-node-%d", &i)
		return err == nil && i%benchFailEvery == benchFailEvery-1
	}
	trial := benchTrial
	type simWork struct {
		node    string
		uid     types.UID
		promote bool
	}
	work := make(chan simWork, 1<<16)
	var pending sync.Map // node name → the UID it is working on
	factory := informers.NewSharedInformerFactoryWithOptions(simClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label }))
	nodes := factory.Core().V1().Nodes()
	onNode := func(obj any) {
		n := obj.(*corev1.Node)
		src, err := nodeapi.ParseAssignment(n.Annotations[nodeapi.AssignmentAnnotation])
		if err != nil || src == nil {
			return
		}
		uid, cur := src.ConfigMap.UID, n.Annotations[nodeapi.StatusAnnotation]
		if promoted[uid] == "" || cur == promoted[uid] || cur == inTrial[uid] || cur == rolledBack[uid] {
			return
		}
		if _, busy := pending.LoadOrStore(n.Name, uid); !busy {
			work <- simWork{node: n.Name, uid: uid}
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onNode, UpdateFunc: func(_, o any) { onNode(o) }}); err != nil {
		b.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(ctx)
	defer stopSim()
	factory.Start(simCtx.Done())
	factory.WaitForCacheSync(simCtx.Done())
	report := func(node, value string) {
		patch := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{nodeapi.StatusAnnotation: value}}})
		_, _ = simClient.CoreV1().Nodes().Patch(simCtx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	}
	var sims sync.WaitGroup
	for range 16 {
		sims.Go(func() {
			for {
				select {
				case <-simCtx.Done():
					return
				case w := <-work:
					if !w.promote {
						report(w.node, inTrial[w.uid])
						time.AfterFunc(trial, func() {
							select {
							case work <- simWork{node: w.node, uid: w.uid, promote: true}:
							case <-simCtx.Done():
							}
						})
						continue
					}
					if fails(w.node) {
						report(w.node, rolledBack[w.uid])
					} else {
						report(w.node, promoted[w.uid])
					}
					pending.Delete(w.node)
				}
			}
		})
	}
	defer sims.Wait()
	defer stopSim()

	grow(sizes[0])
	rc := startRolloutProcess(ctx, b, h)
	dyn := dynamic.NewForConfigOrDie(cl.Config)
	ri := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace)

	steps := []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("10%")),
		nodesStep(intstr.FromString("25%")), nodesStep(intstr.FromString("50%")), nodesStep(intstr.FromString("100%"))}
	var results []benchResult
	for _, size := range sizes {
		grow(size)
		// Let the controller's informers take the new nodes in.
		time.Sleep(2 * time.Second)
		// The batches a step must wait for in turn: its new nodes, at
		// most maxUnavailable (10%) in trial at once.
		maxUnavailable := size / 10
		batches, done := 0, 0
		for _, target := range []int{1, (size + 9) / 10, (size + 3) / 4, (size + 1) / 2, size} {
			batches += (target - done + maxUnavailable - 1) / maxUnavailable
			done = target
		}
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			var stepTimes []time.Duration
			var total time.Duration
			var requestsPerNode float64
			var byController requestCount
			var objectBytes int
			statsBefore := rc.metrics(ctx, b)
			cpuBefore := rc.cpu(b)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := quiesce(ctx, h.client); err != nil {
					b.Fatal(err)
				}
				before, _, err := scrape(ctx, h.client)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				cm := cms[rollouts%2]
				name := fmt.Sprintf("bench-%d", rollouts)
				rollouts++
				times, took, objSize := runBenchRollout(ctx, b, ri, name, cm.Name, steps, label, int32(size/benchFailEvery+1))
				stepTimes = append(stepTimes, times...)
				total += took
				objectBytes = max(objectBytes, objSize)
				b.StopTimer()
				if err := quiesce(ctx, h.client); err != nil {
					b.Fatal(err)
				}
				after, _, err := scrape(ctx, h.client)
				if err != nil {
					b.Fatal(err)
				}
				byController = requestCount{}
				var n float64
				for k, v := range after.sub(before) {
					if (k.resource == "nodes" && k.subresource == "" && k.verb == "PATCH") || k.resource == "configrollouts" && k.subresource == "status" ||
						k.resource == "events" && k.verb != "LIST" && k.verb != "WATCH" {
						byController[k] = v
						n += v
					}
				}
				requestsPerNode = n / float64(size)
				// A finished rollout keeps its claims (for undo) until it
				// is deleted: delete it, so that the next one starts on
				// free nodes; its finalizer takes the claims off.
				if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
				waitDeleted(ctx, b, ri, name)
				b.StartTimer()
			}
			b.StopTimer()
			stats := rc.metrics(ctx, b)
			cpu := (rc.cpu(b) - cpuBefore).Seconds()
			nSteps := float64(len(stepTimes))
			waits := time.Duration(b.N*batches) * trial
			r := benchResult{
				nodes: size, objectKiB: float64(objectBytes) / 1024,
				stepSeconds: total.Seconds() / nSteps, overheadSec: (total - waits).Seconds() / nSteps,
				requestsPerNode: requestsPerNode, cpuSeconds: cpu / float64(b.N),
				heapMiB: stats["go_memstats_heap_inuse_bytes"] / (1 << 20), rssMiB: stats["process_resident_memory_bytes"] / (1 << 20),
			}
			b.ReportMetric(r.objectKiB, "object-KiB")
			b.ReportMetric(r.stepSeconds, "s/step")
			b.ReportMetric(r.overheadSec, "overhead-s/step")
			b.ReportMetric((stats["dynconfig_rollout_reconcile_duration_seconds"]-statsBefore["dynconfig_rollout_reconcile_duration_seconds"])/nSteps, "reconcile-s/step")
			b.ReportMetric(r.requestsPerNode, "requests/node")
			b.ReportMetric(r.cpuSeconds, "controller-cpu-s/rollout")
			b.ReportMetric(r.heapMiB, "controller-heap-MiB")
			b.ReportMetric(r.rssMiB, "controller-rss-MiB")
			var st []string
			for _, d := range stepTimes {
				st = append(st, d.Round(time.Millisecond).String())
			}
			qps := "default"
			if benchQPS > 0 {
				qps = fmt.Sprint(benchQPS)
			}
			b.Logf("%d nodes, QPS %s, %d rollouts of 5 steps, %d trial waits of %v each: step times %s; the controller's requests in the last rollout: %s; its CPU %.2f s",
				size, qps, b.N, batches, trial, strings.Join(st, " "), byController, cpu)
			if len(results) > 0 && results[len(results)-1].nodes == size {
				results[len(results)-1] = r // b.Run runs a sub-benchmark again with a larger b.N
			} else {
				results = append(results, r)
			}
		})
		// Written after each size, so that a size that breaks leaves the
		// ones before plotted.
		if dir := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_PLOT_DIR"); dir != "" && len(results) > 0 {
			if err := writeBenchPlot(dir, results, trial); err != nil {
				b.Error(err)
			}
		}
	}
}

// waitDeleted waits until a ConfigRollout is gone.
func waitDeleted(ctx context.Context, b *testing.B, ri dynamic.ResourceInterface, name string) {
	b.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		b.Fatalf("ConfigRollout %s was not deleted: %v", name, err)
	}
}

// writeBenchPlot writes rollout-scale.svg, one panel per measure against
// the fleet size, and rollout-scale.txt, the numbers.
func writeBenchPlot(dir string, results []benchResult, trial time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	panels := []struct {
		title string
		goal  float64
		value func(benchResult) float64
	}{
		{"ConfigRollout object (KiB; goal <= 256)", 256, func(r benchResult) float64 { return r.objectKiB }},
		{"overhead per step beyond the trial waits (s; goal < 1)", 1, func(r benchResult) float64 { return r.overheadSec }},
		{"controller requests per node (goal <= 2)", 2, func(r benchResult) float64 { return r.requestsPerNode }},
		{"controller CPU per rollout (s)", 0, func(r benchResult) float64 { return r.cpuSeconds }},
		{"controller heap in use (MiB)", 0, func(r benchResult) float64 { return r.heapMiB }},
		{"controller RSS (MiB)", 0, func(r benchResult) float64 { return r.rssMiB }},
	}
	const pw, ph, margin = 360, 220, 50
	var svg strings.Builder
	cols := 3
	rows := (len(panels) + cols - 1) / cols
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		cols*pw, rows*ph+30)
	fmt.Fprintf(&svg, `<text x="10" y="18" font-size="13">dynconfig rollout controller vs fleet size (one kube-apiserver; trial %v; 5 steps, maxUnavailable 10%%)</text>`+"\n", trial)
	maxN := float64(results[len(results)-1].nodes)
	for i, p := range panels {
		ox, oy := float64(i%cols*pw), float64(i/cols*ph+30)
		w, hgt := float64(pw-margin-15), float64(ph-margin-25)
		top := p.goal
		for _, r := range results {
			top = max(top, p.value(r))
		}
		top *= 1.15
		if top <= 0 {
			top = 1
		}
		x := func(n float64) float64 { return ox + margin + n/maxN*w }
		y := func(v float64) float64 { return oy + 20 + hgt - v/top*hgt }
		fmt.Fprintf(&svg, `<text x="%.0f" y="%.0f">%s</text>`+"\n", ox+10, oy+12, html.EscapeString(p.title))
		fmt.Fprintf(&svg, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(0), y(0), x(maxN), y(0))
		fmt.Fprintf(&svg, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(0), y(0), x(0), y(top))
		fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" text-anchor="end">%.3g</text>`+"\n", x(0)-3, y(top)+4, top)
		fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n", x(0)-3, y(0)+4)
		if p.goal > 0 {
			fmt.Fprintf(&svg, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="green" stroke-dasharray="4 3"/>`+"\n", x(0), y(p.goal), x(maxN), y(p.goal))
		}
		var pts []string
		for _, r := range results {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(r.nodes)), y(p.value(r))))
		}
		fmt.Fprintf(&svg, `<polyline fill="none" stroke="steelblue" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
		for _, r := range results {
			fmt.Fprintf(&svg, `<circle cx="%.1f" cy="%.1f" r="3" fill="steelblue"/>`+"\n", x(float64(r.nodes)), y(p.value(r)))
			fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" text-anchor="middle">%.3g</text>`+"\n", x(float64(r.nodes)), y(p.value(r))-6, p.value(r))
			fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(float64(r.nodes)), y(0)+14, r.nodes)
		}
	}
	svg.WriteString("</svg>\n")
	if err := os.WriteFile(filepath.Join(dir, "rollout-scale.svg"), []byte(svg.String()), 0o644); err != nil {
		return err
	}
	var txt strings.Builder
	fmt.Fprintf(&txt, "nodes\tobject-KiB\ts/step\toverhead-s/step\trequests/node\tcontroller-cpu-s/rollout\theap-MiB\trss-MiB\n")
	for _, r := range results {
		fmt.Fprintf(&txt, "%d\t%.1f\t%.2f\t%.2f\t%.3f\t%.2f\t%.1f\t%.1f\n", r.nodes, r.objectKiB, r.stepSeconds, r.overheadSec, r.requestsPerNode, r.cpuSeconds, r.heapMiB, r.rssMiB)
	}
	return os.WriteFile(filepath.Join(dir, "rollout-scale.txt"), []byte(txt.String()), 0o644)
}

// runBenchRollout creates a ConfigRollout and follows it with a watch until
// it completes; it returns the time of each step and of the whole, and the
// largest the object was (JSON bytes).
func runBenchRollout(ctx context.Context, b *testing.B, ri dynamic.ResourceInterface, name, configMap string, steps []v1alpha1.RolloutStep, label string, maxFailures int32) ([]time.Duration, time.Duration, int) {
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.ConfigRolloutSpec{
			ConfigMapName: configMap, Steps: steps, MaxUnavailable: ptr.To(intstr.FromString("10%")), MaxFailures: maxFailures,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			// The rollouts alternate between two ConfigMaps, and the nodes
			// that fail on purpose keep reporting the one they rolled back
			// bad: without this the fleet would refuse it the next time.
			AllowKnownBad: true,
		},
	}
	obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		b.Fatal(err)
	}
	// Follow the rollout with a watch: polling it would load the API
	// server the benchmark measures.
	w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if _, err := ri.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var stepTimes []time.Duration
	last, lastStep := start, int32(0)
	largest := 0
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			b.Fatalf("watching rollout %s: %v", name, ev.Object)
		}
		if raw, err := json.Marshal(u.Object); err == nil {
			largest = max(largest, len(raw))
		}
		var got v1alpha1.ConfigRollout
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
			b.Fatal(err)
		}
		if got.Status.CurrentStep != lastStep {
			now := time.Now()
			for range got.Status.CurrentStep - lastStep {
				stepTimes = append(stepTimes, now.Sub(last))
			}
			last, lastStep = now, got.Status.CurrentStep
		}
		switch {
		case got.Status.Phase == v1alpha1.PhaseCompleted:
			return stepTimes, time.Since(start), largest
		case !got.Status.Phase.Active():
			b.Fatalf("rollout %s: %s: %s", name, got.Status.Phase, got.Status.Message)
		}
	}
	b.Fatalf("rollout %s: the watch ended before the rollout completed", name)
	return nil, 0, 0
}

// rolloutProcess is the dynconfig-rollout binary, run apart so that the
// CPU and memory measured are the controller's alone.
type rolloutProcess struct {
	cmd     *exec.Cmd
	metrics func(ctx context.Context, b *testing.B) map[string]float64
}

// startRolloutProcess builds and starts dynconfig-rollout without leader
// election, at the benchmark's client rate limit, until b ends.
func startRolloutProcess(ctx context.Context, b *testing.B, h *harness) *rolloutProcess {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "dynconfig-rollout")
	if out, err := exec.Command("go", "build", "-o", bin, rolloutPackage).CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", rolloutPackage, err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, h.cl.KubeConfig, 0o600); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	logPath := filepath.Join(dir, "dynconfig-rollout.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-address", addr, "--profiling"}
	if benchQPS > 0 {
		args = append(args, "--kube-api-qps", fmt.Sprint(benchQPS), "--kube-api-burst", fmt.Sprint(2*benchQPS))
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Errorf("dynconfig-rollout: %v", err)
		}
		_ = logFile.Close()
		if b.Failed() {
			out, _ := os.ReadFile(logPath)
			b.Logf("dynconfig-rollout's log:\n%s", out)
		}
	})
	p := &rolloutProcess{cmd: cmd}
	p.metrics = func(ctx context.Context, b *testing.B) map[string]float64 {
		b.Helper()
		var body []byte
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			body, err = io.ReadAll(resp.Body)
			return err == nil && resp.StatusCode == http.StatusOK, nil
		})
		if err != nil {
			b.Fatalf("dynconfig-rollout's /metrics: %v", err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			b.Fatalf("dynconfig-rollout's /metrics: %v", err)
		}
		// Each family summed over its series; a histogram is its sum.
		out := map[string]float64{}
		for name, f := range families {
			for _, m := range f.GetMetric() {
				switch {
				case m.Counter != nil:
					out[name] += m.GetCounter().GetValue()
				case m.Gauge != nil:
					out[name] += m.GetGauge().GetValue()
				case m.Histogram != nil:
					out[name] += m.GetHistogram().GetSampleSum()
				}
			}
		}
		return out
	}
	p.metrics(ctx, b) // it serves
	if path := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_CPUPROFILE"); path != "" {
		// The controller's CPU profile over the first 30 s of the runs.
		go func() {
			resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=30")
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if f, err := os.Create(path); err == nil {
				_, _ = io.Copy(f, resp.Body)
				_ = f.Close()
			}
		}()
	}
	return p
}

// cpu is the user and system CPU time the process used so far.
func (p *rolloutProcess) cpu(b *testing.B) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14 and stime 15, in clock ticks (100 a second).
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		b.Fatalf("/proc/%d/stat: %q", p.cmd.Process.Pid, raw)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", p.cmd.Process.Pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestBenchPlotIsSVG: the plot the benchmark writes is well-formed XML
// with one line per measure.
func TestBenchPlotIsSVG(t *testing.T) {
	dir := t.TempDir()
	results := []benchResult{{nodes: 1000, objectKiB: 9.6, stepSeconds: 5.9, overheadSec: 1.1, requestsPerNode: 1.1, cpuSeconds: 4.5, heapMiB: 16, rssMiB: 50},
		{nodes: 5000, objectKiB: 9.3, stepSeconds: 5.6, overheadSec: 0.8, requestsPerNode: 1.0, cpuSeconds: 6.4, heapMiB: 60, rssMiB: 99}}
	if err := writeBenchPlot(dir, results, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "rollout-scale.svg"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(raw))
	lines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("rollout-scale.svg is not XML: %v\n%s", err, raw)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 6 {
		t.Errorf("%d lines plotted, want 6", lines)
	}
}
