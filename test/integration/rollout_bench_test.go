package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig/components"
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

// benchPartial is how many nodes the rollout selects at the sizes of
// DYNCONFIG_ROLLOUT_BENCH_PARTIAL_SIZES (the first ones; label
// partialLabel), where the whole fleet is synced and planned over but a
// whole rollout would not fit this machine.
const benchPartial = 1000

// partialLabel marks the first benchPartial nodes.
const partialLabel = "rollout-bench-first"

// benchSimWorkers is how many reports the simulated components send at
// once.
const benchSimWorkers = 128

// benchTrial is how long the simulated components of
// BenchmarkRolloutController keep a config in trial.
var benchTrial = time.Duration(envInt("DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS", 2000)) * time.Millisecond

// benchResult is what BenchmarkRolloutController measured at one size,
// for one controller (this tree's, or the baseline's).
type benchResult struct {
	controller               string  // "new", or "old@<commit>"
	nodes, real              int     // the fleet; of it, real Controllers
	selected                 int     // the nodes the rollout selects: the fleet, or benchPartial of it
	objectKiB                float64 // the largest ConfigRollout object seen
	stepSeconds, overheadSec float64 // per step; overhead beyond the trial waits
	// floorSec is the least overhead per step the API server allows: a
	// rollout makes 3 PATCHes a node (the controller's assignment, the
	// component's trial and promotion reports), which take at least
	// 3*nodes/probeRate, and only the trial waits can overlap them:
	// max(0, 3*nodes/probeRate - trial waits) / steps. ctlFloorSec is the
	// controller's own share, nodes/probeRate/steps.
	floorSec, ctlFloorSec float64
	requestsPerNode       float64
	deletePerNode         float64 // the controller's requests per node to delete the rollout (its claims taken off)
	events                float64 // of them, the controller's Events of the rollout (created and repeated), through its deletion
	otherEvents           float64 // Events of others (the real Controllers') during the rollout, not counted
	cpuSeconds            float64 // the controller's, per rollout
	heapMiB, rssMiB       float64
	rssPeakMiB            float64 // the controller's peak RSS (VmHWM), since it started
	rssAnonMiB            float64 // of its RSS, the anonymous memory (heap, stacks; not the binary's pages)
	// The API server's and etcd's CPU per rollout, and the test process's
	// (the simulated components and the real Controllers).
	apiCPU, etcdCPU, simCPU float64
	probeRate               float64 // Node PATCHes a second the API server sustained
	patchRate               float64 // the controller's Node PATCHes a second, averaged over the rollout
	plans                   float64 // reconciles per rollout (with its deletion)
	conflicts, throttled    float64 // the API server's 409s and 429s during the rollout
	serverErrors            float64 // its 5xx
	realPromoted            int     // real Controllers that promoted the rollout's config
	load                    string  // /proc/loadavg when the size ended
}

