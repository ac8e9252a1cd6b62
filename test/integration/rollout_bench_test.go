package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
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

// benchNodes is the fleet of BenchmarkRolloutController.
const benchNodes = 1000

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
// controller's client rate limit (burst twice that; default:
// dynconfig-rollout's defaults, 250 and 500),
// DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS the trial, and
// DYNCONFIG_ROLLOUT_BENCH_CPUPROFILE=FILE writes the controller's CPU
// profile of the first 30 s there.
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
	names := make([]string, benchNodes)
	for i := range names {
		names[i] = fmt.Sprintf("bench-node-%04d", i)
	}
	if err := parallel(benchNodes, func(i int) error {
		_, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: names[i], Labels: map[string]string{label: "true"},
			Annotations: map[string]string{nodeapi.AssignmentAnnotation: assignmentFor(cms[1]), nodeapi.StatusAnnotation: reported(cms[1], nodeapi.PhasePromoted)},
		}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}

	// The simulated components: whatever is assigned, report it in trial
	// (unless the trial is 0) and promoted once the trial is over.
	simClient := newClient(b, protobuf(cl.Config), 1000, 2000)
	promoted := map[types.UID]string{cms[0].UID: reported(cms[0], nodeapi.PhasePromoted), cms[1].UID: reported(cms[1], nodeapi.PhasePromoted)}
	inTrial := map[types.UID]string{cms[0].UID: reported(cms[0], nodeapi.PhaseTrial), cms[1].UID: reported(cms[1], nodeapi.PhaseTrial)}
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
		if json.Unmarshal([]byte(n.Annotations[nodeapi.AssignmentAnnotation]), &src) != nil || src.ConfigMap == nil {
			return
		}
		uid, cur := src.ConfigMap.UID, n.Annotations[nodeapi.StatusAnnotation]
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

	rc := startRolloutProcess(ctx, b, h)
	dyn := dynamic.NewForConfigOrDie(cl.Config)
	ri := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(namespace)
	// Let the controller's informers fill before measuring.
	time.Sleep(2 * time.Second)

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
			stats := rc.metrics(ctx, b)
			cpu := (rc.cpu(b) - cpuBefore).Seconds()
			nSteps := float64(len(stepTimes))
			waits := time.Duration(b.N*batches) * d
			b.ReportMetric(total.Seconds()/nSteps, "s/step")
			b.ReportMetric((total-waits).Seconds()/nSteps, "overhead-s/step")
			b.ReportMetric((stats["dynconfig_rollout_reconcile_duration_seconds"]-statsBefore["dynconfig_rollout_reconcile_duration_seconds"])/nSteps, "reconcile-s/step")
			b.ReportMetric(requestsPerNode, "requests/node")
			b.ReportMetric(cpu/nSteps, "controller-cpu-s/step")
			b.ReportMetric(stats["go_memstats_heap_inuse_bytes"]/(1<<20), "controller-heap-MiB")
			b.ReportMetric(stats["process_resident_memory_bytes"]/(1<<20), "controller-rss-MiB")
			var st []string
			for _, d := range stepTimes {
				st = append(st, d.Round(time.Millisecond).String())
			}
			qps := "default"
			if benchQPS > 0 {
				qps = fmt.Sprint(benchQPS)
			}
			b.Logf("%d nodes, QPS %s, %d rollouts of 5 steps, %d trial waits of %v each: step times %s; the controller's requests in the last rollout: %s; its CPU %.2f s",
				benchNodes, qps, b.N, batches, d, strings.Join(st, " "), byController, cpu)
		})
	}
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
