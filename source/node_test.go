package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// waitLimit bounds every wait for an asynchronous event; reaching it is a
// failure, never a pass.
const waitLimit = 30 * time.Second

const testNodeName = "node-a"

func testNode(annotation *string, legacy *corev1.NodeConfigSource) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNodeName, UID: "node-uid"}, Spec: corev1.NodeSpec{ConfigSource: legacy}}
	if annotation != nil {
		n.Annotations = map[string]string{nodeapi.AssignmentAnnotation: *annotation, "other": "x"}
	}
	return n
}

func annotationOf(t testing.TB, src *corev1.NodeConfigSource) *string {
	t.Helper()
	data, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	return &s
}

func str(s string) *string { return &s }

// withType is cm as Assigned returns it: with its TypeMeta.
func withType(cm *corev1.ConfigMap) *corev1.ConfigMap {
	out := cm.DeepCopy()
	out.Kind, out.APIVersion = "ConfigMap", "v1"
	return out
}

func resolvedRef(ns, name, uid, rv, key string) *corev1.NodeConfigSource {
	src := ref(ns, name, uid, key)
	src.ConfigMap.ResourceVersion = rv
	return src
}

func newNodeSource(t testing.TB, client kubernetes.Interface, opts NodeOptions) *NodeSource {
	t.Helper()
	opts.Client, opts.NodeName, opts.PayloadKey = client, testNodeName, "kubelet"
	s, err := NewNode(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewNodeOptions(t *testing.T) {
	client := fake.NewClientset()
	ok := NodeOptions{Client: client, NodeName: "node-a", PayloadKey: "kubelet"}
	for _, tc := range []struct {
		name   string
		mutate func(*NodeOptions)
		want   string // substring of the error; "" for success
	}{
		{"valid", func(*NodeOptions) {}, ""},
		{"no client", func(o *NodeOptions) { o.Client = nil }, "NodeOptions.Client is required"},
		{"no node name", func(o *NodeOptions) { o.NodeName = "" }, "NodeOptions.NodeName is required"},
		{"bad node name", func(o *NodeOptions) { o.NodeName = "Node A,metadata.namespace=x" }, `NodeOptions.NodeName "Node A,metadata.namespace=x" is invalid`},
		{"no payload key", func(o *NodeOptions) { o.PayloadKey = "" }, "NodeOptions.PayloadKey is required"},
		{"bad payload key", func(o *NodeOptions) { o.PayloadKey = "a/b" }, `NodeOptions.PayloadKey "a/b" is invalid`},
		{"bad annotation", func(o *NodeOptions) { o.Annotation = "not a key!" }, `NodeOptions.Annotation "not a key!" is invalid`},
		{"negative resync", func(o *NodeOptions) { o.Resync = -time.Second }, "NodeOptions.Resync must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ok
			tc.mutate(&opts)
			s, err := NewNode(opts)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.opts.Annotation != nodeapi.AssignmentAnnotation || s.opts.Resync != DefaultResync || s.opts.Clock == nil {
					t.Errorf("defaults not applied: annotation %q, resync %v, clock %v", s.opts.Annotation, s.opts.Resync, s.opts.Clock)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewNode error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNodeAssigned(t *testing.T) {
	cmA := cmap("kube-system", "kubelet-a", "uid-a", "11", map[string]string{"kubelet": "a", "alt": "a2"})
	cmB := cmap("other", "kubelet-b", "uid-b", "12", map[string]string{"kubelet": "b"})
	const badJSON = "invalid NodeConfigSource in annotation dynconfig.io/config-source of Node node-a: "
	for _, tc := range []struct {
		name       string
		node       *corev1.Node // nil: no Node object
		cmErr      error        // returned by every ConfigMap GET
		want       Assignment
		wantErr    string // exact message, or its prefix when wantPrefix
		wantPrefix bool
		invalid    bool // the error is an *nodeapi.InvalidError
	}{
		{name: "empty", node: testNode(nil, nil)},
		{
			name: "annotation wins over legacy",
			node: testNode(annotationOf(t, ref("kube-system", "kubelet-a", "uid-a", "")), ref("other", "kubelet-b", "uid-b", "")),
			want: Assignment{Source: resolvedRef("kube-system", "kubelet-a", "uid-a", "11", "kubelet"), ConfigMap: withType(cmA)},
		},
		{
			name: "legacy when no annotation",
			node: testNode(nil, ref("other", "kubelet-b", "uid-b", "")),
			want: Assignment{Source: resolvedRef("other", "kubelet-b", "uid-b", "12", "kubelet"), ConfigMap: withType(cmB)},
		},
		{
			name: "assignment names the key",
			node: testNode(annotationOf(t, ref("kube-system", "kubelet-a", "uid-a", "alt")), nil),
			want: Assignment{Source: resolvedRef("kube-system", "kubelet-a", "uid-a", "11", "alt"), ConfigMap: withType(cmA)},
		},
		{name: "blank annotation is empty and hides legacy", node: testNode(str(" "), ref("other", "kubelet-b", "uid-b", ""))},
		{name: "null annotation is empty", node: testNode(str("null"), nil)},
		{name: "malformed JSON", node: testNode(str(`{"configMap":`), nil), wantErr: badJSON, wantPrefix: true, invalid: true},
		{name: "unknown field", node: testNode(str(`{"configMap":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a","extra":1}}`), nil),
			wantErr: badJSON + `unknown field "configMap.extra"`, invalid: true},
		{name: "duplicate field", node: testNode(str(`{"configMap":{"namespace":"a","namespace":"kube-system","name":"kubelet-a","uid":"uid-a"}}`), nil),
			wantErr: badJSON + `duplicate field "configMap.namespace"`, invalid: true},
		{name: "field case", node: testNode(str(`{"ConfigMap":{"namespace":"kube-system","name":"kubelet-a","uid":"uid-a"}}`), nil),
			wantErr: badJSON + `unknown field "ConfigMap"`, invalid: true},
		{name: "trailing data", node: testNode(str(`{} {}`), nil), wantErr: badJSON, wantPrefix: true, invalid: true},
		{name: "not an object", node: testNode(str(`"kubelet-a"`), nil), wantErr: badJSON, wantPrefix: true, invalid: true},
		{name: "all nil", node: testNode(str(`{}`), nil), wantErr: "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil", invalid: true},
		{name: "legacy all nil", node: testNode(nil, &corev1.NodeConfigSource{}), wantErr: "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil", invalid: true},
		{name: "missing uid", node: testNode(annotationOf(t, ref("kube-system", "kubelet-a", "", "")), nil),
			wantErr: "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: uid", invalid: true},
		{name: "missing namespace", node: testNode(annotationOf(t, ref("", "kubelet-a", "uid-a", "")), nil),
			wantErr: "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: namespace", invalid: true},
		{name: "missing name", node: testNode(annotationOf(t, ref("kube-system", "", "uid-a", "")), nil),
			wantErr: "invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: name", invalid: true},
		{name: "wrong uid", node: testNode(annotationOf(t, ref("kube-system", "kubelet-a", "uid-x", "")), nil),
			wantErr: "invalid NodeConfigSource.ConfigMap, uid uid-x and kube-system/kubelet-a do not refer to the same object (its uid is uid-a)", invalid: true},
		{name: "missing key", node: testNode(annotationOf(t, ref("kube-system", "kubelet-a", "uid-a", "nope")), nil),
			wantErr: `ConfigMap kube-system/kubelet-a (UID: uid-a) has no key "nope"`, invalid: true},
		{name: "absent ConfigMap", node: testNode(annotationOf(t, ref("kube-system", "gone", "uid-g", "")), nil),
			wantErr: "ConfigMap kube-system/gone does not exist", invalid: true},
		{name: "absent Node", wantErr: `get Node node-a: nodes "node-a" not found`},
		{name: "ConfigMap read fails", node: testNode(annotationOf(t, ref("kube-system", "kubelet-a", "uid-a", "")), nil),
			cmErr: apierrors.NewServiceUnavailable("etcd is down"), wantErr: "get ConfigMap kube-system/kubelet-a: etcd is down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []k8sruntime.Object{cmA, cmB}
			if tc.node != nil {
				objs = append(objs, tc.node)
			}
			client := fake.NewClientset(objs...)
			if tc.cmErr != nil {
				client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
					return true, nil, tc.cmErr
				})
			}
			s := newNodeSource(t, client, NodeOptions{})
			got, err := s.Assigned(context.Background())
			checkAssigned(t, got, err, tc.want, tc.wantErr, tc.wantPrefix, tc.invalid)
			if tc.name == "absent Node" && !apierrors.IsNotFound(err) {
				t.Errorf("error %v does not wrap the NotFound", err)
			}
		})
	}
}

// checkAssigned compares an Assigned result with the expected assignment
// or error.
func checkAssigned(t *testing.T, got Assignment, err error, want Assignment, wantErr string, prefix, isInvalid bool) {
	t.Helper()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("Assigned error: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Assigned (-want +got):\n%s", diff)
		}
		return
	}
	if err == nil {
		t.Fatalf("Assigned = %+v, want error %q", got, wantErr)
	}
	if msg := err.Error(); (prefix && !strings.HasPrefix(msg, wantErr)) || (!prefix && msg != wantErr) {
		t.Errorf("Assigned error = %q, want %q (prefix only: %v)", msg, wantErr, prefix)
	}
	var ie *nodeapi.InvalidError
	if errors.As(err, &ie) != isInvalid {
		t.Errorf("error %q: *nodeapi.InvalidError = %v, want %v", err, !isInvalid, isInvalid)
	}
	if diff := cmp.Diff(Assignment{}, got); diff != "" {
		t.Errorf("Assigned returned an assignment with its error:\n%s", diff)
	}
}

func TestAssignmentChanged(t *testing.T) {
	s := newNodeSource(t, fake.NewClientset(), NodeOptions{})
	base := testNode(str(`{"configMap":{"namespace":"a","name":"b","uid":"c"}}`), ref("a", "b", "c", ""))
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"status only", func(n *corev1.Node) { n.Status.Phase = corev1.NodeRunning; n.ResourceVersion = "99" }, false},
		{"other annotation", func(n *corev1.Node) { n.Annotations["other"] = "y" }, false},
		{"labels", func(n *corev1.Node) { n.Labels = map[string]string{"a": "b"} }, false},
		{"annotation value", func(n *corev1.Node) { n.Annotations[nodeapi.AssignmentAnnotation] = "{}" }, true},
		{"annotation removed", func(n *corev1.Node) { delete(n.Annotations, nodeapi.AssignmentAnnotation) }, true},
		{"annotation blanked", func(n *corev1.Node) { n.Annotations[nodeapi.AssignmentAnnotation] = "" }, true},
		{"legacy changed", func(n *corev1.Node) { n.Spec.ConfigSource.ConfigMap.UID = "d" }, true},
		{"legacy removed", func(n *corev1.Node) { n.Spec.ConfigSource = nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.mutate(n)
			if got := s.assignmentChanged(base, n); got != tc.want {
				t.Errorf("assignmentChanged = %v, want %v", got, tc.want)
			}
			if got := s.assignmentChanged(n, base); got != tc.want {
				t.Errorf("assignmentChanged reversed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSlimNode(t *testing.T) {
	s := newNodeSource(t, fake.NewClientset(), NodeOptions{})
	full := testNode(str("{}"), ref("a", "b", "c", ""))
	full.ResourceVersion = "5"
	full.Labels = map[string]string{"l": "v"}
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	full.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1 << 30}}
	before := full.DeepCopy()
	got, err := s.slimNode(full)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNodeName, UID: "node-uid", ResourceVersion: "5", Annotations: map[string]string{nodeapi.AssignmentAnnotation: "{}"}},
		Spec:       corev1.NodeSpec{ConfigSource: ref("a", "b", "c", "")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimNode (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, full); diff != "" {
		t.Errorf("slimNode changed its input:\n%s", diff)
	}
	again, _ := s.slimNode(got)
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("slimNode is not idempotent:\n%s", diff)
	}
	tomb := "not a node"
	if out, _ := s.slimNode(tomb); out != tomb {
		t.Errorf("slimNode(%v) = %v, want it unchanged", tomb, out)
	}
}

// observer runs a Remote and records, after each changed call, what
// Assigned returned then (see describe). It stops the Remote at cleanup and
// fails the test if Run did not return nil.
type observer struct {
	t     *testing.T
	calls chan string
	done  chan error
	stop  context.CancelFunc
}

func observe(t *testing.T, r Remote) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{t: t, calls: make(chan string, 1000), done: make(chan error, 1), stop: cancel}
	go func() {
		o.done <- r.Run(ctx, func() {
			a, err := r.Assigned(ctx)
			o.calls <- describe(a, err)
		})
	}()
	t.Cleanup(func() { o.shutdown() })
	return o
}

