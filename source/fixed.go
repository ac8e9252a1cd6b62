package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultResync is the default period of the API-server sources' periodic
// resync, before jitter.
const DefaultResync = 5 * time.Minute

// resyncJitter is the largest fraction of the resync period added to it, so
// that many nodes restarted together do not resync together.
const resyncJitter = 0.1

// FixedOptions configures a FixedSource.
type FixedOptions struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// Namespace of the ConfigMap. Required.
	Namespace string
	// Name of the ConfigMap. Required.
	Name string
	// PayloadKey is the ConfigMap data key that holds the config (the
	// profile's key). Required.
	PayloadKey string
	// Resync is the period after which Run calls back even without an
	// event, plus up to 10% jitter. Default DefaultResync (5m).
	Resync time.Duration
	// Clock times the resync. Default the real clock.
	Clock clock.Clock
}

// FixedSource is a Remote whose assignment is always one ConfigMap, named
// by namespace and name, at whatever UID it has now: the source for
// DaemonSet components that all run one shared config. A missing ConfigMap
// is an *InvalidError, so the component keeps its last-known-good config.
type FixedSource struct {
	opts    FixedOptions
	running atomic.Bool

	mu    sync.Mutex
	watch *configMapWatch // set while Run runs
}

var _ Remote = (*FixedSource)(nil)

// NewFixed validates opts and returns a FixedSource. It makes no API call.
func NewFixed(opts FixedOptions) (*FixedSource, error) {
	if opts.Client == nil {
		return nil, errors.New("source: FixedOptions.Client is required")
	}
	if err := checkName("FixedOptions.Namespace", opts.Namespace, validation.IsDNS1123Label); err != nil {
		return nil, err
	}
	if err := checkName("FixedOptions.Name", opts.Name, validation.IsDNS1123Subdomain); err != nil {
		return nil, err
	}
	if err := checkName("FixedOptions.PayloadKey", opts.PayloadKey, validation.IsConfigMapKey); err != nil {
		return nil, err
	}
	resync, err := resyncOrDefault("FixedOptions.Resync", opts.Resync)
	if err != nil {
		return nil, err
	}
	opts.Resync = resync
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &FixedSource{opts: opts}, nil
}

// Assigned returns the ConfigMap with the UID it has now, from the
// informer's cache while Run keeps one synced, otherwise (or when the cached
// copy does not resolve) from the API server.
func (f *FixedSource) Assigned(ctx context.Context) (Assignment, error) {
	f.mu.Lock()
	w := f.watch
	f.mu.Unlock()
	return resolveConfigMap(ctx, f.opts.Client, w, f.opts.Namespace, f.opts.Name, f.resolve)
}

func (f *FixedSource) resolve(cm *corev1.ConfigMap) (Assignment, error) {
	if cm == nil {
		return Assignment{}, invalid("ConfigMap %s/%s does not exist", f.opts.Namespace, f.opts.Name)
	}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: f.opts.Namespace,
		Name:      f.opts.Name,
		UID:       cm.UID,
	}}
	resolved, err := Resolve(src, cm, f.opts.PayloadKey)
	if err != nil {
		return Assignment{}, err
	}
	return Assignment{Source: resolved, ConfigMap: cm}, nil
}

// Run watches the ConfigMap with an informer restricted to it and calls
// changed once the informer has synced (so also when the ConfigMap does
// not exist), on each of its events and on every jittered resync. Calls
// never overlap. Watch errors are retried by the informer and logged
// through klog.FromContext(ctx); they do not end Run. Run returns nil when
// ctx ends, after the informer has stopped. It must not be called again
// while it runs.
func (f *FixedSource) Run(ctx context.Context, changed func()) error {
	if !f.running.CompareAndSwap(false, true) {
		return errors.New("source: FixedSource.Run is already running")
	}
	defer f.running.Store(false)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("configMap", f.opts.Namespace+"/"+f.opts.Name))

	wake := make(chan struct{}, 1)
	notify := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	// The timer exists before the first callback, so a test that saw one
	// can step a fake clock past it.
	resync := f.opts.Clock.NewTimer(wait.Jitter(f.opts.Resync, resyncJitter))
	defer resync.Stop()

	w, err := watchConfigMap(ctx, f.opts.Client, f.opts.Namespace, f.opts.Name, notify)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.watch = w
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.watch = nil
		f.mu.Unlock()
		w.stop()
	}()

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-resync.C():
			resync.Reset(wait.Jitter(f.opts.Resync, resyncJitter))
		}
		changed()
	}
}

// syncPatience bounds how long a consumer waits for a new ConfigMap watch
// to sync before it is called back anyway (it then reads the ConfigMap
// from the API server).
const syncPatience = 3 * time.Second

// configMapWatch is an informer on one ConfigMap. It runs from
// watchConfigMap until stop.
type configMapWatch struct {
	namespace, name string
	informer        cache.SharedIndexInformer
	factory         informers.SharedInformerFactory
	cancel          context.CancelFunc
	syncWaited      chan struct{} // closed when the wait for the first sync ends
}