// BenchmarkRolloutController measures what the rollout controller adds to a
// rollout as the fleet grows: at each size (benchSizes) the Nodes (shaped
// on a real kubelet's, realNodeFile) exist on one real kube-apiserver, and
// their components are simulated by one
// informer that answers each assignment through the API server as a
// component does: Trial at once, Promoted benchTrial later (the status
// annotation, through nodes/status), or RolledBack for one node in
// benchFailEvery. benchRealControllers of the nodes (spread over the
// fleet, the canary among them) run the library's real Controller instead,
// in this process, with the ConfigMaps' trial set to benchTrial. Each
// iteration rolls one ConfigMap out in 5 steps (1, 10%, 25%, 50%, 100%;
// maxUnavailable 10%), alternating between two ConfigMaps; a step waits
// for each of its batches of maxUnavailable nodes in turn (12 waits over
// the 5 steps).
//
// At each size a fresh dynconfig-rollout process runs the rollout (its
// heap and RSS are then those of a controller that synced that fleet and
// ran one rollout). Before it, the API server's capacity is probed: an
// unthrottled client patches the Nodes (at most 5,000), 64 at a time, and
// the rate it sustains bounds the rollout: it makes 3 PATCHes a node (the
// controller's, and the component's trial and promotion reports), and
// only the trial waits can hide them (benchResult.floorSec). At the sizes of
// DYNCONFIG_ROLLOUT_BENCH_BASELINE_SIZES (default 1000) the same rollout
// is first run by the controller of an earlier commit
// (DYNCONFIG_ROLLOUT_BENCH_BASELINE, built from this repository's history;
// "none" skips it), in its own namespace, for a same-run comparison.
//
// Per size it reports: the largest ConfigRollout object seen during the
// rollout (KiB; goal at most 256), seconds per step and the overhead per
// step beyond the trial waits (goal below 1 s) next to the API server's
// floor, the controller's API requests per node over the rollout's whole
// life (counted by the API server: its Node PATCHes and ConfigRollout
// writes; and its own Events of the rollout, from the Events: the real
// Controllers' are not its) and, apart, to delete the rollout, the
// controller's CPU per rollout, its heap, RSS, peak RSS and anonymous RSS,
// the CPU the API server, etcd and this process used, the API server's
// 409, 429 and 5xx answers, and the load average; and in the log, the
// rollout's status writes by the fields they changed.
// With DYNCONFIG_ROLLOUT_BENCH_PLOT_DIR set it writes rollout-scale.svg
// (the growth of each against the fleet) and rollout-scale.txt (the
// table) there after each size. DYNCONFIG_ROLLOUT_BENCH_QPS sets both
// controllers' client rate limit (burst twice that; default: each
// binary's defaults), DYNCONFIG_ROLLOUT_BENCH_TRIAL_MS the trial,
// DYNCONFIG_ROLLOUT_BENCH_REAL the number of real Controllers,
// DYNCONFIG_ROLLOUT_BENCH_GOMEMLIMIT the controllers' GOMEMLIMIT,
// DYNCONFIG_ROLLOUT_BENCH_CPUPROFILE=DIR writes the controller's CPU
// profile of the first 30 s of each size's rollout there
// (cpu-<nodes>.pprof), DYNCONFIG_ROLLOUT_BENCH_HEAPPROFILE=DIR its heap
// profile after each size's rollout and deletion (heap-<nodes>.pprof).
// At the sizes of DYNCONFIG_ROLLOUT_BENCH_PARTIAL_SIZES the rollout
// selects only the first benchPartial nodes (the controller still syncs
// and plans over the whole fleet; requests are then per selected node):
// a whole rollout of 50,000 realistic Nodes is about 150,000 PATCHes of
// 12 KB objects, half an hour of this shared 2-core machine and more
// than etcd's default 2 GiB quota holds between compactions.
//
//	cd test && go test -run XXX -bench RolloutController -benchtime 1x ./integration/
func BenchmarkRolloutController(b *testing.B) {
	sizes := benchSizes(b)
	baseline, baselineSizes := benchBaselineCommit(), benchBaselineSizes()
	if baseline == "none" {
		baselineSizes = nil
	}
	// The baseline from git history is built before any clock starts.
	var oldBin string
	if len(baselineSizes) > 0 {
		oldBin = buildBaseline(b, baseline)
	}
	cl := cluster.Start(b)
	h := &harness{cl: cl, client: newClient(b, cl.Config, 500, 1000)}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.Background().V(10)), 150*time.Minute)
	defer cancel()
	installRolloutCRD(ctx, b, h)
	label, realLabel := "rollout-bench", "rollout-bench-real"
	const baselineNS = "bench-old"
	if len(baselineSizes) > 0 {
		if _, err := h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: baselineNS}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// Two ConfigMaps for this tree's controller, two for the baseline's
	// (a rollout assigns a ConfigMap of its own namespace). Their trial is
	// the simulated components' (the real Controllers read it).
	newCM := func(ns, name string, maxPods int) *corev1.ConfigMap {
		cm, err := h.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{components.TrialDurationAnnotation: benchTrial.String()}},
			Data:       map[string]string{kubelet.PayloadKey: kubeletPayload(maxPods)},
			Immutable:  ptr.To(true),
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return cm
	}
	var cms, oldCMs [2]*corev1.ConfigMap
	for i := range cms {
		cms[i] = newCM(namespace, fmt.Sprintf("bench-%d", i), 100+i)
		if len(baselineSizes) > 0 {
			oldCMs[i] = newCM(baselineNS, fmt.Sprintf("bench-old-%d", i), 102+i)
		}
	}
	source := func(cm *corev1.ConfigMap) *corev1.NodeConfigSource {
		return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, ResourceVersion: cm.ResourceVersion, KubeletConfigKey: kubelet.PayloadKey,
		}}
	}
	annotation := func(st *nodeapi.ConfigStatus) string {
		v, err := st.MarshalAnnotation()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	// What a simulated component reports for each ConfigMap: in trial,
	// promoted, or rolled back to the other ConfigMap of its pair.
	promoted, inTrial, rolledBack := map[types.UID]string{}, map[types.UID]string{}, map[types.UID]string{}
	for _, pair := range [][2]*corev1.ConfigMap{cms, oldCMs} {
		for i, cm := range pair {
			if cm == nil {
				continue
			}
			src := source(cm)
			promoted[cm.UID] = annotation(&nodeapi.ConfigStatus{Phase: nodeapi.PhasePromoted, Assigned: src, Active: src, LastKnownGood: src})
			inTrial[cm.UID] = annotation(&nodeapi.ConfigStatus{Phase: nodeapi.PhaseTrial, Assigned: src, Active: src})
			other := source(pair[1-i])
			rolledBack[cm.UID] = annotation(&nodeapi.ConfigStatus{Phase: nodeapi.PhaseRolledBack, Assigned: src, Active: other, LastKnownGood: other,
				Error: "failed to validate current (simulated)"})
		}
	}
	// The fleet, grown to each size in turn. A new node starts on the
	// ConfigMap the previous rollout left the others on, so that the next
	// rollout assigns every node (rollouts alternate between the two).
	// The nodes of the real Controllers are spread over the first size.
	created, rollouts := 0, 0
	realAt := map[int]bool{}
	var realNames []string
	for j := range min(benchRealControllers, sizes[0]) {
		i := j * sizes[0] / max(benchRealControllers, 1)
		realAt[i] = true
		realNames = append(realNames, fmt.Sprintf("bench-node-%05d", i))
	}
	// Each Node is shaped on a real one (realNodeFile: labels, managed
	// fields, conditions, addresses, images, capacity, nodeInfo, 12,023
	// bytes of JSON: realNodeBytes), with its own name, ids and addresses.
	realistic, _ := realisticNodes(b)
	grow := func(n int) {
		on := cms[(rollouts+1)%2]
		if err := parallel(n-created, func(i int) error {
			i += created
			node := realistic(i)
			node.Name = fmt.Sprintf("bench-node-%05d", i)
			node.UID, node.ResourceVersion, node.CreationTimestamp = "", "", metav1.Time{}
			node.Labels["kubernetes.io/hostname"] = node.Name
			node.Labels[label] = "true"
			if i < benchPartial {
				node.Labels[partialLabel] = "true"
			}
			for k := range node.Annotations {
				if strings.HasPrefix(k, "dynconfig.io/") {
					delete(node.Annotations, k)
				}
			}
			node.Annotations[nodeapi.AssignmentAnnotation] = assignmentFor(on)
			if realAt[i] {
				node.Labels[realLabel] = "true" // its Controller reports
			} else {
				node.Annotations[nodeapi.StatusAnnotation] = promoted[on.UID]
			}
			_, err := h.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			return err
		}); err != nil {
			b.Fatalf("growing the fleet to %d nodes: %v", n, err)
		}
		created = n
	}
	fails := func(node string) bool {
		var i int
		_, err := fmt.Sscanf(node, "bench-node-%d", &i)
		return err == nil && i%benchFailEvery == benchFailEvery-1 && !realAt[i]
	}

	// The simulated components: whatever is assigned, report it in trial
	// and promoted once the trial is over. A fleet's components each have
	// their own client: theirs is not rate-limited, and benchSimWorkers
	// report at once, so that the API server, not the simulation, bounds
	// how fast they answer.
	simClient := newClient(b, protobuf(cl.Config), -1, 0)
	trial := benchTrial
	type simWork struct {
		node    string
		uid     types.UID
		promote bool
	}
	work := make(chan simWork, 1<<17)
	var pending sync.Map // node name → the UID it is working on
	factory := informers.NewSharedInformerFactoryWithOptions(simClient, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label + ",!" + realLabel }))
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
	for range benchSimWorkers {
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
	startRealControllers(ctx, b, h, realNames)
	newBin := rolloutBin.Build(b)
	dyn := dynamic.NewForConfigOrDie(cl.Config)
	probeClient := newClient(b, protobuf(cl.Config), -1, 0)

	steps := []v1alpha1.RolloutStep{nodesStep(intstr.FromInt32(1)), nodesStep(intstr.FromString("10%")),
		nodesStep(intstr.FromString("25%")), nodesStep(intstr.FromString("50%")), nodesStep(intstr.FromString("100%"))}
	var results []benchResult
	baselineRuns := 0
	partialSizes := benchSizeSet("DYNCONFIG_ROLLOUT_BENCH_PARTIAL_SIZES", "")
	for _, size := range sizes {
		grow(size)
		// Let the informers take the new nodes in.
		time.Sleep(2 * time.Second)
		selected, selector := size, label
		if partialSizes[size] {
			selected, selector = min(size, benchPartial), partialLabel
		}
		// The batches a step must wait for in turn: its new nodes, at
		// most maxUnavailable (10%) in trial at once.
		maxUnavailable := selected / 10
		batches, done := 0, 0
		for _, target := range []int{1, (selected + 9) / 10, (selected + 3) / 4, (selected + 1) / 2, selected} {
			batches += (target - done + maxUnavailable - 1) / maxUnavailable
			done = target
		}
		var probeNames []string
		for i := 0; i < selected && len(probeNames) < 5000; i++ {
			if !realAt[i] {
				probeNames = append(probeNames, fmt.Sprintf("bench-node-%05d", i))
			}
		}
		if err := quiesce(ctx, h.client); err != nil {
			b.Fatal(err)
		}
		rate, apiPer, etcdPer, err := probePatchRate(ctx, probeClient, probeNames, size)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%d nodes: the API server sustained %.0f Node PATCHes/s (%d, 64 at a time, unthrottled), %.2f ms of its CPU and %.2f ms of etcd's each; load %s",
			size, rate, len(probeNames), float64(apiPer)/1e6, float64(etcdPer)/1e6, loadAverage())

		type run struct {
			name, controller, ns string
			bin                  string
			cms                  [2]*corev1.ConfigMap
			rollout              func() int // its number, for its name and ConfigMap
		}
		runs := []run{{name: fmt.Sprintf("nodes=%d", size), controller: "new", ns: namespace, bin: newBin, cms: cms,
			rollout: func() int { rollouts++; return rollouts - 1 }}}
		if baselineSizes[size] && !partialSizes[size] {
			runs = append([]run{{name: fmt.Sprintf("baseline=%s/nodes=%d", baseline, size), controller: "old@" + baseline, ns: baselineNS, bin: oldBin, cms: oldCMs,
				rollout: func() int { baselineRuns++; return baselineRuns - 1 }}}, runs...)
		}
		for _, rn := range runs {
			switch {
			case rn.ns != namespace:
				// A deleted rollout of this tree's controller leaves its
				// claims on the Nodes (stale: any rollout of its namespace
				// takes them over), but the baseline watches another
				// namespace and cannot tell them from live ones: take
				// them off, as an operator would, before it runs.
				releaseStaleClaims(ctx, b, h, label, namespace)
			case len(runs) > 1:
				// And the baseline's (since ec4f0a3 it leaves them too).
				releaseStaleClaims(ctx, b, h, label, baselineNS)
			}
			ri := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(rn.ns)
			b.Run(rn.name, func(b *testing.B) {
				rc := startRolloutProcess(ctx, b, h, rn.bin, "--namespace", rn.ns)
				// Let it sync and settle before the clock starts.
				if err := quiesce(ctx, h.client); err != nil {
					b.Fatal(err)
				}
				r := benchResult{controller: rn.controller, nodes: size, selected: selected, real: len(realNames), probeRate: rate}
				var stepTimes []time.Duration
				var total time.Duration
				var byController requestCount
				var objectBytes int
				var ctlPatches float64
				statsBefore := rc.metrics(ctx, b)
				cpuBefore := rc.cpu(b)
				api, etcd := childPID("kube-apiserver"), childPID("etcd")
				apiBefore, etcdBefore, simBefore := cpuOf(api), cpuOf(etcd), cpuOf(os.Getpid())
				codesBefore := apiCodes(ctx, b, h.client)
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
					k := rn.rollout()
					cm := rn.cms[k%2]
					name := fmt.Sprintf("bench-%d", k)
					if dir := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_CPUPROFILE"); dir != "" && rn.controller == "new" {
						rc.profile(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", size)), 30*time.Second)
					}
					b.StartTimer()
					times, took, objSize, writes := runBenchRollout(ctx, b, ri, rn.ns, name, cm.Name, steps, selector, int32(selected/benchFailEvery+1))
					b.Logf("%s controller, %d nodes: the rollout's status writes as its watch saw them, by the fields they changed: %s", rn.controller, size, writes)
					stepTimes = append(stepTimes, times...)
					total += took
					objectBytes = max(objectBytes, objSize)
					b.StopTimer()
					r.realPromoted = countPromoted(ctx, b, h.client, realNames, cm)
					if err := quiesce(ctx, h.client); err != nil {
						b.Fatal(err)
					}
					after, _, err := scrape(ctx, h.client)
					if err != nil {
						b.Fatal(err)
					}
					var n float64
					diff := after.sub(before)
					byController, n = controllerRequests(diff)
					ctlPatches = byController[requestKey{"PATCH", "nodes", ""}]
					// The Events: the controller's own (of this rollout),
					// counted from the Events themselves; the rest (the real
					// Controllers') apart.
					own := rolloutEvents(ctx, b, h, rn.ns, name)
					r.events = own
					r.otherEvents = max(0, diff.only([]string{"events"}, true).writes()-own)
					r.requestsPerNode = (n + own) / float64(selected)
					// A finished rollout keeps its claims (for undo) while it
					// exists: delete it, so that the next one may take its
					// nodes (this tree's controller leaves the claims, stale;
					// the baseline's finalizer takes them off).
					if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						b.Fatal(err)
					}
					waitDeleted(ctx, b, ri, name)
					if err := quiesce(ctx, h.client); err != nil {
						b.Fatal(err)
					}
					deleted, _, err := scrape(ctx, h.client)
					if err != nil {
						b.Fatal(err)
					}
					_, n = controllerRequests(deleted.sub(after))
					ownAll := rolloutEvents(ctx, b, h, rn.ns, name)
					r.deletePerNode = (n + ownAll - r.events) / float64(selected)
					r.events = ownAll
					if dir := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_HEAPPROFILE"); dir != "" && rn.controller == "new" {
						rc.heapProfile(ctx, b, filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", size)))
					}
					b.StartTimer()
				}
				b.StopTimer()
				// The CPU of the rollouts and their deletions (the
				// releases of the claims).
				stats := rc.metrics(ctx, b)
				codes := apiCodes(ctx, b, h.client)
				r.cpuSeconds = (rc.cpu(b) - cpuBefore).Seconds() / float64(b.N)
				r.apiCPU = (cpuOf(api) - apiBefore).Seconds() / float64(b.N)
				r.etcdCPU = (cpuOf(etcd) - etcdBefore).Seconds() / float64(b.N)
				r.simCPU = (cpuOf(os.Getpid()) - simBefore).Seconds() / float64(b.N)
				r.conflicts, r.throttled = codes["409"]-codesBefore["409"], codes["429"]-codesBefore["429"]
				for c, v := range codes {
					if strings.HasPrefix(c, "5") {
						r.serverErrors += v - codesBefore[c]
					}
				}
				nSteps := float64(len(stepTimes))
				waits := time.Duration(b.N*batches) * trial
				r.objectKiB = float64(objectBytes) / 1024
				r.stepSeconds, r.overheadSec = total.Seconds()/nSteps, (total-waits).Seconds()/nSteps
				r.floorSec = max(0, 3*float64(selected)/rate-(time.Duration(batches)*trial).Seconds()) / 5
				r.ctlFloorSec = float64(selected) / rate / 5
				r.heapMiB, r.rssMiB = stats["go_memstats_heap_inuse_bytes"]/(1<<20), stats["process_resident_memory_bytes"]/(1<<20)
				mem := procMemory(b, rc.cmd.Process.Pid)
				r.rssPeakMiB, r.rssAnonMiB = float64(mem["VmHWM"])/(1<<20), float64(mem["RssAnon"])/(1<<20)
				r.patchRate = ctlPatches / (total.Seconds() / float64(b.N))
				r.load = loadAverage()
				b.ReportMetric(r.objectKiB, "object-KiB")
				b.ReportMetric(r.stepSeconds, "s/step")
				b.ReportMetric(r.overheadSec, "overhead-s/step")
				b.ReportMetric(r.floorSec, "apiserver-floor-s/step")
				b.ReportMetric((stats["dynconfig_rollout_reconcile_duration_seconds"]-statsBefore["dynconfig_rollout_reconcile_duration_seconds"])/nSteps, "reconcile-s/step")
				r.plans = (stats["dynconfig_rollout_reconcile_duration_seconds_count"] - statsBefore["dynconfig_rollout_reconcile_duration_seconds_count"]) / float64(b.N)
				b.ReportMetric(r.plans, "plans/rollout")
				b.ReportMetric(r.requestsPerNode, "requests/node")
				b.ReportMetric(r.deletePerNode, "delete-requests/node")
				b.ReportMetric(r.cpuSeconds, "controller-cpu-s/rollout")
				b.ReportMetric(r.cpuSeconds*1000/float64(size), "controller-cpu-ms/node")
				b.ReportMetric(r.heapMiB, "controller-heap-MiB")
				b.ReportMetric(r.rssMiB, "controller-rss-MiB")
				b.ReportMetric(r.rssPeakMiB, "controller-rss-peak-MiB")
				b.ReportMetric(r.rssAnonMiB, "controller-rss-anon-MiB")
				b.ReportMetric(r.apiCPU, "apiserver-cpu-s/rollout")
				var st []string
				for _, d := range stepTimes {
					st = append(st, d.Round(time.Millisecond).String())
				}
				qps := "default"
				if benchQPS > 0 {
					qps = fmt.Sprint(benchQPS)
				}
				b.Logf("%s controller, %d nodes (%d real Controllers, %d of them promoted), QPS %s, %d rollouts of 5 steps, %d trial waits of %v each: step times %s; "+
					"the controller's requests in the last rollout: %s and %.0f Events of its own, through its deletion (%.0f Events of others not counted) (%.0f Node PATCHes/s), to delete it %.3f a node; peak RSS %.1f MiB, anonymous RSS %.1f MiB; CPU per rollout: controller %.2f s, API server %.2f s, etcd %.2f s, this process %.2f s; "+
					"the API server's 409s %.0f, 429s %.0f, 5xx %.0f; its probe before: %.0f PATCHes/s, %.2f ms of its CPU and %.2f ms of etcd's each; load %s",
					rn.controller, size, r.real, r.realPromoted, qps, b.N, batches, trial, strings.Join(st, " "), byController, r.events, r.otherEvents, r.patchRate, r.deletePerNode, r.rssPeakMiB, r.rssAnonMiB,
					r.cpuSeconds, r.apiCPU, r.etcdCPU, r.simCPU, r.conflicts, r.throttled, r.serverErrors, rate, float64(apiPer)/1e6, float64(etcdPer)/1e6, r.load)
				if r.realPromoted != r.real {
					b.Errorf("%d of %d real Controllers promoted the rollout's ConfigMap", r.realPromoted, r.real)
				}
				if i := slices.IndexFunc(results, func(o benchResult) bool { return o.nodes == size && o.controller == r.controller }); i >= 0 {
					results[i] = r // b.Run runs a sub-benchmark again with a larger b.N
				} else {
					results = append(results, r)
				}
			})
		}
		// Written after each size, so that a size that breaks leaves the
		// ones before plotted.
		if dir := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_PLOT_DIR"); dir != "" && len(results) > 0 {
			if err := writeBenchPlot(dir, results, trial); err != nil {
				b.Error(err)
			}
		}
	}
}

