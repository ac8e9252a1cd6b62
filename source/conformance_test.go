package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/source/sourcetest"
)

// The conformance test of every Remote in this package; the Fake's is in
// package sourcetest.

const conformanceKey = "kubelet"

func TestDirConformance(t *testing.T) {
	sourcetest.RunRemoteConformance(t, sourcetest.Harness{PayloadKey: conformanceKey, New: newDirBackend})
}

func TestNodeConformance(t *testing.T) {
	sourcetest.RunRemoteConformance(t, sourcetest.Harness{PayloadKey: conformanceKey, New: newNodeBackend})
}

func TestFixedConformance(t *testing.T) {
	fixed := k8stypes.NamespacedName{Namespace: "kube-system", Name: "kube-proxy"}
	sourcetest.RunRemoteConformance(t, sourcetest.Harness{
		PayloadKey: conformanceKey,
		Fixed:      &fixed,
		New: func(t *testing.T) sourcetest.Backend {
			b := newAPIBackend(t)
			r, err := source.NewFixed(source.FixedOptions{Client: b.client, Namespace: fixed.Namespace, Name: fixed.Name,
				PayloadKey: conformanceKey, Clock: testingclock.NewFakeClock(time.Now())})
			if err != nil {
				t.Fatal(err)
			}
			b.remote = r
			return b
		},
	})
}

// dirBackend writes the files a Dir source reads, in a new folder, each
// replaced atomically as the Dir documentation asks.
type dirBackend struct {
	dir    string
	remote *source.Dir
}