// shutdown cancels Run and checks that it returned nil.
func (o *observer) shutdown() {
	o.t.Helper()
	o.stop()
	select {
	case err := <-o.done:
		if err != nil {
			o.t.Errorf("Run returned %v, want nil", err)
		}
		o.done <- nil // later shutdowns see a clean stop
	case <-time.After(waitLimit):
		o.t.Fatalf("Run did not return within %v of its context ending", waitLimit)
	}
}

// waitFor reads changed calls until one saw want; spurious calls are
// allowed by the Remote contract and skipped.
func (o *observer) waitFor(want string) {
	o.t.Helper()
	timeout := time.After(waitLimit)
	var seen []string
	for {
		select {
		case got := <-o.calls:
			if got == want {
				return
			}
			seen = append(seen, got)
		case <-timeout:
			o.t.Fatalf("no changed call saw %q within %v; calls saw %q", want, waitLimit, seen)
		}
	}
}

// settle reads changed calls until none came for quiet.
func (o *observer) settle(quiet time.Duration) {
	o.t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case <-o.calls:
		case <-time.After(quiet):
			return
		case <-deadline:
			o.t.Fatalf("changed calls did not stop within %v", waitLimit)
		}
	}
}

// describe is an Assigned result in a short comparable form.
func describe(a Assignment, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error()
	case a.Source == nil:
		return "empty"
	default:
		return fmt.Sprintf("%s/%s uid=%s rv=%s data=%v", a.Source.ConfigMap.Namespace, a.Source.ConfigMap.Name,
			a.Source.ConfigMap.UID, a.Source.ConfigMap.ResourceVersion, a.ConfigMap.Data)
	}
}