// releaseStaleClaims takes off the Nodes labelled label the claims of
// rollouts of namespace ns (none of which exists any more).
func releaseStaleClaims(ctx context.Context, b *testing.B, h *harness, label, ns string) {
	b.Helper()
	list, err := h.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		if c, err := nodeapi.ReadClaim(&n, ""); err == nil && c != nil && c.Namespace == ns {
			names = append(names, n.Name)
		}
	}
	patch := []byte(mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]any{nodeapi.ClaimAnnotation: nil}}}))
	if err := parallel(len(names), func(i int) error {
		_, err := h.client.CoreV1().Nodes().Patch(ctx, names[i], types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}); err != nil {
		b.Fatalf("taking stale claims off: %v", err)
	}
	b.Logf("took the stale claims of namespace %s off %d Nodes before the baseline", ns, len(names))
}

// controllerRequests keeps the writes of a rollout controller among the
// API server's counts: Node PATCHes (the components patch nodes/status)
// and ConfigRollout writes (status updates, finalizer patches; the
// benchmark creates and deletes them, and makes no other write). n is
// their sum. Its Events are counted apart (rolloutEvents): the API
// server's counts do not tell them from the real Controllers'.
func controllerRequests(c requestCount) (requestCount, float64) {
	out := requestCount{}
	var n float64
	for k, v := range c {
		if (k.resource == "nodes" && k.subresource == "" && k.verb == "PATCH") ||
			k.resource == "configrollouts" && (k.verb == "PATCH" || k.verb == "PUT" || k.verb == "APPLY") {
			out[k] = v
			n += v
		}
	}
	return out, n
}