// watchConfigMap starts an informer on namespace/name that calls notify on
// each event of that object, and once when its first list is in the cache:
// that list brings no event when the object does not exist, nor when it
// was deleted after the caller last read it, yet the caller's view may be
// stale. The list and watch carry a field selector on the name; the
// handler checks the name as well, because not every server (nor the
// client-go fake) applies the selector.
func watchConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name string, notify func()) (*configMapWatch, error) {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := factory.Core().V1().ConfigMaps().Informer()
	// Until the first sync, events are the initial list being delivered:
	// the consumer is called once it is in the cache (below), not for each
	// event, when a read would miss the cache and go to the API server.
	var synced atomic.Bool
	mine := func(obj any) bool { return synced.Load() && objectKey(obj) == namespace+"/"+name }
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if mine(obj) {
				notify()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if mine(newObj) && !sameVersion(oldObj, newObj) {
				notify()
			}
		},
		DeleteFunc: func(obj any) {
			if mine(obj) {
				notify()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch ConfigMap %s/%s: %w", namespace, name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.StartWithContext(ctx)
	syncWaited := make(chan struct{})
	go func() {
		defer close(syncWaited)
		// A watch that cannot sync (the ConfigMap may not be listed or
		// watched, the API server is away) must not hold the caller back:
		// after syncPatience it is called anyway, and reads go to the API
		// server until the cache syncs.
		patience := time.NewTimer(syncPatience)
		defer patience.Stop()
		for {
			select {
			case <-inf.HasSyncedChecker().Done():
				synced.Store(true)
				notify()
				return
			case <-patience.C:
				notify()
			case <-ctx.Done():
				return
			}
		}
	}()
	klog.FromContext(ctx).V(2).Info("Watching ConfigMap", "namespace", namespace, "name", name)
	return &configMapWatch{namespace: namespace, name: name, informer: inf, factory: factory, cancel: cancel, syncWaited: syncWaited}, nil
}

// stop stops the informer and waits until its goroutines have ended.
func (w *configMapWatch) stop() {
	w.cancel()
	w.factory.Shutdown()
	<-w.syncWaited
}

// lookup returns the cached namespace/name when w watches it, has synced,
// and holds it. w may be nil.
func (w *configMapWatch) lookup(namespace, name string) (*corev1.ConfigMap, bool) {
	if w == nil || w.namespace != namespace || w.name != name || !w.informer.HasSynced() {
		return nil, false
	}
	obj, ok, err := w.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	cm, ok := obj.(*corev1.ConfigMap)
	return cm, ok
}

// resolveConfigMap passes the ConfigMap namespace/name to resolve: the
// cached copy when w holds one and it resolves; otherwise, since a cache
// may lag the server, the object read from the API server (nil when it does
// not exist). Errors reading it are plain wrapped errors: the desired config
// is unclear, not invalid. resolve gets a private copy with its TypeMeta set.
func resolveConfigMap(ctx context.Context, client kubernetes.Interface, w *configMapWatch, namespace, name string,
	resolve func(*corev1.ConfigMap) (Assignment, error)) (Assignment, error) {
	if cm, ok := w.lookup(namespace, name); ok {
		if a, err := resolve(ownCopy(cm)); err == nil {
			return a, nil
		}
	}
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return Assignment{}, fmt.Errorf("get ConfigMap %s/%s: %w", namespace, name, err)
	default:
		cm = ownCopy(cm)
	}
	return resolve(cm)
}

// ownCopy returns a copy of cm that the caller may keep and change, with
// the TypeMeta that typed clients leave empty, so the object checkpoints
// as a complete ConfigMap.
func ownCopy(cm *corev1.ConfigMap) *corev1.ConfigMap {
	out := cm.DeepCopy()
	out.Kind, out.APIVersion = "ConfigMap", "v1"
	return out
}

// objectKey is the namespace/name (or name) of an informer object or
// deletion tombstone; "" when it has none.
func objectKey(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	if m.GetNamespace() == "" {
		return m.GetName()
	}
	return m.GetNamespace() + "/" + m.GetName()
}

// sameVersion reports whether an update event re-delivers the version
// already seen (as a relist does). Objects without a resourceVersion never
// count as the same.
func sameVersion(oldObj, newObj any) bool {
	o, err1 := meta.Accessor(oldObj)
	n, err2 := meta.Accessor(newObj)
	return err1 == nil && err2 == nil && o.GetResourceVersion() != "" && o.GetResourceVersion() == n.GetResourceVersion()
}

// checkName checks that an option is set and passes an apimachinery
// validation function.
func checkName(option, value string, valid func(string) []string) error {
	if value == "" {
		return fmt.Errorf("source: %s is required", option)
	}
	if errs := valid(value); len(errs) > 0 {
		return fmt.Errorf("source: %s %q is invalid: %s", option, value, strings.Join(errs, "; "))
	}
	return nil
}

// resyncOrDefault checks a resync option and applies the default.
func resyncOrDefault(option string, d time.Duration) (time.Duration, error) {
	if d < 0 {
		return 0, fmt.Errorf("source: %s must not be negative, got %v", option, d)
	}
	if d == 0 {
		return DefaultResync, nil
	}
	return d, nil
}