// watchLog records the ConfigMap watches the informers open and close.
type watchLog struct {
	mu   sync.Mutex
	open map[string]int // "namespace fieldSelector" -> open watches
}

// recordConfigMapWatches makes client's ConfigMap watches go through log.
func recordConfigMapWatches(client *fake.Clientset) *watchLog {
	log := &watchLog{open: map[string]int{}}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	client.PrependWatchReactor("configmaps", func(action k8stesting.Action) (bool, watch.Interface, error) {
		wa := action.(k8stesting.WatchActionImpl)
		w, err := client.Tracker().Watch(gvr, wa.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		key := wa.GetNamespace() + " " + wa.ListOptions.FieldSelector
		log.mu.Lock()
		log.open[key]++
		log.mu.Unlock()
		return true, &loggedWatch{Interface: w, close: func() {
			log.mu.Lock()
			log.open[key]--
			if log.open[key] == 0 {
				delete(log.open, key)
			}
			log.mu.Unlock()
		}}, nil
	})
	return log
}

func (l *watchLog) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.open {
		out[k] = v
	}
	return out
}

// waitOpen waits until the open watches are want (the informers open and
// close them on their own goroutines).
func (l *watchLog) waitOpen(t *testing.T, want map[string]int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitLimit, true,
		func(context.Context) (bool, error) { return cmp.Equal(want, l.snapshot()), nil })
	if err != nil {
		t.Fatalf("open ConfigMap watches (-want +got):\n%s", cmp.Diff(want, l.snapshot()))
	}
}