// writes sums the counts of c's writes (every verb but GET, LIST and
// WATCH).
func (c requestCount) writes() float64 {
	var n float64
	for k, v := range c {
		if k.verb != "GET" && k.verb != "LIST" && k.verb != "WATCH" {
			n += v
		}
	}
	return n
}

// rolloutEvents counts the controller's Event requests about the
// ConfigRollout ns/name: one per Event created, and one per repeat of it
// (the recorder patches the count).
func rolloutEvents(ctx context.Context, b *testing.B, h *harness, ns, name string) float64 {
	b.Helper()
	list, err := h.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ConfigRollout,involvedObject.name=" + name + ",source=dynconfig-rollout"})
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, e := range list.Items {
		n += float64(max(e.Count, 1))
	}
	return n
}

// procMemory reads the memory figures of /proc/PID/status (VmRSS, VmHWM:
// the peak RSS, RssAnon, RssFile: the binary's pages...), in bytes.
func procMemory(b *testing.B, pid int) map[string]int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if v, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && isKB {
			kb, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("/proc/%d/status: %q", pid, line)
			}
			out[k] = kb << 10
		}
	}
	if out["VmHWM"] == 0 || out["RssAnon"] == 0 {
		b.Fatalf("/proc/%d/status has no VmHWM or RssAnon", pid)
	}
	return out
}

