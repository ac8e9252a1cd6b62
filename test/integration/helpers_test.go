package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// kubeletConfig is the config type of every Controller in these tests.
type kubeletConfig = kubeletv1beta1.KubeletConfiguration

// componentVersion names the tracking dir of every Controller here.
const componentVersion = "v1.37.0"

// namespace holds every ConfigMap the tests create.
const namespace = metav1.NamespaceDefault

// waitTimeout bounds each wait for something the Controller does
// asynchronously (a report, a restart, a promotion). It is generous: the
// machine may be busy, and a wait ends as soon as its condition holds.
const waitTimeout = 60 * time.Second

// pollInterval is how often a wait re-reads the API server or the state
// dir.
const pollInterval = 50 * time.Millisecond

// harness is a real control plane shared by the scenarios of one test.
type harness struct {
	cl *cluster.Cluster
	// client is the tests' own client: it creates, patches and reads
	// objects. Its rate limit is high, so polling does not throttle it.
	client kubernetes.Interface
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	cl := cluster.Start(t)
	return &harness{cl: cl, client: newClient(t, cl.Config, 200, 400)}
}

// limited returns a copy of cfg with its own client-side rate limit.
func limited(cfg *rest.Config, qps float32, burst int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = qps, burst
	return cfg
}

// protobuf returns a copy of cfg that speaks protobuf with the API server
// for built-in types, as the kubelet and kube-controller-manager do.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

// newClient returns a clientset over a copy of cfg with its own rate limit.
func newClient(tb testing.TB, cfg *rest.Config, qps float32, burst int) kubernetes.Interface {
	tb.Helper()
	c, err := kubernetes.NewForConfig(limited(cfg, qps, burst))
	if err != nil {
		tb.Fatalf("building a clientset: %v", err)
	}
	return c
}

// testContext returns a context that logs through t and ends with the
// test, bounded by timeout.
func testContext(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	return ctx
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// objectName makes a DNS-1123 name from a prefix and a test name, unique per
// test, so each scenario has its own Node and ConfigMaps.
func objectName(t *testing.T, prefix string) string {
	n := prefix + "-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// kubeletPayload is a valid KubeletConfiguration whose maxPods tells the
// configs apart.
func kubeletPayload(maxPods int) string {
	return fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: %d\n", maxPods)
}

// configMapSpec is a ConfigMap to create. A nil data means a valid kubelet
// payload with maxPods.
type configMapSpec struct {
	name    string
	maxPods int
	data    map[string]string
	trial   string // dynconfig.io/trial-duration, if set
	// immutable makes it immutable, as a ConfigRollout requires.
	immutable bool
}

func (h *harness) createConfigMap(ctx context.Context, t *testing.T, s configMapSpec) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: namespace}, Data: s.data}
	if cm.Data == nil {
		cm.Data = map[string]string{kubelet.PayloadKey: kubeletPayload(s.maxPods)}
	}
	if s.trial != "" {
		cm.Annotations = map[string]string{components.TrialDurationAnnotation: s.trial}
	}
	if s.immutable {
		cm.Immutable = ptr.To(true)
	}
	got, err := h.client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s: %v", s.name, err)
	}
	return got
}

// testNode is one scenario's Node object and state dir. A process started
// on it is one run of the component.
type testNode struct {
	h      *harness
	name   string
	dir    string
	client kubernetes.Interface // the component's own client, kept across its restarts
}

// newNode creates a Node (without assignment) and an empty state dir.
func (h *harness) newNode(ctx context.Context, t *testing.T) *testNode {
	t.Helper()
	name := objectName(t, "node")
	if _, err := h.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Node %s: %v", name, err)
	}
	return &testNode{h: h, name: name, dir: filepath.Join(t.TempDir(), "state"), client: newClient(t, h.cl.Config, 50, 100)}
}

