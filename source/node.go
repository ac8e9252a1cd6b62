package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// NodeOptions configures a NodeSource.
type NodeOptions struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName is this node's Node object. Required.
	NodeName string
	// PayloadKey is the ConfigMap data key used when the assignment names
	// none (the profile's key). Required.
	PayloadKey string
	// Annotation is the Node annotation that holds the assignment. Default
	// nodeapi.AssignmentAnnotation (the kubelet's).
	Annotation string
	// PreflightAnnotation is the Node annotation that holds the
	// component's pre-flight request (nodeapi.PreflightAnnotationFor;
	// NodeSource.Preflight). Empty: no request is read.
	PreflightAnnotation string
	// Resync is the period after which Run calls back even without an
	// event, plus up to 10% jitter. Default DefaultResync (5m).
	Resync time.Duration
	// Clock times the resync. Default the real clock.
	Clock clock.Clock
}

// NodeSource is a Remote that reads a node's assignment from its Node
// object: the annotation (NodeOptions.Annotation) when present, else the
// legacy spec.configSource, which API servers before 1.24 still serve, else
// the empty assignment. An annotation whose value is blank or "null" is an
// explicit empty assignment and hides spec.configSource.
type NodeSource struct {
	opts    NodeOptions
	running atomic.Bool

	mu    sync.Mutex
	nodes cache.SharedIndexInformer // set while Run runs
	watch *configMapWatch           // the assigned ConfigMap's, while Run runs
	// preflight is the last pre-flight request resolved (preflight.go).
	preflight preflightMemo
}

var _ Remote = (*NodeSource)(nil)

// NewNode validates opts and returns a NodeSource. It makes no API call.
func NewNode(opts NodeOptions) (*NodeSource, error) {
	if opts.Client == nil {
		return nil, errors.New("source: NodeOptions.Client is required")
	}
	if err := checkName("NodeOptions.NodeName", opts.NodeName, validation.IsDNS1123Subdomain); err != nil {
		return nil, err
	}
	if err := checkName("NodeOptions.PayloadKey", opts.PayloadKey, validation.IsConfigMapKey); err != nil {
		return nil, err
	}
	if opts.Annotation == "" {
		opts.Annotation = nodeapi.AssignmentAnnotation
	}
	if err := checkName("NodeOptions.Annotation", opts.Annotation, validation.IsQualifiedName); err != nil {
		return nil, err
	}
	if opts.PreflightAnnotation != "" {
		if err := checkName("NodeOptions.PreflightAnnotation", opts.PreflightAnnotation, validation.IsQualifiedName); err != nil {
			return nil, err
		}
	}
	resync, err := resyncOrDefault("NodeOptions.Resync", opts.Resync)
	if err != nil {
		return nil, err
	}
	opts.Resync = resync
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &NodeSource{opts: opts}, nil
}

// Assigned reads the Node and the ConfigMap its assignment names and
// resolves them. While Run keeps the informers synced it reads their
// caches; it reads from the API server when they have not synced, miss the
// object, or hold a copy that does not resolve (a cache may lag the server,
// so an invalid verdict is always confirmed by a read).
func (s *NodeSource) Assigned(ctx context.Context) (Assignment, error) {
	node, err := s.node(ctx)
	if err != nil {
		return Assignment{}, err
	}
	src, err := s.assignmentOf(node)
	if err != nil {
		return Assignment{}, err
	}
	if src == nil {
		return Assignment{}, nil
	}
	s.mu.Lock()
	w := s.watch
	s.mu.Unlock()
	return resolveConfigMap(ctx, s.opts.Client, w, src.ConfigMap.Namespace, src.ConfigMap.Name,
		func(cm *corev1.ConfigMap) (Assignment, error) {
			resolved, err := Resolve(src, cm, s.opts.PayloadKey)
			if err != nil {
				return Assignment{}, err
			}
			return Assignment{Source: resolved, ConfigMap: cm}, nil
		})
}

// node returns this node from the synced informer cache, else from the
// API server.
func (s *NodeSource) node(ctx context.Context) (*corev1.Node, error) {
	if n, ok := s.cachedNode(); ok {
		return n, nil
	}
	n, err := s.opts.Client.CoreV1().Nodes().Get(ctx, s.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Node %s: %w", s.opts.NodeName, err)
	}
	return n, nil
}

// cachedNode returns this node when the node informer runs, has synced and
// holds it. The object is shared with the cache: read it only.
func (s *NodeSource) cachedNode() (*corev1.Node, bool) {
	s.mu.Lock()
	inf := s.nodes
	s.mu.Unlock()
	if inf == nil || !inf.HasSynced() {
		return nil, false
	}
	obj, ok, err := inf.GetStore().GetByKey(s.opts.NodeName)
	if err != nil || !ok {
		return nil, false
	}
	n, ok := obj.(*corev1.Node)
	return n, ok
}

// assignmentOf returns node's assignment, validated: the annotation's,
// else, for the kubelet's annotation only, the legacy spec.configSource
// (nodeapi.ReadAssignment), else nil.
func (s *NodeSource) assignmentOf(node *corev1.Node) (*corev1.NodeConfigSource, error) {
	src, _, err := nodeapi.ReadAssignment(node, s.opts.Annotation)
	return src, err
}