// waitDeleted waits until a ConfigRollout is gone.
func waitDeleted(ctx context.Context, b *testing.B, ri dynamic.ResourceInterface, name string) {
	b.Helper()
	// A baseline's finalizer takes the claims off first: one PATCH a
	// node, at its rate limit (50,000 nodes at 250/s: over 3 minutes).
	err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		b.Fatalf("ConfigRollout %s was not deleted: %v", name, err)
	}
}

// writeBenchPlot writes rollout-scale.svg, one panel per measure against
// the fleet size (this tree's controller a line, the baseline's points),
// and rollout-scale.txt, the table of every result.
func writeBenchPlot(dir string, results []benchResult, trial time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var ours, base []benchResult
	baseName := ""
	for _, r := range results {
		if r.controller == "new" {
			ours = append(ours, r)
		} else {
			base, baseName = append(base, r), r.controller
		}
	}
	panels := []struct {
		title string
		goal  float64
		value func(benchResult) float64
		floor bool // also plot floorSec
	}{
		{"ConfigRollout object (KiB; goal <= 256)", 256, func(r benchResult) float64 { return r.objectKiB }, false},
		{"overhead per step beyond the trial waits (s; goal < 1; grey: API server floor)", 1, func(r benchResult) float64 { return r.overheadSec }, true},
		{"controller requests per node, create to delete (goal <= 1.1)", 1.1, func(r benchResult) float64 { return r.requestsPerNode + r.deletePerNode }, false},
		{"controller CPU per node per rollout (ms)", 0, func(r benchResult) float64 { return r.cpuSeconds * 1000 / float64(r.nodes) }, false},
		{"controller heap in use (MiB)", 0, func(r benchResult) float64 { return r.heapMiB }, false},
		{"controller RSS (MiB)", 0, func(r benchResult) float64 { return r.rssMiB }, false},
	}
	const pw, ph, margin = 380, 230, 50
	var svg strings.Builder
	cols := 3
	rows := (len(panels) + cols - 1) / cols
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		cols*pw, rows*ph+48)
	fmt.Fprintf(&svg, `<text x="10" y="18" font-size="13">%s</text>`+"\n", html.EscapeString(fmt.Sprintf(
		"dynconfig rollout controller vs fleet size (one kube-apiserver; trial %v; 5 steps, maxUnavailable 10%%)", trial)))
	legend := "blue line: this tree's controller"
	if baseName != "" {
		legend += "; orange squares: " + baseName
	}
	var loads []string
	for _, r := range results {
		loads = append(loads, fmt.Sprintf("%d: %s", r.nodes, r.load))
	}
	legend += "; load average at the end of each size: " + strings.Join(slices.Compact(loads), ", ")
	for _, r := range results {
		if r.selected > 0 && r.selected < r.nodes {
			legend += fmt.Sprintf("; *: the rollout selected %d of the fleet's nodes", r.selected)
			break
		}
	}
	fmt.Fprintf(&svg, `<text x="10" y="36">%s</text>`+"\n", html.EscapeString(legend))
	maxN := 0.0
	for _, r := range results {
		maxN = max(maxN, float64(r.nodes))
	}
	for i, p := range panels {
		ox, oy := float64(i%cols*pw), float64(i/cols*ph+48)
		w, hgt := float64(pw-margin-15), float64(ph-margin-25)
		top := p.goal
		for _, r := range results {
			top = max(top, p.value(r))
			if p.floor {
				top = max(top, r.floorSec)
			}
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
		line := func(rs []benchResult, v func(benchResult) float64, color string) {
			var pts []string
			for _, r := range rs {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(r.nodes)), y(v(r))))
			}
			fmt.Fprintf(&svg, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		}
		if p.floor && len(ours) > 0 {
			line(ours, func(r benchResult) float64 { return r.floorSec }, "grey")
		}
		if len(ours) > 0 {
			line(ours, p.value, "steelblue")
		}
		for _, r := range ours {
			fmt.Fprintf(&svg, `<circle cx="%.1f" cy="%.1f" r="3" fill="steelblue"/>`+"\n", x(float64(r.nodes)), y(p.value(r)))
			mark := ""
			if r.selected > 0 && r.selected < r.nodes {
				mark = "*" // a rollout of part of the fleet
			}
			fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" text-anchor="middle">%.3g%s</text>`+"\n", x(float64(r.nodes)), y(p.value(r))-6, p.value(r), mark)
			fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(float64(r.nodes)), y(0)+14, r.nodes)
		}
		for _, r := range base {
			fmt.Fprintf(&svg, `<rect x="%.1f" y="%.1f" width="7" height="7" fill="darkorange"/>`+"\n", x(float64(r.nodes))-3.5, y(p.value(r))-3.5)
			fmt.Fprintf(&svg, `<text x="%.1f" y="%.1f" fill="darkorange">%.3g</text>`+"\n", x(float64(r.nodes))+6, y(p.value(r))+4, p.value(r))
		}
	}
	svg.WriteString("</svg>\n")
	if err := os.WriteFile(filepath.Join(dir, "rollout-scale.svg"), []byte(svg.String()), 0o644); err != nil {
		return err
	}
	var txt strings.Builder
	txt.WriteString("controller\tnodes\tselected\treal\tobject-KiB\ts/step\toverhead-s/step\tapiserver-floor-s/step\tctl-patches-s/step\trequests/node\tdelete-requests/node\tctl-cpu-s/rollout\tctl-cpu-ms/node" +
		"\theap-MiB\trss-MiB\trss-peak-MiB\trss-anon-MiB\tctl-events\tothers-events\tapiserver-cpu-s\tetcd-cpu-s\ttest-process-cpu-s\tprobe-PATCH/s\tctl-PATCH/s-avg\tplans\t409s\t429s\t5xx\treal-promoted\tload\n")
	for _, r := range results {
		fmt.Fprintf(&txt, "%s\t%d\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%s\n",
			r.controller, r.nodes, r.selected, r.real, r.objectKiB, r.stepSeconds, r.overheadSec, r.floorSec, r.ctlFloorSec, r.requestsPerNode, r.deletePerNode, r.cpuSeconds, r.cpuSeconds*1000/float64(r.nodes),
			r.heapMiB, r.rssMiB, r.rssPeakMiB, r.rssAnonMiB, r.events, r.otherEvents, r.apiCPU, r.etcdCPU, r.simCPU, r.probeRate, r.patchRate, r.plans, r.conflicts, r.throttled, r.serverErrors, r.realPromoted, r.load)
	}
	return os.WriteFile(filepath.Join(dir, "rollout-scale.txt"), []byte(txt.String()), 0o644)
}