type loggedWatch struct {
	watch.Interface
	once  sync.Once
	close func()
}

func (w *loggedWatch) Stop() {
	w.once.Do(w.close)
	w.Interface.Stop()
}

// eventually polls cond until it holds or waitLimit passes. It waits for
// informers, which run on their own goroutines, and never asserts timing.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitLimit, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: not within %v", what, waitLimit)
	}
}

func updateNode(t *testing.T, client kubernetes.Interface, rv string, mutate func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, testNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(n)
	n.ResourceVersion = rv
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func updateConfigMap(t *testing.T, client kubernetes.Interface, ns, name, rv string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data, cm.ResourceVersion = data, rv
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setAnnotation(t *testing.T, src *corev1.NodeConfigSource) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if src == nil {
			delete(n.Annotations, nodeapi.AssignmentAnnotation)
			return
		}
		n.Annotations[nodeapi.AssignmentAnnotation] = *annotationOf(t, src)
	}
}

// TestNodeRun walks one Run through assignment changes: every change of
// the annotation and every edit of the assigned ConfigMap is seen by a
// changed call, and the ConfigMap watch follows the assignment.
func TestNodeRun(t *testing.T) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1"})
	cmB := cmap("ns-b", "cm-b", "uid-b", "12", map[string]string{"kubelet": "b1"})
	client := fake.NewClientset(cmA, cmB, testNode(annotationOf(t, ref("ns-a", "cm-a", "uid-a", "")), nil))
	watches := recordConfigMapWatches(client)
	s := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
	o := observe(t, s)

	o.waitFor("ns-a/cm-a uid=uid-a rv=11 data=map[kubelet:a1]")
	watches.waitOpen(t, map[string]int{"ns-a metadata.name=cm-a": 1})

	t.Run("ConfigMap edit", func(t *testing.T) {
		updateConfigMap(t, client, "ns-a", "cm-a", "21", map[string]string{"kubelet": "a2"})
		o.waitFor("ns-a/cm-a uid=uid-a rv=21 data=map[kubelet:a2]")
	})
	t.Run("annotation moves to another ConfigMap", func(t *testing.T) {
		updateNode(t, client, "22", setAnnotation(t, ref("ns-b", "cm-b", "uid-b", "")))
		o.waitFor("ns-b/cm-b uid=uid-b rv=12 data=map[kubelet:b1]")
		watches.waitOpen(t, map[string]int{"ns-b metadata.name=cm-b": 1})
		updateConfigMap(t, client, "ns-b", "cm-b", "23", map[string]string{"kubelet": "b2"})
		o.waitFor("ns-b/cm-b uid=uid-b rv=23 data=map[kubelet:b2]")
	})
	t.Run("invalid assignment", func(t *testing.T) {
		updateNode(t, client, "24", setAnnotation(t, ref("ns-b", "cm-b", "uid-x", "")))
		o.waitFor("error: invalid NodeConfigSource.ConfigMap, uid uid-x and ns-b/cm-b do not refer to the same object (its uid is uid-b)")
	})
	t.Run("ConfigMap deleted and recreated", func(t *testing.T) {
		updateNode(t, client, "25", setAnnotation(t, ref("ns-b", "cm-b", "uid-b", "")))
		o.waitFor("ns-b/cm-b uid=uid-b rv=23 data=map[kubelet:b2]")
		if err := client.CoreV1().ConfigMaps("ns-b").Delete(context.Background(), "cm-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		o.waitFor("error: ConfigMap ns-b/cm-b does not exist")
		re := cmap("ns-b", "cm-b", "uid-b2", "26", map[string]string{"kubelet": "b3"})
		if _, err := client.CoreV1().ConfigMaps("ns-b").Create(context.Background(), re, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		o.waitFor("error: invalid NodeConfigSource.ConfigMap, uid uid-b and ns-b/cm-b do not refer to the same object (its uid is uid-b2)")
	})
	t.Run("legacy spec.configSource under the annotation", func(t *testing.T) {
		updateNode(t, client, "27", func(n *corev1.Node) { n.Spec.ConfigSource = ref("ns-a", "cm-a", "uid-a", "") })
		updateNode(t, client, "28", setAnnotation(t, nil))
		o.waitFor("ns-a/cm-a uid=uid-a rv=21 data=map[kubelet:a2]")
		watches.waitOpen(t, map[string]int{"ns-a metadata.name=cm-a": 1})
	})
	t.Run("empty assignment stops the ConfigMap watch", func(t *testing.T) {
		updateNode(t, client, "29", func(n *corev1.Node) { n.Spec.ConfigSource = nil })
		o.waitFor("empty")
		watches.waitOpen(t, map[string]int{})
	})
	t.Run("Run ends", func(t *testing.T) {
		o.shutdown()
		if diff := cmp.Diff(map[string]int{}, watches.snapshot()); diff != "" {
			t.Errorf("ConfigMap watches left open (-want +got):\n%s", diff)
		}
	})
}

// TestNodeRunFieldSelectors checks what a real API server is asked for:
// lists and watches restricted to this Node and to the assigned ConfigMap.
func TestNodeRunFieldSelectors(t *testing.T) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1"})
	client := fake.NewClientset(cmA, testNode(annotationOf(t, ref("ns-a", "cm-a", "uid-a", "")), nil))
	s := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
	o := observe(t, s)
	o.waitFor("ns-a/cm-a uid=uid-a rv=11 data=map[kubelet:a1]")
	want := map[string]bool{
		"list nodes  metadata.name=node-a":         true,
		"watch nodes  metadata.name=node-a":        true,
		"list configmaps ns-a metadata.name=cm-a":  true,
		"watch configmaps ns-a metadata.name=cm-a": true,
	}
	eventually(t, "lists and watches of both informers", func() bool {
		got := map[string]bool{}
		for _, a := range client.Actions() {
			switch a := a.(type) {
			case k8stesting.ListActionImpl:
				got[fmt.Sprintf("list %s %s %s", a.GetResource().Resource, a.GetNamespace(), a.ListOptions.FieldSelector)] = true
			case k8stesting.WatchActionImpl:
				got[fmt.Sprintf("watch %s %s %s", a.GetResource().Resource, a.GetNamespace(), a.ListOptions.FieldSelector)] = true
			}
		}
		return cmp.Equal(want, got)
	})
}

