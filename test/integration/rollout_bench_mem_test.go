package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"

	"github.com/dynconfig/dynconfig/rollout/controller"
)

// realNodeFile is a worker Node shaped on what a v1.37 kubelet, kubeadm,
// kube-controller-manager, a CNI and a CSI driver write (labels,
// managedFields, five conditions, addresses, 20 images, capacity,
// nodeInfo), with the dynconfig assignment and status annotations: the
// fixture of rollout/controller's TestCachedNodeKeepsWhatIsRead.
const realNodeFile = "../../rollout/controller/testdata/node.json"

// capturedNodeFile is the Node the real v1.37 kubelet of test/realnode
// wrote (TestCaptureNode there, test/hack/capture-node.sh): a single-node
// test cluster's, with one image, no cloud and no CNI annotations. That
// test requires realNodeFile to have every field it has.
const capturedNodeFile = "../../rollout/controller/testdata/node-realnode.json"

// Their sizes as client-go encodes them (JSON), pinned: the benchmarks'
// figures in docs/bench are for these Nodes.
const (
	realNodeBytes     = 12023
	capturedNodeBytes = 5072
)

// TestRealisticNodeFixtures: both Node fixtures decode strictly as v1
// Nodes and have the sizes docs/bench names.
func TestRealisticNodeFixtures(t *testing.T) {
	for _, f := range []struct {
		path string
		want int
	}{{realNodeFile, realNodeBytes}, {capturedNodeFile, capturedNodeBytes}} {
		raw, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		var n corev1.Node
		if strict, err := sigsjson.UnmarshalStrict(raw, &n); err != nil || len(strict) > 0 {
			t.Fatalf("%s: %v %v", f.path, err, strict)
		}
		compact, err := json.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		if len(compact) != f.want {
			t.Errorf("%s: %d bytes of JSON, docs/bench and this test say %d: measure again and update both", f.path, len(compact), f.want)
		}
		t.Logf("%s: %d bytes, %d labels, %d annotations, %d managedFields, %d conditions, %d images",
			f.path, len(compact), len(n.Labels), len(n.Annotations), len(n.ManagedFields), len(n.Status.Conditions), len(n.Status.Images))
	}
}

// realisticNodes returns a function that makes the i-th Node of a fleet
// of realNodeFile's shape, decoded from its own JSON (so that, as from an
// API server, no two Nodes share a string), with its own name, uid,
// hostname, instance id, addresses, boot and machine ids, zone and
// resourceVersion; and the size of one Node's JSON.
func realisticNodes(tb testing.TB) (func(i int) *corev1.Node, int) {
	tb.Helper()
	raw, err := os.ReadFile(realNodeFile)
	if err != nil {
		tb.Fatal(err)
	}
	var tmpl corev1.Node
	if strict, err := sigsjson.UnmarshalStrict(raw, &tmpl); err != nil || len(strict) > 0 {
		tb.Fatalf("%s: %v %v", realNodeFile, err, strict)
	}
	compact, err := json.Marshal(&tmpl)
	if err != nil {
		tb.Fatal(err)
	}
	// The per-node strings of the fixture, and what each node has there.
	base := string(compact)
	zones := []string{"eu-central-1a", "eu-central-1b", "eu-central-1c"}
	return func(i int) *corev1.Node {
		ip := fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256)
		s := strings.NewReplacer(
			"ip-10-0-12-34", "ip-"+strings.ReplaceAll(ip, ".", "-"),
			"10.0.12.34", ip,
			"i-0a1b2c3d4e5f67890", fmt.Sprintf("i-0%016x", i),
			"5d0e2c4a-3f61-4b9e-8a7d-2c9b1e0f6a3d", fmt.Sprintf("5d0e2c4a-3f61-4b9e-8a7d-%012x", i),
			"ec2b6c1a9e0d4f3b8a7c6d5e4f3a2b1c", fmt.Sprintf("ec2b6c1a9e0d4f3b8a7c%012x", i),
			"ec2b6c1a-9e0d-4f3b-8a7c-6d5e4f3a2b1c", fmt.Sprintf("ec2b6c1a-9e0d-4f3b-8a7c-%012x", i),
			"3f2e1d0c-b9a8-4765-8432-10fedcba9876", fmt.Sprintf("3f2e1d0c-b9a8-4765-8432-%012x", i),
			"10.244.3.0/24", fmt.Sprintf("10.%d.%d.0/24", 64+i/65536, i/256%256),
			"eu-central-1a", zones[i%3],
			`"resourceVersion":"48220115"`, `"resourceVersion":"`+strconv.Itoa(48220115+i)+`"`,
		).Replace(base)
		var n corev1.Node
		if err := json.Unmarshal([]byte(s), &n); err != nil {
			panic(err)
		}
		return &n
	}, len(compact)
}