// runBenchRollout creates a ConfigRollout and follows it with a watch until
// it completes; it returns the time of each step and of the whole, the
// largest the object was (JSON bytes), and how many of its updates
// changed which status fields (statusChanges).
func runBenchRollout(ctx context.Context, b *testing.B, ri dynamic.ResourceInterface, ns, name, configMap string, steps []v1alpha1.RolloutStep, label string, maxFailures int32) ([]time.Duration, time.Duration, int, string) {
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
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
	var prevStatus map[string]any
	changes := map[string]int{}
	tally := func() string {
		keys := slices.Sorted(maps.Keys(changes))
		slices.SortStableFunc(keys, func(a, b string) int { return changes[b] - changes[a] })
		var out []string
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%d× %s", changes[k], k))
		}
		return strings.Join(out, "; ")
	}
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			b.Fatalf("watching rollout %s: %v", name, ev.Object)
		}
		if raw, err := json.Marshal(u.Object); err == nil {
			largest = max(largest, len(raw))
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		if ev.Type == watch.Modified {
			changes[statusChanges(prevStatus, st)]++
		}
		prevStatus = st
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
			return stepTimes, time.Since(start), largest, tally()
		case !got.Status.Phase.Active():
			b.Fatalf("rollout %s: %s: %s", name, got.Status.Phase, got.Status.Message)
		}
	}
	b.Fatalf("rollout %s: the watch ended before the rollout completed", name)
	return nil, 0, 0, ""
}