// TestNodeAssignedReadsCache checks that, once Run's informers have
// synced, Assigned answers from them without an API request, and that a
// negative answer is confirmed with a GET.
func TestNodeAssignedReadsCache(t *testing.T) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1"})
	client := fake.NewClientset(cmA, testNode(annotationOf(t, ref("ns-a", "cm-a", "uid-a", "")), nil))
	s := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
	ctx := context.Background()

	client.ClearActions()
	if _, err := s.Assigned(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gets(client); !cmp.Equal(got, []string{"nodes/node-a", "configmaps/cm-a"}) {
		t.Errorf("before Run, Assigned made GETs %q, want the Node and the ConfigMap", got)
	}

	o := observe(t, s)
	o.waitFor("ns-a/cm-a uid=uid-a rv=11 data=map[kubelet:a1]")
	eventually(t, "caches synced", func() bool {
		_, nodeOK := s.cachedNode()
		s.mu.Lock()
		w := s.watch
		s.mu.Unlock()
		_, cmOK := w.lookup("ns-a", "cm-a")
		return nodeOK && cmOK
	})
	client.ClearActions()
	a, err := s.Assigned(ctx)
	if err != nil || a.ConfigMap.Data["kubelet"] != "a1" {
		t.Fatalf("Assigned = %+v, %v", a, err)
	}
	if got := gets(client); len(got) != 0 {
		t.Errorf("with synced caches, Assigned made GETs %q, want none", got)
	}
	// The cached object is not handed out: changing the result leaves the
	// cache alone.
	a.ConfigMap.Data["kubelet"] = "changed"
	if again, err := s.Assigned(ctx); err != nil || again.ConfigMap.Data["kubelet"] != "a1" {
		t.Fatalf("after changing a result, Assigned = %+v, %v", again, err)
	}

	updateNode(t, client, "30", setAnnotation(t, ref("ns-a", "cm-a", "uid-other", "")))
	o.waitFor("error: invalid NodeConfigSource.ConfigMap, uid uid-other and ns-a/cm-a do not refer to the same object (its uid is uid-a)")
	client.ClearActions()
	if _, err := s.Assigned(ctx); err == nil {
		t.Fatal("Assigned accepted a wrong uid")
	}
	if got := gets(client); !cmp.Equal(got, []string{"configmaps/cm-a"}) {
		t.Errorf("an invalid verdict from the cache made GETs %q, want one confirming GET of the ConfigMap", got)
	}
}