// assignmentFor is the annotation value that assigns cm.
func assignmentFor(cm *corev1.ConfigMap) string {
	return mustJSON(&corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID,
	}})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// annotate sets the assignment annotation to value; nil removes it.
func (n *testNode) annotate(ctx context.Context, t *testing.T, value *string) {
	t.Helper()
	patch := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{nodeapi.AssignmentAnnotation: value}}})
	if _, err := n.h.client.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching the assignment of Node %s: %v", n.name, err)
	}
}

// assign assigns cm to the node.
func (n *testNode) assign(ctx context.Context, t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	v := assignmentFor(cm)
	n.annotate(ctx, t, &v)
}

// report reads the node's ConfigOK condition from its status; ok is false
// when there is none.
func (n *testNode) report(ctx context.Context, t *testing.T) (status.Report, bool) {
	t.Helper()
	node, err := n.h.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Node %s: %v", n.name, err)
	}
	c := status.Find(node.Status.Conditions)
	if c == nil {
		return status.Report{}, false
	}
	return status.Report{Status: c.Status, Reason: c.Reason, Message: c.Message}, true
}

// wantReport checks the node's ConfigOK condition now.
func (n *testNode) wantReport(ctx context.Context, t *testing.T, want status.Report) {
	t.Helper()
	got, ok := n.report(ctx, t)
	if !ok {
		t.Fatalf("Node %s has no %s condition; want %+v", n.name, nodeapi.ConditionType, want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Node %s %s condition (-want +got):\n%s", n.name, nodeapi.ConditionType, diff)
	}
}

// waitReport waits until the node's ConfigOK condition is want.
func (n *testNode) waitReport(ctx context.Context, t *testing.T, want status.Report) {
	t.Helper()
	var last status.Report
	var seen bool
	err := wait.PollUntilContextTimeout(ctx, pollInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last, seen = n.report(ctx, t)
		return seen && last == want, nil
	})
	if err != nil {
		if !seen {
			t.Fatalf("Node %s never got a %s condition (want %+v): %v", n.name, nodeapi.ConditionType, want, err)
		}
		t.Fatalf("Node %s %s condition never became the wanted one: %v; last (-want +got):\n%s",
			n.name, nodeapi.ConditionType, err, cmp.Diff(want, last))
	}
}

// Reports the Controller makes, in the seed's wording.
func currentReport(cm *corev1.ConfigMap) status.Report {
	return status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonAllChecksPassed,
		Message: "using current (UID: " + string(cm.UID) + ")"}
}

func localDefaultReport() status.Report {
	return status.Report{Status: corev1.ConditionTrue, Reason: status.ReasonLocalDefault, Message: "using current (default)"}
}

func syncFailedReport(message, cause string) status.Report {
	return status.Report{Status: corev1.ConditionUnknown, Reason: "failed to sync, desired config unclear, cause: " + cause, Message: message}
}

// processOptions vary how a process runs its Controller.
type processOptions struct {
	// reload makes the Controller reload in process; otherwise Restart
	// records the call.
	reload bool
	// startupSyncTimeout bounds Bootstrap's read of the assignment (0: the
	// Controller's default).
	startupSyncTimeout time.Duration
	// onRestart, if set, runs inside the Restart hook, before it is recorded.
	onRestart func()
}

// process is one run of the component on a node: a Controller over the
// node's state dir. Restart and Reload calls are recorded.
type process struct {
	t    *testing.T
	c    *dynconfig.Controller[kubeletConfig]
	cfg  *kubeletConfig // what Bootstrap returned
	node *testNode

	restarts chan struct{}       // one value per Restart call
	reloads  chan *kubeletConfig // one value per Reload call

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error // Run's result, when it runs
	closed bool
}