// statusChanges names the status fields that differ between two statuses
// (the history by its new entries' reasons, conditions by type), comma
// separated; "metadata" when none does.
func statusChanges(prev, next map[string]any) string {
	keys := slices.Collect(maps.Keys(prev))
	for k := range next {
		if _, ok := prev[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		if reflect.DeepEqual(prev[k], next[k]) {
			continue
		}
		switch k {
		case "history":
			p, _ := prev[k].([]any)
			n, _ := next[k].([]any)
			var reasons []string
			for _, e := range n[min(len(p), len(n)):] {
				if m, ok := e.(map[string]any); ok {
					reasons = append(reasons, fmt.Sprint(m["reason"]))
				}
			}
			out = append(out, "history+"+strings.Join(slices.Compact(reasons), "/"))
		case "conditions":
			p, _ := prev[k].([]any)
			n, _ := next[k].([]any)
			byType := func(l []any) map[string]any {
				m := map[string]any{}
				for _, c := range l {
					if c, ok := c.(map[string]any); ok {
						m[fmt.Sprint(c["type"])] = c
					}
				}
				return m
			}
			pm, nm := byType(p), byType(n)
			for _, t := range slices.Sorted(maps.Keys(nm)) {
				if !reflect.DeepEqual(pm[t], nm[t]) {
					out = append(out, "conditions."+t)
				}
			}
		default:
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "metadata"
	}
	return strings.Join(out, ",")
}

// rolloutProcess is a dynconfig-rollout binary, run apart so that the
// CPU and memory measured are the controller's alone.
type rolloutProcess struct {
	cmd     *exec.Cmd
	addr    string
	metrics func(ctx context.Context, b *testing.B) map[string]float64
}

// startRolloutProcess starts a dynconfig-rollout binary without leader
// election, at the benchmark's client rate limit, with extra flags, until
// b ends.
func startRolloutProcess(ctx context.Context, b *testing.B, h *harness, bin string, extra ...string) *rolloutProcess {
	b.Helper()
	dir := b.TempDir()
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
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if v := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_GOMEMLIMIT"); v != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+v) // the controller's alone
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Errorf("%s: %v", bin, err)
		}
		_ = logFile.Close()
		if b.Failed() {
			out, _ := os.ReadFile(logPath)
			b.Logf("%s's log:\n%s", bin, out)
		}
	})
	p := &rolloutProcess{cmd: cmd, addr: addr}
	p.metrics = func(ctx context.Context, b *testing.B) map[string]float64 {
		b.Helper()
		var body []byte
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
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
			b.Fatalf("%s's /metrics: %v", bin, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			b.Fatalf("%s's /metrics: %v", bin, err)
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
					out[name+"_count"] += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return out
	}
	p.metrics(ctx, b) // it serves
	return p
}

// profile writes the process's CPU profile of the next d to path, in the
// background.
func (p *rolloutProcess) profile(path string, d time.Duration) {
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addr, int(d.Seconds())))
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

// heapProfile writes the process's heap profile (after a GC) to path.
func (p *rolloutProcess) heapProfile(ctx context.Context, b *testing.B, path string) {
	b.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", p.addr), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("heap profile: %v %s", err, resp.Status)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
}