// gets lists the GET requests client has seen, as resource/name.
func gets(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if g, ok := a.(k8stesting.GetActionImpl); ok {
			out = append(out, g.GetResource().Resource+"/"+g.GetName())
		}
	}
	return out
}

// TestNodeRunResync steps a fake clock past the jittered resync period and
// expects a changed call each time. The Node does not exist, so no
// informer event can call back instead.
func TestNodeRunResync(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	client := fake.NewClientset()
	s := newNodeSource(t, client, NodeOptions{Clock: clk, Resync: time.Minute})
	o := observe(t, s)
	for range 3 {
		eventually(t, "resync timer set", clk.HasWaiters)
		clk.Step(time.Minute + time.Minute/10 + time.Second)
		o.waitFor(`error: get Node node-a: nodes "node-a" not found`)
	}
}

func TestRunTwice(t *testing.T) {
	client := fake.NewClientset()
	node := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
	fixed, err := NewFixed(FixedOptions{Client: client, Namespace: "ns", Name: "cm", PayloadKey: "kubelet", Clock: testingclock.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    interface {
			Remote
			isRunning() bool
		}
		want string
	}{
		{"node", node, "source: NodeSource.Run is already running"},
		{"fixed", fixed, "source: FixedSource.Run is already running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(t, tc.r)
			eventually(t, "Run started", tc.r.isRunning)
			err := tc.r.Run(context.Background(), func() {})
			if err == nil || err.Error() != tc.want {
				t.Errorf("second Run = %v, want %q", err, tc.want)
			}
			o.shutdown()
			if tc.r.isRunning() {
				t.Error("still running after Run returned")
			}
		})
	}
}

