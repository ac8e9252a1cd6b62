package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/controller"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// benchNodes is the fleet of BenchmarkRolloutController.
const benchNodes = 1000

// benchQPS is the controller's client rate limit in the benchmark.
var benchQPS = float32(envInt("DYNCONFIG_ROLLOUT_BENCH_QPS", 100))

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchTrial is how long the simulated components of
// BenchmarkRolloutController/trial=... keep a config in trial.
var benchTrial = time.Duration(envInt("DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS", 2000)) * time.Millisecond

// BenchmarkRolloutController measures what the rollout controller adds to a
// rollout: 1000 Nodes whose components are simulated by one informer that
// reports through nodes/status, as status.NodeReporter does. Each
// iteration rolls one ConfigMap out in 5 steps (1, 10%, 25%, 50%, 100%;
// maxUnavailable 10%), alternating between two ConfigMaps. Two cases:
//
//   - trial=0s: a component reports a new assignment promoted at once. There
//     is nothing to wait for: the step times are the controller's and the API
//     server's alone, and the client's rate limit never refills (the worst
//     case; production has trial periods between batches).
//   - trial=2s: a component reports Trial at once and promoted 2 s later, as
//     a real one after its trial period. A step must wait for each of its
//     batches of maxUnavailable nodes in turn (12 waits over the 5 steps);
//     overhead-s/step is the step time beyond those waits.
//
// Both report seconds per step, the controller's API requests per node
// (counted by the API server: its Node PATCHes, status updates and Events),
// the time it spent planning and writing per step, the CPU of this process
// (the controller and the simulated components) and the heap the
// controller's caches hold. DYNCONFIG_ROLLOUT_BENCH_QPS sets the
// controller's client rate limit (default 100, dynconfig-rollout's
// default; burst twice that), DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS the trial.
//
//	cd test && go test -run XXX -bench RolloutController -benchtime 1x ./integration/
func BenchmarkRolloutController(b *testing.B) {
	cl := cluster.Start(b)
	h := &harness{cl: cl, client: newClient(b, cl.Config, 500, 1000)}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.Background().V(10)), 30*time.Minute)
	defer cancel()
	installRolloutCRD(ctx, b, h)
	label := "rollout-bench"
	var cms [2]*corev1.ConfigMap
	for i := range cms {
		cm, err := h.client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: namespace},
			Data:       map[string]string{kubelet.PayloadKey: kubeletPayload(100 + i)},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cms[i] = cm
	}
	reported := func(cm *corev1.ConfigMap, phase status.ConfigPhase) string {
		src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: kubelet.PayloadKey,
		}}
		st := &status.ConfigStatus{Phase: phase, Assigned: src, Active: src}
		if phase == status.PhasePromoted {
			st.LastKnownGood = src
		}
		v, err := st.MarshalAnnotation()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	names := make([]string, benchNodes)
	for i := range names {
		names[i] = fmt.Sprintf("bench-node-%04d", i)
	}
	if err := parallel(benchNodes, func(i int) error {
		_, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: names[i], Labels: map[string]string{label: "true"},
			Annotations: map[string]string{source.AnnotationKey: assignmentFor(cms[1]), status.ConfigStatusAnnotation: reported(cms[1], status.PhasePromoted)},
		}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}

	// The simulated components: whatever is assigned, report it in trial
	// (unless the trial is 0) and promoted once the trial is over.
	simClient := newClient(b, protobuf(cl.Config), 1000, 2000)
	promoted := map[types.UID]string{cms[0].UID: reported(cms[0], status.PhasePromoted), cms[1].UID: reported(cms[1], status.PhasePromoted)}
	inTrial := map[types.UID]string{cms[0].UID: reported(cms[0], status.PhaseTrial), cms[1].UID: reported(cms[1], status.PhaseTrial)}
	var trial atomic.Int64 // the current case's trial, in nanoseconds
	type simWork struct {
		node    string
		uid     types.UID
		promote bool
	}
	work := make(chan simWork, benchNodes)
	var pending sync.Map // node name → the UID it is working on
	factory := informers.NewSharedInformerFactoryWithOptions(simClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label }))
	nodes := factory.Core().V1().Nodes()
	onNode := func(obj any) {
		n := obj.(*corev1.Node)
		var src corev1.NodeConfigSource
		if json.Unmarshal([]byte(n.Annotations[source.AnnotationKey]), &src) != nil || src.ConfigMap == nil {
			return
		}
		uid, cur := src.ConfigMap.UID, n.Annotations[status.ConfigStatusAnnotation]
		if promoted[uid] == "" || cur == promoted[uid] || cur == inTrial[uid] {
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
		patch := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{status.ConfigStatusAnnotation: value}}})
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
					if d := time.Duration(trial.Load()); d > 0 && !w.promote {
						report(w.node, inTrial[w.uid])
						time.AfterFunc(d, func() {
							select {
							case work <- simWork{node: w.node, uid: w.uid, promote: true}:
							case <-simCtx.Done():
							}
						})
						continue
					}
					report(w.node, promoted[w.uid])
					pending.Delete(w.node)
				}
			}
		})
	}
	defer sims.Wait()
	defer stopSim()

	heapBefore, _ := heapInUse()
	rc := startRolloutControllerTB(ctx, b, h)
	dyn := dynamic.NewForConfigOrDie(cl.Config)
	ri := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace)
	// Let the controller's informers fill before measuring.
	time.Sleep(2 * time.Second)
	heapAfter, _ := heapInUse()

	steps := []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("10%")),
		nodesStep(intstr.FromString("25%")), nodesStep(intstr.FromString("50%")), nodesStep(intstr.FromString("100%"))}
	// The batches a step must wait for in turn: its new nodes, at most
	// maxUnavailable (10%) in trial at once.
	const maxUnavailable = benchNodes / 10
	batches, done := 0, 0
	for _, target := range []int{1, benchNodes / 10, benchNodes / 4, benchNodes / 2, benchNodes} {
		batches += (target - done + maxUnavailable - 1) / maxUnavailable
		done = target
	}
	rollouts := 0
	for _, d := range []time.Duration{0, benchTrial} {
		b.Run(fmt.Sprintf("trial=%v", d), func(b *testing.B) {
			trial.Store(int64(d))
			var stepTimes []time.Duration
			var total time.Duration
			var requestsPerNode float64
			var byController requestCount
			statsBefore := rc.Stats()
			cpuBefore := processCPU()
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
				times, took := runBenchRollout(ctx, b, ri, name, cm.Name, steps, label)
				stepTimes = append(stepTimes, times...)
				total += took
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
				requestsPerNode = n / benchNodes
				b.StartTimer()
			}
			b.StopTimer()
			stats := rc.Stats()
			// The test process: the controller, the simulated components and
			// the benchmark's watch (the API server and etcd run apart).
			cpu := (processCPU() - cpuBefore).Seconds()
			nSteps := float64(len(stepTimes))
			waits := time.Duration(b.N*batches) * d
			b.ReportMetric(total.Seconds()/nSteps, "s/step")
			b.ReportMetric((total-waits).Seconds()/nSteps, "overhead-s/step")
			b.ReportMetric((stats.ReconcileTime-statsBefore.ReconcileTime).Seconds()/nSteps, "reconcile-s/step")
			b.ReportMetric(requestsPerNode, "requests/node")
			b.ReportMetric(cpu/nSteps, "process-cpu-s/step")
			b.ReportMetric(float64(int64(heapAfter)-int64(heapBefore))/(1<<20), "controller-heap-MiB")
			var st []string
			for _, d := range stepTimes {
				st = append(st, d.Round(time.Millisecond).String())
			}
			b.Logf("%d nodes, QPS %v, %d rollouts of 5 steps, %d trial waits of %v each: step times %s; the controller's requests in the last rollout: %s; its own count: %+v",
				benchNodes, benchQPS, b.N, batches, d, strings.Join(st, " "), byController, stats)
		})
	}
	runtime.KeepAlive(rc)
}