// nodeSource is a ListerWatcher that lists a generated fleet (fresh
// objects at each list, as decoded from an API server) and then watches
// nothing.
type nodeSource struct {
	n    int
	node func(int) *corev1.Node
}

func (s *nodeSource) List(metav1.ListOptions) (k8sruntime.Object, error) {
	list := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	list.Items = make([]corev1.Node, s.n)
	for i := range s.n {
		list.Items[i] = *s.node(i)
	}
	return list, nil
}

func (s *nodeSource) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// IsWatchListSemanticsUnSupported tells the reflector to list: the source
// serves no streamed initial events.
func (s *nodeSource) IsWatchListSemanticsUnSupported() bool { return true }

// nodeCacheSizes are the fleets of BenchmarkNodeCacheMemory:
// DYNCONFIG_NODE_CACHE_SIZES, default 1000, 10000, 50000 and 100000.
func nodeCacheSizes(b *testing.B) []int {
	v := os.Getenv("DYNCONFIG_NODE_CACHE_SIZES")
	if v == "" {
		v = "1000,10000,50000,100000"
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("DYNCONFIG_NODE_CACHE_SIZES=%q: want sizes", v)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkNodeCacheMemory measures what the rollout controller's Node
// informer holds per node of a fleet of realistic Nodes (realNodeFile):
// a SharedIndexInformer of Nodes as the controller builds it, synced on
// the whole fleet, without the transform (the controller before
// CachedNode: "whole") and with controller.CachedNode ("cached"), in the
// same run. It reports the Go heap the synced cache keeps (after a GC;
// the list it was built from is gone by then) per node, and the ratio.
// The API server is not involved: at 50,000 and 100,000 realistic Nodes
// this 2-core machine cannot host the fleet in a real kube-apiserver in a
// useful time; BenchmarkRolloutController measures the whole process
// against a real one.
//
//	cd test && go test ./integration/ -run XXX -bench NodeCacheMemory -benchtime 1x -benchmem
func BenchmarkNodeCacheMemory(b *testing.B) {
	node, size := realisticNodes(b)
	b.Logf("one realistic Node: %d bytes of JSON", size)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, n := range nodeCacheSizes(b) {
		perNode := map[string]float64{}
		for _, mode := range []string{"whole", "cached"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, mode), func(b *testing.B) {
				for range b.N {
					before := heap()
					inf := cache.NewSharedIndexInformer(&nodeSource{n: n, node: node}, &corev1.Node{}, 0, cache.Indexers{})
					if mode == "cached" {
						if err := inf.SetTransform(controller.CachedNode); err != nil {
							b.Fatal(err)
						}
					}
					ctx, stop := context.WithCancel(context.Background())
					go inf.RunWithContext(ctx)
					if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
						b.Fatal("the informer did not sync")
					}
					if got := len(inf.GetStore().ListKeys()); got != n {
						b.Fatalf("%d Nodes cached, want %d", got, n)
					}
					after := heap()
					perNode[mode] = float64(after-before) / float64(n)
					stop()
					runtime.KeepAlive(inf)
				}
				b.ReportMetric(perNode[mode], "heap-B/node")
				b.ReportMetric(perNode[mode]*float64(n)/(1<<20), "heap-MiB")
			})
		}
		b.Logf("%d nodes: the cache keeps %.0f B a node whole, %.0f B cached (ratio cached/whole %.3f); one Node's JSON %d B",
			n, perNode["whole"], perNode["cached"], perNode["cached"]/perNode["whole"], size)
	}
}
