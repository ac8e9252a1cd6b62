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

// BenchmarkRolloutController measures what the rollout controller adds to a
// rollout: 1000 Nodes whose components are simulated by one informer that
// reports a new assignment promoted at once (through nodes/status, as
// status.NodeReporter does), so that every step's time is the controller's
// and the API server's, with no trial to wait for. Each iteration rolls one
// ConfigMap out in 5 steps (1, 10%, 25%, 50%, 100%; maxUnavailable 10%),
// alternating between two ConfigMaps. It reports seconds per step, the
// controller's API requests per node (counted by the API server: its Node
// PATCHes, status updates and Events), the time spent planning and
// writing per step, and the heap the controller's caches hold.
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
	promoted := func(cm *corev1.ConfigMap) string {
		src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: kubelet.PayloadKey,
		}}
		v, err := (&status.ConfigStatus{Phase: status.PhasePromoted, Assigned: src, Active: src, LastKnownGood: src}).MarshalAnnotation()
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
			Annotations: map[string]string{source.AnnotationKey: assignmentFor(cms[1]), status.ConfigStatusAnnotation: promoted(cms[1])},
		}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}

	// The simulated components: report promoted whatever is assigned.
	simClient := newClient(b, cl.Config, 1000, 2000)
	byUID := map[types.UID]string{cms[0].UID: promoted(cms[0]), cms[1].UID: promoted(cms[1])}
	work := make(chan string, benchNodes)
	factory := informers.NewSharedInformerFactoryWithOptions(simClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label }))
	nodes := factory.Core().V1().Nodes()
	onNode := func(obj any) {
		n := obj.(*corev1.Node)
		var src corev1.NodeConfigSource
		if json.Unmarshal([]byte(n.Annotations[source.AnnotationKey]), &src) != nil || src.ConfigMap == nil {
			return
		}
		if want := byUID[src.ConfigMap.UID]; want != "" && n.Annotations[status.ConfigStatusAnnotation] != want {
			work <- n.Name
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onNode, UpdateFunc: func(_, o any) { onNode(o) }}); err != nil {
		b.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(ctx)
	defer stopSim()
	factory.Start(simCtx.Done())
	factory.WaitForCacheSync(simCtx.Done())
	var sims sync.WaitGroup
	for range 16 {
		sims.Go(func() {
			for {
				select {
				case <-simCtx.Done():
					return
				case name := <-work:
					n, err := nodes.Lister().Get(name)
					if err != nil {
						continue
					}
					var src corev1.NodeConfigSource
					if json.Unmarshal([]byte(n.Annotations[source.AnnotationKey]), &src) != nil || src.ConfigMap == nil {
						continue
					}
					patch := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{status.ConfigStatusAnnotation: byUID[src.ConfigMap.UID]}}})
					_, _ = simClient.CoreV1().Nodes().Patch(simCtx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
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
	var stepTimes []time.Duration
	var total time.Duration
	var requestsPerNode float64
	var byController requestCount
	reconcileBefore := rc.Stats().ReconcileTime
	cpuBefore := processCPU()
	b.ResetTimer()
	for i := range b.N {
		if err := quiesce(ctx, h.client); err != nil {
			b.Fatal(err)
		}
		before, _, err := scrape(ctx, h.client)
		if err != nil {
			b.Fatal(err)
		}
		cm := cms[i%2]
		name := fmt.Sprintf("bench-%d", i)
		ro := &v1alpha1.ConfigRollout{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: v1alpha1.ConfigRolloutSpec{
				ConfigMapName: cm.Name, Steps: steps, MaxUnavailable: ptr.To(intstr.FromString("10%")),
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			},
		}
		obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(ro)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := ri.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		last, lastStep := start, int32(0)
		for {
			u, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
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
			if got.Status.Phase == v1alpha1.PhaseCompleted {
				break
			}
			if !got.Status.Phase.Active() {
				b.Fatalf("rollout %s: %s: %s", name, got.Status.Phase, got.Status.Message)
			}
			time.Sleep(20 * time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := quiesce(ctx, h.client); err != nil {
			b.Fatal(err)
		}
		after, _, err := scrape(ctx, h.client)
		if err != nil {
			b.Fatal(err)
		}
		d := after.sub(before)
		byController = requestCount{}
		var n float64
		for k, v := range d {
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
	reconcile := (rc.Stats().ReconcileTime - reconcileBefore).Seconds()
	// The test process: the controller, the simulated components and the
	// benchmark's polling (the API server and etcd run apart).
	cpu := (processCPU() - cpuBefore).Seconds()
	nSteps := float64(len(stepTimes))
	b.ReportMetric(total.Seconds()/nSteps, "s/step")
	b.ReportMetric(reconcile/nSteps, "reconcile-s/step")
	b.ReportMetric(requestsPerNode, "requests/node")
	b.ReportMetric(cpu/nSteps, "process-cpu-s/step")
	b.ReportMetric(float64(int64(heapAfter)-int64(heapBefore))/(1<<20), "controller-heap-MiB")
	var st []string
	for _, d := range stepTimes {
		st = append(st, d.Round(time.Millisecond).String())
	}
	b.Logf("%d nodes, %d rollouts of 5 steps: step times %s; the controller's requests in the last rollout: %s; its own count: %+v",
		benchNodes, b.N, strings.Join(st, " "), byController, rc.Stats())
	runtime.KeepAlive(rc)
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
		Client: newClient(tb, cfg, benchQPS, 2*int(benchQPS)), Dynamic: dynamic.NewForConfigOrDie(cfg),
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