// cpu is the user and system CPU time the process used so far.
func (p *rolloutProcess) cpu(b *testing.B) time.Duration {
	b.Helper()
	cpu, _, err := procStat(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// TestBenchPlotIsSVG: the plot the benchmark writes is well-formed XML
// with one line per measure (and the API server's floor), a point per
// baseline result on each panel, and the table a row per result.
func TestBenchPlotIsSVG(t *testing.T) {
	dir := t.TempDir()
	results := []benchResult{
		{controller: "old@e6e4a0b", nodes: 1000, objectKiB: 150, stepSeconds: 6.1, overheadSec: 1.3, requestsPerNode: 1.2, cpuSeconds: 5.5, heapMiB: 20, rssMiB: 60, load: "3.1 <2> 1"},
		{controller: "new", nodes: 1000, objectKiB: 9.6, stepSeconds: 5.9, overheadSec: 1.1, floorSec: 0.2, requestsPerNode: 1.1, cpuSeconds: 4.5, heapMiB: 16, rssMiB: 50, load: "3.1 <2> 1"},
		{controller: "new", nodes: 5000, objectKiB: 9.3, stepSeconds: 5.6, overheadSec: 0.8, floorSec: 0.9, requestsPerNode: 1.0, cpuSeconds: 6.4, heapMiB: 60, rssMiB: 99, load: "9 & 8"}}
	if err := writeBenchPlot(dir, results, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "rollout-scale.svg"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(raw))
	lines, points := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("rollout-scale.svg is not XML: %v\n%s", err, raw)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "polyline":
				lines++
			case "rect":
				points++
			}
		}
	}
	if lines != 7 {
		t.Errorf("%d lines plotted, want 7 (6 measures and the floor)", lines)
	}
	if points != 6 {
		t.Errorf("%d baseline points plotted, want 6 (one per panel)", points)
	}
	table, err := os.ReadFile(filepath.Join(dir, "rollout-scale.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(table)), "\n")
	if len(rows) != 4 || !strings.HasPrefix(rows[1], "old@e6e4a0b\t1000\t") || !strings.HasPrefix(rows[3], "new\t5000\t") {
		t.Errorf("rollout-scale.txt:\n%s", table)
	}
	for _, row := range rows {
		if got, want := strings.Count(row, "\t"), strings.Count(rows[0], "\t"); got != want {
			t.Errorf("row %q has %d columns, the header %d", row, got+1, want+1)
		}
	}
}

// TestBenchReplot draws rollout-scale.svg again from the rollout-scale.txt
// of DYNCONFIG_ROLLOUT_BENCH_REPLOT (a directory), for a change of the
// plot without running the benchmark again. Without it, it reads back the
// table of a plot it writes and requires the same results.
func TestBenchReplot(t *testing.T) {
	dir := os.Getenv("DYNCONFIG_ROLLOUT_BENCH_REPLOT")
	if dir == "" {
		dir = t.TempDir()
		want := []benchResult{{controller: "new", nodes: 100000, selected: 1000, real: 8, requestsPerNode: 1.062, rssPeakMiB: 117.8, load: "15.60 17.31 16.30"}}
		if err := writeBenchPlot(dir, want, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		got, err := readBenchTable(filepath.Join(dir, "rollout-scale.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != want[0] {
			t.Fatalf("read back %+v, wrote %+v", got, want)
		}
		return
	}
	results, err := readBenchTable(filepath.Join(dir, "rollout-scale.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeBenchPlot(dir, results, benchTrial); err != nil {
		t.Fatal(err)
	}
}

// readBenchTable reads the rollout-scale.txt writeBenchPlot writes.
func readBenchTable(path string) ([]benchResult, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rows := strings.Split(strings.TrimSpace(string(raw)), "\n")
	header := strings.Split(rows[0], "\t")
	var out []benchResult
	for _, row := range rows[1:] {
		cells := strings.Split(row, "\t")
		if len(cells) != len(header) {
			return nil, fmt.Errorf("%s: row %q has %d columns, the header %d", path, row, len(cells), len(header))
		}
		r := benchResult{controller: cells[0], load: cells[len(cells)-1]}
		ints := map[string]*int{"nodes": &r.nodes, "selected": &r.selected, "real": &r.real, "real-promoted": &r.realPromoted}
		floats := map[string]*float64{"object-KiB": &r.objectKiB, "s/step": &r.stepSeconds, "overhead-s/step": &r.overheadSec,
			"apiserver-floor-s/step": &r.floorSec, "ctl-patches-s/step": &r.ctlFloorSec, "requests/node": &r.requestsPerNode,
			"delete-requests/node": &r.deletePerNode, "ctl-cpu-s/rollout": &r.cpuSeconds, "heap-MiB": &r.heapMiB, "rss-MiB": &r.rssMiB,
			"rss-peak-MiB": &r.rssPeakMiB, "rss-anon-MiB": &r.rssAnonMiB, "ctl-events": &r.events, "others-events": &r.otherEvents,
			"apiserver-cpu-s": &r.apiCPU, "etcd-cpu-s": &r.etcdCPU, "test-process-cpu-s": &r.simCPU, "probe-PATCH/s": &r.probeRate,
			"ctl-PATCH/s-avg": &r.patchRate, "plans": &r.plans, "409s": &r.conflicts, "429s": &r.throttled, "5xx": &r.serverErrors}
		for i, h := range header[1 : len(header)-1] {
			c := cells[i+1]
			switch {
			case ints[h] != nil:
				if *ints[h], err = strconv.Atoi(c); err != nil {
					return nil, fmt.Errorf("%s: %s %q: %w", path, h, c, err)
				}
			case floats[h] != nil:
				if *floats[h], err = strconv.ParseFloat(c, 64); err != nil {
					return nil, fmt.Errorf("%s: %s %q: %w", path, h, c, err)
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}