func (s *NodeSource) isRunning() bool  { return s.running.Load() }
func (f *FixedSource) isRunning() bool { return f.running.Load() }

// TestRunLeaksNoGoroutine runs each source through watch moves and checks
// that, once Run has returned, no goroutine it started is left.
func TestRunLeaksNoGoroutine(t *testing.T) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1"})
	cmB := cmap("ns-b", "cm-b", "uid-b", "12", map[string]string{"kubelet": "b1"})
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, client *fake.Clientset)
	}{
		{"node", func(t *testing.T, client *fake.Clientset) {
			s := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
			o := observe(t, s)
			for i, src := range []*corev1.NodeConfigSource{ref("ns-b", "cm-b", "uid-b", ""), nil, ref("ns-a", "cm-a", "uid-a", ""), ref("ns-b", "cm-b", "uid-b", "")} {
				updateNode(t, client, fmt.Sprint(100+i), setAnnotation(t, src))
				want := "empty"
				if src != nil {
					cm := map[string]*corev1.ConfigMap{"cm-a": cmA, "cm-b": cmB}[src.ConfigMap.Name]
					want = describe(Assignment{Source: resolvedRef(cm.Namespace, cm.Name, string(cm.UID), cm.ResourceVersion, "kubelet"), ConfigMap: cm}, nil)
				}
				o.waitFor(want)
			}
			o.shutdown()
		}},
		{"fixed", func(t *testing.T, client *fake.Clientset) {
			f, err := NewFixed(FixedOptions{Client: client, Namespace: "ns-a", Name: "cm-a", PayloadKey: "kubelet", Clock: testingclock.NewFakeClock(time.Now())})
			if err != nil {
				t.Fatal(err)
			}
			o := observe(t, f)
			o.waitFor("ns-a/cm-a uid=uid-a rv=11 data=map[kubelet:a1]")
			updateConfigMap(t, client, "ns-a", "cm-a", "13", map[string]string{"kubelet": "a2"})
			o.waitFor("ns-a/cm-a uid=uid-a rv=13 data=map[kubelet:a2]")
			o.shutdown()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(cmA, cmB, testNode(annotationOf(t, ref("ns-a", "cm-a", "uid-a", "")), nil))
			before := runtime.NumGoroutine()
			tc.run(t, client)
			// Run waits for its informers: none of their goroutines may
			// be left the moment it has returned.
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			for _, g := range strings.Split(stacks.String(), "\n\n") {
				if strings.Contains(g, "k8s.io/client-go/tools/cache.") {
					t.Fatalf("an informer goroutine outlived Run:\n%s", g)
				}
			}
			// Run has returned; give goroutines that are past their last
			// statement a chance to exit before counting.
			var after int
			for range 1000 {
				if after = runtime.NumGoroutine(); after <= before {
					return
				}
				runtime.Gosched()
			}
			var dump bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("%d goroutines before Run, %d after it returned:\n%s", before, after, dump.String())
		})
	}
}