// runBenchRollout creates a ConfigRollout and follows it with a watch until
// it completes; it returns the time of each step and of the whole.
func runBenchRollout(ctx context.Context, b *testing.B, ri dynamic.ResourceInterface, name, configMap string, steps []v1alpha1.RolloutStep, label string) ([]time.Duration, time.Duration) {
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.ConfigRolloutSpec{
			ConfigMapName: configMap, Steps: steps, MaxUnavailable: ptr.To(intstr.FromString("10%")),
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
		},
	}
	obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		b.Fatal(err)
	}
	// Follow the rollout with a watch: polling its status (a thousand node
	// records) would load the API server the benchmark measures.
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
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			b.Fatalf("watching rollout %s: %v", name, ev.Object)
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
			return stepTimes, time.Since(start)
		case !got.Status.Phase.Active():
			b.Fatalf("rollout %s: %s: %s", name, got.Status.Phase, got.Status.Message)
		}
	}
	b.Fatalf("rollout %s: the watch ended before the rollout completed", name)
	return nil, 0
}

// processCPU is the user and system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startRolloutControllerTB runs one replica without leader election until
// tb ends.
func startRolloutControllerTB(ctx context.Context, tb testing.TB, h *harness) *controller.Controller {
	tb.Helper()
	cfg := limited(h.cl.Config, benchQPS, 2*int(benchQPS))
	c, err := controller.New(controller.Options{
		Client: newClient(tb, protobuf(cfg), benchQPS, 2*int(benchQPS)), Dynamic: dynamic.NewForConfigOrDie(cfg),
	})
	if err != nil {
		tb.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("rollout controller: %v", err)
		}
	})
	return c
}
