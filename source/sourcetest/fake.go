package sourcetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
)

// Fake is an in-memory source.Remote. Its zero value is not usable; call
// NewFake. It is safe for concurrent use, and Run may run several times at
// once (each Run gets every notification).
//
// Assigned resolves the assignment against the stored ConfigMaps with
// nodeapi.Validate and source.Resolve, so its *nodeapi.InvalidError messages
// are those of the real sources, and returns copies the caller may keep and
// change. Every change (PutConfigMap, DeleteConfigMap, Assign,
// SetReadError, Notify) calls back every running Run, once per burst of
// changes: calls of one Run never overlap and may coalesce.
type Fake struct {
	payloadKey string

	mu         sync.Mutex
	configMaps map[k8stypes.NamespacedName]*corev1.ConfigMap
	assignment *corev1.NodeConfigSource
	readErr    error
	failNext   int
	failErr    error
	version    int64
	watchers   map[chan struct{}]struct{}
}

var _ source.Remote = (*Fake)(nil)

// NewFake returns a Fake with no ConfigMap and the empty assignment.
// payloadKey is the data key read when an assignment names none (the
// profile's key); it must not be empty.
func NewFake(payloadKey string) *Fake {
	if payloadKey == "" {
		panic("sourcetest: NewFake needs a payload key")
	}
	return &Fake{
		payloadKey: payloadKey,
		configMaps: map[k8stypes.NamespacedName]*corev1.ConfigMap{},
		watchers:   map[chan struct{}]struct{}{},
	}
}

// PutConfigMap creates the ConfigMap cm.Namespace/cm.Name, or replaces it
// (an edit in place when the UID is the same), and returns the stored copy.
// Like an API server, it gives the object a new resourceVersion and, when
// cm has none, a UID; unlike one, it keeps a resourceVersion that cm sets,
// so a test can match checkpoints it wrote before. cm must name its
// namespace and name.
func (f *Fake) PutConfigMap(cm *corev1.ConfigMap) *corev1.ConfigMap {
	if cm.Namespace == "" || cm.Name == "" {
		panic(fmt.Sprintf("sourcetest: Fake.PutConfigMap needs a namespace and a name, got %q/%q", cm.Namespace, cm.Name))
	}
	stored := cm.DeepCopy()
	stored.Kind, stored.APIVersion = "ConfigMap", "v1"
	f.mu.Lock()
	f.version++
	if stored.ResourceVersion == "" {
		stored.ResourceVersion = strconv.FormatInt(f.version, 10)
	}
	if stored.UID == "" {
		stored.UID = k8stypes.UID("fake-uid-" + strconv.FormatInt(f.version, 10))
	}
	f.configMaps[k8stypes.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}] = stored
	f.notifyLocked()
	f.mu.Unlock()
	return stored.DeepCopy()
}

// DeleteConfigMap deletes namespace/name and reports whether it existed.
func (f *Fake) DeleteConfigMap(namespace, name string) bool {
	key := k8stypes.NamespacedName{Namespace: namespace, Name: name}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.configMaps[key]
	delete(f.configMaps, key)
	f.notifyLocked()
	return ok
}

// Assign makes src (a copy of it) the assignment; nil is the empty
// assignment. src is not checked here: Assigned reports an invalid one.
func (f *Fake) Assign(src *corev1.NodeConfigSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assignment = src.DeepCopy()
	f.notifyLocked()
}

// SetReadError makes every Assigned fail with err, a failure to read the
// assignment (the desired config is unclear), until it is called again
// with nil. It calls back running Runs, so a consumer notices the outage
// and the recovery, as it would after an informer relist.
func (f *Fake) SetReadError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErr = err
	f.notifyLocked()
}

// FailNextReads makes the next n calls of Assigned fail with err, as an
// API server that is down while a component starts, then read normally
// again. It calls nothing back.
func (f *Fake) FailNextReads(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext, f.failErr = n, err
}

// Notify calls back running Runs without a change: a spurious call, which
// the source.Remote contract allows.
func (f *Fake) Notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notifyLocked()
}

func (f *Fake) notifyLocked() {
	for w := range f.watchers {
		select {
		case w <- struct{}{}:
		default: // a call is already pending: it will see this change
		}
	}
}

// Assigned resolves the assignment against the stored ConfigMaps. The
// error is the injected read error if any (see SetReadError and
// FailNextReads), else the *nodeapi.InvalidError of an invalid assignment.
func (f *Fake) Assigned(context.Context) (source.Assignment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return source.Assignment{}, f.failErr
	}
	if f.readErr != nil {
		return source.Assignment{}, f.readErr
	}
	src := f.assignment
	if err := nodeapi.Validate(src); err != nil {
		return source.Assignment{}, err
	}
	if src == nil {
		return source.Assignment{}, nil
	}
	stored := f.configMaps[k8stypes.NamespacedName{Namespace: src.ConfigMap.Namespace, Name: src.ConfigMap.Name}]
	resolved, err := source.Resolve(src, stored, f.payloadKey)
	if err != nil {
		return source.Assignment{}, err
	}
	return source.Assignment{Source: resolved, ConfigMap: stored.DeepCopy()}, nil
}

// Run calls changed once right away and then after every change, until
// ctx ends; it returns nil then. Calls never overlap, and none is made
// after Run has returned.
func (f *Fake) Run(ctx context.Context, changed func()) error {
	wake := make(chan struct{}, 1)
	wake <- struct{}{} // the call after Run starts watching
	f.mu.Lock()
	f.watchers[wake] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, wake)
		f.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		if ctx.Err() != nil { // both were ready: ending wins
			return nil
		}
		changed()
	}
}