// newController builds the Controller of a process on n, as a component
// would: kubelet profile, default local config, the node's annotation as
// remote source, Node status and Event reporters.
func newController(t *testing.T, n *testNode, o processOptions, restart func(), reload func(context.Context, *kubeletConfig) error) *dynconfig.Controller[kubeletConfig] {
	t.Helper()
	pipeline, err := kubelet.NewPipeline(merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := source.NewNode(source.NodeOptions{Client: n.client, NodeName: n.name, PayloadKey: kubelet.PayloadKey})
	if err != nil {
		t.Fatal(err)
	}
	reporter, err := status.NewNodeReporter(status.NodeReporterOptions{Client: n.client, NodeName: n.name})
	if err != nil {
		t.Fatal(err)
	}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: n.client, NodeName: n.name, Component: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	opts := dynconfig.Options[kubeletConfig]{
		Profile: kubelet.Profile{}, Layers: layers, StateDir: n.dir, ComponentVersion: componentVersion,
		Remote: remote, Reporter: reporter, Events: events, Restart: restart,
		StartupSyncTimeout: o.startupSyncTimeout,
	}
	if o.reload {
		opts.Reload = reload
	}
	c, err := dynconfig.New(opts)
	if err != nil {
		t.Fatalf("dynconfig.New: %v", err)
	}
	return c
}

// start is a process start: a new Controller over the node's state dir,
// and its Bootstrap. The process is stopped when the test ends.
func (n *testNode) start(ctx context.Context, t *testing.T, o processOptions) *process {
	t.Helper()
	p := &process{t: t, node: n, restarts: make(chan struct{}, 1000), reloads: make(chan *kubeletConfig, 1000)}
	p.c = newController(t, n, o,
		func() {
			if o.onRestart != nil {
				o.onRestart()
			}
			p.restarts <- struct{}{}
		},
		func(_ context.Context, cfg *kubeletConfig) error {
			p.reloads <- cfg
			return nil
		})
	t.Cleanup(p.stop)
	cfg, err := p.c.Bootstrap(ctx)
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	p.cfg = cfg
	return p
}

// run starts Run in the background.
func (p *process) run(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan error, 1)
	go func() { p.done <- p.c.Run(ctx) }()
}

// stop ends Run, waits for it and releases the state dir, as the end of
// the process would. Calling it again does nothing.
func (p *process) stop() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.cancel != nil {
		p.cancel()
		select {
		case err := <-p.done:
			if err != nil {
				p.t.Errorf("Run of node %s returned %v, want nil", p.node.name, err)
			}
		case <-time.After(waitTimeout):
			p.t.Errorf("Run of node %s did not return within %v of its context's end", p.node.name, waitTimeout)
		}
	}
	if err := p.c.Close(); err != nil {
		p.t.Errorf("Close: %v", err)
	}
}

// waitRestart waits for one Restart call.
func (p *process) waitRestart(t *testing.T) {
	t.Helper()
	select {
	case <-p.restarts:
	case <-time.After(waitTimeout):
		t.Fatalf("node %s: no restart within %v", p.node.name, waitTimeout)
	}
}

// waitReload waits for one Reload call and returns its config.
func (p *process) waitReload(t *testing.T) *kubeletConfig {
	t.Helper()
	select {
	case cfg := <-p.reloads:
		return cfg
	case <-time.After(waitTimeout):
		t.Fatalf("node %s: no reload within %v", p.node.name, waitTimeout)
		return nil
	}
}

// noRestartOrReload fails when the process restarted or reloaded.
func (p *process) noRestartOrReload(t *testing.T) {
	t.Helper()
	if n := len(p.restarts); n > 0 {
		t.Errorf("node %s: %d restarts, want none", p.node.name, n)
	}
	if n := len(p.reloads); n > 0 {
		t.Errorf("node %s: %d reloads, want none", p.node.name, n)
	}
}

// wantMaxPods checks which config a process runs.
func wantMaxPods(t *testing.T, what string, cfg *kubeletConfig, want int32) {
	t.Helper()
	if cfg == nil {
		t.Fatalf("%s: config is nil, want maxPods %d", what, want)
	}
	if cfg.MaxPods != want {
		t.Errorf("%s: maxPods %d, want %d", what, cfg.MaxPods, want)
	}
}