func BenchmarkNodeAssigned(b *testing.B) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": strings.Repeat("x", 4096)})
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			client := fake.NewClientset(cmA, testNode(annotationOf(b, ref("ns-a", "cm-a", "uid-a", "")), nil))
			s := newNodeSource(b, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			if cached {
				go func() { done <- s.Run(ctx, func() {}) }()
				err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) {
					_, nodeOK := s.cachedNode()
					s.mu.Lock()
					w := s.watch
					s.mu.Unlock()
					_, cmOK := w.lookup("ns-a", "cm-a")
					return nodeOK && cmOK, nil
				})
				if err != nil {
					b.Fatal("caches did not sync")
				}
			} else {
				done <- nil
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Assigned(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestNodeRunReadsANewConfigMapFromItsWatch: when the assignment moves to
// another ConfigMap, Run calls back once the new ConfigMap's watch has
// synced, so the consumer's Assigned reads it from the cache: no GET of
// the ConfigMap (issue 13: a change costs 3 requests, not 4). Before, the
// callback came at once and Assigned fetched the ConfigMap itself.
func TestNodeRunReadsANewConfigMapFromItsWatch(t *testing.T) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1"})
	cmB := cmap("ns-b", "cm-b", "uid-b", "12", map[string]string{"kubelet": "b1"})
	client := fake.NewClientset(cmA, cmB, testNode(annotationOf(t, ref("ns-a", "cm-a", "uid-a", "")), nil))
	var gets atomic.Int32
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	s := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
	o := observe(t, s)
	o.waitFor("ns-a/cm-a uid=uid-a rv=11 data=map[kubelet:a1]")
	// Let the calls of the start end: a call in flight when the Node
	// changes reads the new assignment before Run moved the watch, and
	// fetches the ConfigMap itself (a race this change narrows, not
	// removes; TestScale allows for it).
	o.settle(300 * time.Millisecond)
	before := gets.Load()
	updateNode(t, client, "22", setAnnotation(t, ref("ns-b", "cm-b", "uid-b", "")))
	o.waitFor("ns-b/cm-b uid=uid-b rv=12 data=map[kubelet:b1]")
	if n := gets.Load() - before; n != 0 {
		t.Fatalf("%d GETs of ConfigMaps for the move to cm-b; want 0 (read from its watch)", n)
	}
}

// TestNodeRunNewConfigMapWatchForbidden: a ConfigMap that may not be
// watched does not hold the consumer back for longer than syncPatience: it
// is called back and reads the ConfigMap with a GET.
func TestNodeRunNewConfigMapWatchForbidden(t *testing.T) {
	if testing.Short() {
		t.Skip("waits syncPatience (3s) of real time")
	}
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1"})
	node := testNode(nil, nil)
	node.Annotations = map[string]string{}
	client := fake.NewClientset(cmA, node)
	forbidden := func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no list or watch"))
	}
	client.PrependReactor("list", "configmaps", forbidden)
	client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no watch"))
	})
	s := newNodeSource(t, client, NodeOptions{Clock: testingclock.NewFakeClock(time.Now())})
	o := observe(t, s)
	o.waitFor("empty")
	start := time.Now()
	updateNode(t, client, "22", setAnnotation(t, ref("ns-a", "cm-a", "uid-a", "")))
	o.waitFor("ns-a/cm-a uid=uid-a rv=11 data=map[kubelet:a1]")
	if took := time.Since(start); took > syncPatience+2*time.Second {
		t.Fatalf("called back %v after the assignment; want within syncPatience (%v) and a little", took, syncPatience)
	}
}

// TestNodeLegacyConfigSourceIsTheKubelets: the legacy spec.configSource
// named the kubelet's config; another component's source never adopts it
// (it did: kube-proxy ran the kubelet's ConfigMap when a Node still had
// the old field and no kube-proxy annotation).
func TestNodeLegacyConfigSourceIsTheKubelets(t *testing.T) {
	cmA := cmap("ns-a", "cm-a", "uid-a", "11", map[string]string{"kubelet": "a1", "kube-proxy": "p1"})
	client := fake.NewClientset(cmA, testNode(nil, ref("ns-a", "cm-a", "uid-a", "")))
	kubelet := newNodeSource(t, client, NodeOptions{})
	if a, err := kubelet.Assigned(context.Background()); err != nil || a.Source == nil {
		t.Fatalf("kubelet: %s, want the legacy spec.configSource", describe(a, err))
	}
	proxy := newNodeSource(t, client, NodeOptions{Annotation: nodeapi.AssignmentAnnotationFor("kube-proxy"), PayloadKey: "kube-proxy"})
	if a, err := proxy.Assigned(context.Background()); err != nil || a.Source != nil {
		t.Fatalf("kube-proxy: %s, want the empty assignment", describe(a, err))
	}
}