func newDirBackend(t *testing.T) sourcetest.Backend {
	dir := t.TempDir()
	// An existing configmaps/ folder is the world without ConfigMaps; a
	// missing one is an error, not an absent ConfigMap.
	if err := os.Mkdir(filepath.Join(dir, source.ConfigMapsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := source.NewDir(source.DirOptions{Path: dir, PayloadKey: conformanceKey, PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &dirBackend{dir: dir, remote: d}
}

func (b *dirBackend) Remote() source.Remote { return b.remote }

// PutConfigMap writes configmaps/<name>.yaml without a resourceVersion: the
// Dir source derives one from the content. (The tests never use one name
// in two namespaces.)
func (b *dirBackend) PutConfigMap(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": cm.Namespace, "name": cm.Name, "uid": cm.UID},
		"data":     cm.Data,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.replace(t, filepath.Join(b.dir, source.ConfigMapsDir, cm.Name+".yaml"), data)
}

func (b *dirBackend) DeleteConfigMap(t *testing.T, _, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(b.dir, source.ConfigMapsDir, name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

func (b *dirBackend) Assign(t *testing.T, src *corev1.NodeConfigSource) {
	t.Helper()
	var data []byte // empty: the empty assignment
	if src != nil {
		var err error
		if data, err = yaml.Marshal(src); err != nil {
			t.Fatal(err)
		}
	}
	b.replace(t, filepath.Join(b.dir, source.AssignmentFile), data)
}

// replace writes a temporary dot-file beside path and renames it.
func (b *dirBackend) replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const conformanceNode = "node-conformance"

// apiBackend keeps ConfigMaps and the Node in a client-go fake clientset.
// The fake stores what it is given, so the backend gives every write a
// new resourceVersion, as an API server does. The sources get a fake
// clock: no resync calls back, only watch events do.
//
// The fake's watch from a List's resourceVersion replays the objects
// written since, but not the deletions: an object deleted between an
// informer's List and its Watch stayed in the informer's cache, and no
// event ever said it was gone (seen as a rare failure of "assigned
// ConfigMap deleted" under load). A real API server sends that DELETED
// event; so does this backend (replayDeletions).
type apiBackend struct {
	client  *fake.Clientset
	remote  source.Remote
	version atomic.Int64

	mu      sync.Mutex // orders deletions and the start of watches
	deleted []deletion
}

// deletion is a ConfigMap the backend deleted, and the fake tracker's
// resourceVersion right after: a watch from an earlier one must be told.
type deletion struct {
	cm    *corev1.ConfigMap
	after int64
}

var (
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	configMapsGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
)

// tickNamespace holds the objects written only to advance the fake
// tracker's resourceVersion; no source under test watches it.
const tickNamespace = "conformance-ticks"

func newAPIBackend(t *testing.T) *apiBackend {
	t.Helper()
	b := &apiBackend{client: fake.NewClientset()}
	b.client.PrependWatchReactor("configmaps", b.replayDeletions)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests to the fake API server, in order:\n%s", b.requests())
		}
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: conformanceNode, UID: "node-uid", ResourceVersion: b.nextVersion()}}
	if _, err := b.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return b
}

func newNodeBackend(t *testing.T) sourcetest.Backend {
	b := newAPIBackend(t)
	r, err := source.NewNode(source.NodeOptions{Client: b.client, NodeName: conformanceNode, PayloadKey: conformanceKey,
		Clock: testingclock.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	b.remote = r
	return b
}

// requests lists the requests the fake clientset has seen, one a line.
func (b *apiBackend) requests() string {
	var out strings.Builder
	for _, a := range b.client.Actions() {
		fmt.Fprintf(&out, "%s %s %s", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		switch a := a.(type) {
		case k8stesting.GetAction:
			fmt.Fprintf(&out, " %s", a.GetName())
		case k8stesting.DeleteAction:
			fmt.Fprintf(&out, " %s", a.GetName())
		case k8stesting.UpdateAction:
			fmt.Fprintf(&out, " %s", objectName(a.GetObject()))
		case k8stesting.CreateAction:
			fmt.Fprintf(&out, " %s", objectName(a.GetObject()))
		case k8stesting.ListAction:
			fmt.Fprintf(&out, " fieldSelector=%s", a.GetListRestrictions().Fields)
		case k8stesting.WatchAction:
			fmt.Fprintf(&out, " fieldSelector=%s", a.GetWatchRestrictions().Fields)
		}
		out.WriteString("\n")
	}
	return out.String()
}

func objectName(obj k8sruntime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "?"
	}
	return m.GetName()
}

func (b *apiBackend) nextVersion() string { return strconv.FormatInt(b.version.Add(1), 10) }

func (b *apiBackend) Remote() source.Remote { return b.remote }

func (b *apiBackend) PutConfigMap(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	ctx := context.Background()
	cms := b.client.CoreV1().ConfigMaps(cm.Namespace)
	cm = cm.DeepCopy()
	cm.ResourceVersion = b.nextVersion()
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (b *apiBackend) DeleteConfigMap(t *testing.T, namespace, name string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	tracker := b.client.Tracker()
	obj, err := tracker.Get(configMapsGVR, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.client.CoreV1().ConfigMaps(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The tracker does not count deletions: a write elsewhere makes every
	// later List return a newer resourceVersion than every earlier one.
	tick := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tickNamespace, Name: "tick-" + b.nextVersion()}}
	if err := tracker.Create(configMapsGVR, tick, tickNamespace); err != nil {
		t.Fatal(err)
	}
	after, err := b.trackerVersion()
	if err != nil {
		t.Fatal(err)
	}
	b.deleted = append(b.deleted, deletion{cm: obj.(*corev1.ConfigMap).DeepCopy(), after: after})
}

// trackerVersion is the resourceVersion a List returns now.
func (b *apiBackend) trackerVersion() (int64, error) {
	list, err := b.client.Tracker().List(configMapsGVR, configMapsGVK, tickNamespace)
	if err != nil {
		return 0, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(lm.GetResourceVersion(), 10, 64)
}

// replayDeletions is the ConfigMap watch reactor: the fake's own watch,
// plus a DELETED event for each ConfigMap the watch selects that was
// deleted after the List the watch resumes from, unless it exists again
// (then the fake's replayed ADDED event tells the informer).
func (b *apiBackend) replayDeletions(action k8stesting.Action) (bool, watch.Interface, error) {
	wa, ok := action.(k8stesting.WatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	tracker := b.client.Tracker()
	ns := wa.GetNamespace()
	w, err := tracker.Watch(configMapsGVR, ns, wa.ListOptions)
	if err != nil {
		return true, nil, err
	}
	from, err := strconv.ParseInt(wa.ListOptions.ResourceVersion, 10, 64)
	if err != nil { // no resourceVersion: the watch starts now
		return true, w, nil
	}
	fw, ok := w.(*watch.RaceFreeFakeWatcher)
	if !ok {
		return true, nil, fmt.Errorf("the fake tracker's watch is a %T, want *watch.RaceFreeFakeWatcher", w)
	}
	sel := wa.GetWatchRestrictions().Fields
	for _, d := range b.deleted {
		if d.after <= from || (ns != "" && d.cm.Namespace != ns) ||
			(sel != nil && !sel.Matches(fields.Set{"metadata.name": d.cm.Name, "metadata.namespace": d.cm.Namespace})) {
			continue
		}
		if _, err := tracker.Get(configMapsGVR, d.cm.Namespace, d.cm.Name); err == nil {
			continue
		}
		fw.Delete(d.cm.DeepCopy())
	}
	return true, w, nil
}

// Assign writes the annotation; nil removes it (no spec.configSource is
// set, so that is the empty assignment).
func (b *apiBackend) Assign(t *testing.T, src *corev1.NodeConfigSource) {
	t.Helper()
	ctx := context.Background()
	nodes := b.client.CoreV1().Nodes()
	n, err := nodes.Get(ctx, conformanceNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src == nil {
		delete(n.Annotations, nodeapi.AssignmentAnnotation)
	} else {
		data, err := json.Marshal(src)
		if err != nil {
			t.Fatal(err)
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[nodeapi.AssignmentAnnotation] = string(data)
	}
	n.ResourceVersion = b.nextVersion()
	if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