// Run watches this Node and the ConfigMap its assignment names, each with
// an informer restricted to that one object, and calls changed when the
// assignment (annotation or spec.configSource) changes, on every event of
// the watched ConfigMap, once each informer has synced (a ConfigMap that
// does not exist, or was deleted while its watch started, brings no
// event), and on every jittered resync. When the assignment names another
// ConfigMap the ConfigMap watch moves to it; when it names none, the watch
// stops. Calls never overlap. Watch errors and API server restarts are
// retried by the informers and logged through klog.FromContext(ctx); they
// do not end Run. Run returns nil when ctx ends, after every informer it
// started has stopped. It must not be called again while it runs.
func (s *NodeSource) Run(ctx context.Context, changed func()) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("source: NodeSource.Run is already running")
	}
	defer s.running.Store(false)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("node", s.opts.NodeName))

	wake := make(chan struct{}, 1)
	notify := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	// The timer exists before the first callback, so a test that saw one
	// can step a fake clock past it.
	resync := s.opts.Clock.NewTimer(wait.Jitter(s.opts.Resync, resyncJitter))
	defer resync.Stop()

	selector := fields.OneTermEqualSelector("metadata.name", s.opts.NodeName).String()
	factory := informers.NewSharedInformerFactoryWithOptions(s.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }),
		informers.WithTransform(s.slimNode))
	nodes := factory.Core().V1().Nodes().Informer()
	mine := func(obj any) bool { return objectKey(obj) == s.opts.NodeName }
	_, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if mine(obj) {
				notify()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if !mine(newObj) {
				return
			}
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 || s.assignmentChanged(o, n) {
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
		return fmt.Errorf("watch Node %s: %w", s.opts.NodeName, err)
	}
	ictx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.nodes = nodes
	s.mu.Unlock()
	factory.StartWithContext(ictx)
	defer func() {
		cancel()
		factory.Shutdown()
		s.mu.Lock()
		w := s.watch
		s.nodes, s.watch = nil, nil
		s.mu.Unlock()
		if w != nil {
			w.stop()
		}
	}()

	// The node's Add event can be handled before the informer counts as
	// synced, when retarget cannot trust the cache yet; so the end of the
	// first sync is an event of its own.
	nodesSynced := nodes.HasSyncedChecker().Done()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-nodesSynced:
			nodesSynced = nil // closed: wait on it once
		case <-resync.C():
			resync.Reset(wait.Jitter(s.opts.Resync, resyncJitter))
		}
		if s.retarget(ictx, notify) {
			// A new ConfigMap is assigned and its watch just started: its
			// first sync calls notify (or its wait gives up, see
			// watchConfigMap), and the consumer then reads the ConfigMap
			// from the cache instead of with a GET of its own: a change
			// costs the watch, not a GET and the watch.
			continue
		}
		changed()
	}
}

// retarget points the ConfigMap watch at the ConfigMap the cached
// assignment names: started when it names a new one, stopped when it names
// none. Until the node cache has synced, the watch is left as it is. It
// reports whether it started a watch, which calls notify once it synced.
func (s *NodeSource) retarget(ctx context.Context, notify func()) (started bool) {
	namespace, name, known := s.watchTarget()
	if !known {
		return false
	}
	s.mu.Lock()
	cur := s.watch
	s.mu.Unlock()
	if cur != nil && cur.namespace == namespace && cur.name == name {
		return false
	}
	var next *configMapWatch
	if name != "" {
		w, err := watchConfigMap(ctx, s.opts.Client, namespace, name, notify)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot watch the assigned ConfigMap; reads go to the API server")
		}
		next = w
	}
	s.mu.Lock()
	s.watch = next
	s.mu.Unlock()
	if cur != nil {
		cur.stop()
		klog.FromContext(ctx).V(2).Info("Stopped watching ConfigMap", "namespace", cur.namespace, "name", cur.name)
	}
	return next != nil
}

// watchTarget returns the ConfigMap the cached assignment names ("" when
// none: no node, an empty or an invalid assignment); known is false while
// the node cache has not synced.
func (s *NodeSource) watchTarget() (namespace, name string, known bool) {
	s.mu.Lock()
	inf := s.nodes
	s.mu.Unlock()
	if inf == nil || !inf.HasSynced() {
		return "", "", false
	}
	node, ok := s.cachedNode()
	if !ok {
		return "", "", true
	}
	src, err := s.assignmentOf(node)
	if err != nil || src == nil {
		return "", "", true
	}
	return src.ConfigMap.Namespace, src.ConfigMap.Name, true
}

// assignmentChanged reports whether an update of the Node may change its
// assignment: the annotation (its presence or value) or spec.configSource.
func (s *NodeSource) assignmentChanged(oldNode, newNode *corev1.Node) bool {
	ov, oldHas := oldNode.Annotations[s.opts.Annotation]
	nv, newHas := newNode.Annotations[s.opts.Annotation]
	if oldHas != newHas || ov != nv || s.preflightChanged(oldNode, newNode) {
		return true
	}
	return !apiequality.Semantic.DeepEqual(oldNode.Spec.ConfigSource, newNode.Spec.ConfigSource)
}

// slimNode is the node informer's transform: it keeps only what the
// assignment is read from, so the cache does not hold the Node's status,
// images and managed fields. It returns a new object and leaves its input
// alone.
func (s *NodeSource) slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            n.Name,
			UID:             n.UID,
			ResourceVersion: n.ResourceVersion,
		},
		Spec: corev1.NodeSpec{ConfigSource: n.Spec.ConfigSource},
	}
	if v, ok := n.Annotations[s.opts.Annotation]; ok {
		out.Annotations = map[string]string{s.opts.Annotation: v}
	}
	s.keepPreflight(n, out)
	return out, nil
}