// Pointer files (DESIGN.md "On-disk layout"), read directly so a running
// Controller keeps its lock: {"version":…,"sha256":…,"pointer":{"source":…}}.
type pointerFile struct {
	Pointer struct {
		Source  *corev1.NodeConfigSource `json:"source"`
		SetTime time.Time                `json:"setTime"`
	} `json:"pointer"`
}

// readPointer returns the source a pointer file ("current" or
// "last-known-good") names; nil for the local config (an empty or, before
// the first write, missing file).
func readPointer(dir, name string) (*corev1.NodeConfigSource, error) {
	data, err := os.ReadFile(filepath.Join(dir, "meta", name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, nil
	}
	var p pointerFile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", name, err)
	}
	return p.Pointer.Source, nil
}

// pointerUID is the ConfigMap UID a pointer names, "" for local.
func pointerUID(t *testing.T, dir, name string) types.UID {
	t.Helper()
	src, err := readPointer(dir, name)
	if err != nil {
		t.Fatalf("reading pointer %s: %v", name, err)
	}
	if src == nil || src.ConfigMap == nil {
		return ""
	}
	return src.ConfigMap.UID
}

// wantPointer checks the ConfigMap UID (and, if rv is set, the
// resourceVersion) a pointer names.
func wantPointer(t *testing.T, dir, name string, uid types.UID, rv string) {
	t.Helper()
	src, err := readPointer(dir, name)
	if err != nil {
		t.Fatalf("reading pointer %s: %v", name, err)
	}
	var gotUID types.UID
	var gotRV string
	if src != nil && src.ConfigMap != nil {
		gotUID, gotRV = src.ConfigMap.UID, src.ConfigMap.ResourceVersion
	}
	if gotUID != uid || (rv != "" && gotRV != rv) {
		t.Errorf("pointer %s names uid %q rv %q, want uid %q rv %q", name, gotUID, gotRV, uid, rv)
	}
}

// waitPointer waits until a pointer names uid.
func waitPointer(t *testing.T, dir, name string, uid types.UID) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if pointerUID(t, dir, name) == uid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pointer %s still names %q after %v, want %q", name, pointerUID(t, dir, name), waitTimeout, uid)
		}
		<-ticker.C
	}
}

// checkpoints lists the checkpoints of a state dir as "<uid>/<rv>", read
// through checkpoint.Inspect, so the test does not depend on the layout
// (checkpoints/<uid>_<rv>, or checkpoints/<uid>/<rv> of older versions).
func checkpoints(t *testing.T, dir string) []string {
	t.Helper()
	snap, err := checkpoint.Inspect(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("listing checkpoints: %v", err)
	}
	var keys []string
	for _, c := range snap.Checkpoints {
		keys = append(keys, c.Key.String())
	}
	return keys
}

// checkpointKey is the key of cm's checkpoint.
func checkpointKey(cm *corev1.ConfigMap) string {
	return string(cm.UID) + "/" + cm.ResourceVersion
}

// nodeEvents lists the core/v1 Events about a node with a reason.
func (h *harness) nodeEvents(ctx context.Context, t *testing.T, node, reason string) []corev1.Event {
	t.Helper()
	evs, err := listEvents(ctx, h, node, reason)
	if err != nil {
		t.Fatalf("listing %s events of node %s: %v", reason, node, err)
	}
	return evs
}

// listEvents lists the Events of a node with a reason; it is safe to call
// from any goroutine.
func listEvents(ctx context.Context, h *harness, node, reason string) ([]corev1.Event, error) {
	sel := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", node),
		fields.OneTermEqualSelector("reason", reason),
	).String()
	list, err := h.client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func eventMessages(events []corev1.Event) []string {
	out := make([]string, 0, len(events))
	for _, ev := range events {
		out = append(out, ev.Message)
	}
	return out
}
