// One leadership term: the informers, their caches and event handlers, and
// the workers.

package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// worker state of one run (one leadership term).
type runner struct {
	c          *Controller
	queue      workqueue.TypedRateLimitingInterface[string]
	nodes      cache.SharedIndexInformer
	nodeCache  cache.MutationCache
	rollouts   cache.SharedIndexInformer
	roCache    cache.MutationCache
	configMaps cache.SharedIndexInformer
	recorder   record.EventRecorder
	// lastWrite is when each rollout's status was last written.
	lastWrite sync.Map
	// statuses caches what the nodes' status annotations decode to, by
	// annotation key and value: every plan reads every node, most of
	// them unchanged since the last plan, and most nodes of a fleet
	// publish the same value (decoded once for all of them). At most
	// maxStatusValues; full, it starts over. badStatuses are the values
	// that did not decode, by node name and key (the error names the
	// node).
	statusMu    sync.Mutex
	statuses    map[statusValue]*nodeapi.ConfigStatus
	badStatuses map[string]map[string]parsedStatus
	// memo remembers decoded claims and assignments across plans.
	memo plan.Memo
	// routes say which rollouts a Node event concerns, by rollout key.
	routeMu sync.RWMutex
	routes  map[string]route
	// gates runs the health gates of spec.analysis (analysis.go).
	gates *analyzer
	// pace spaces the plans of each rollout (pacing.go).
	pace pacer
	// budgets reads the PodDisruptionBudgets and pods (disruption.go).
	budgets *budgets
}

func (c *Controller) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	o := c.opts
	c.running.Store(true)
	defer func() {
		c.synced.Store(false)
		c.running.Store(false)
	}()
	factory := informers.NewSharedInformerFactoryWithOptions(o.Client, o.Resync,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = o.NodeLabelSelector }))
	nodes := factory.InformerFor(&corev1.Node{}, nodeInformer(o.NodeLabelSelector))
	// Cache what is read of a Node, not the Node: a real one is several
	// KiB (images, managedFields), and the cache holds the whole fleet.
	if err := nodes.SetTransform(CachedNode); err != nil {
		return fmt.Errorf("Node informer: %w", err)
	}
	cmFactory := informers.NewSharedInformerFactoryWithOptions(o.Client, o.Resync, informers.WithNamespace(o.Namespace))
	configMaps := cmFactory.Core().V1().ConfigMaps().Informer()
	// Only the keys matter: drop the data from the cache.
	if err := configMaps.SetTransform(stripConfigMapData); err != nil {
		return fmt.Errorf("ConfigMap informer: %w", err)
	}
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.Dynamic, o.Resync, o.Namespace, nil)
	rollouts := dynFactory.ForResource(v1alpha1.GroupVersionResource()).Informer()

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(o.EventSink)
	defer broadcaster.Shutdown()

	r := &runner{
		c: c,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "configrollouts"}),
		nodes:      nodes,
		rollouts:   rollouts,
		configMaps: configMaps,
		recorder:   broadcaster.NewRecorder(c.scheme, corev1.EventSource{Component: "dynconfig-rollout"}),
		routes:     map[string]route{},
	}
	r.gates = newAnalyzer(o.Client, o.Clock, r.queue.Add)
	r.nodeCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, nodes.GetStore(),
		cache.MutationCacheOptions{TTL: 10 * time.Minute, MaxCacheSize: 100000})
	r.roCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, rollouts.GetStore(),
		cache.MutationCacheOptions{TTL: 10 * time.Minute, MaxCacheSize: 10000})
	defer r.queue.ShutDown()

	if _, err := rollouts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.roCache.OnAddOrUpdate(obj.(runtime.Object)); r.setRoute(obj); r.enqueue(obj) },
		UpdateFunc: func(_, obj any) {
			r.roCache.OnAddOrUpdate(obj.(runtime.Object))
			r.setRoute(obj)
			// A rollout that ends (or finishes reverting) may let a
			// refused one start: plan them all (they are few).
			r.enqueueAll()
		},
		DeleteFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				r.roCache.OnDelete(u)
				r.dropRoute(u.GetNamespace(), u.GetName())
				r.lastWrite.Delete(u.GetNamespace() + "/" + u.GetName())
				r.gates.forget(u.GetNamespace() + "/" + u.GetName())
				c.metrics.forget(u.GetNamespace(), u.GetName())
			}
			r.enqueueAll() // a deleted rollout may have blocked another
		},
	}); err != nil {
		return err
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			r.nodeCache.OnAddOrUpdate(obj.(runtime.Object))
			if n, ok := obj.(*nodeFacts); ok {
				r.enqueueForNode(n)
			}
		},
		UpdateFunc: func(old, obj any) {
			r.nodeCache.OnAddOrUpdate(obj.(runtime.Object))
			on, nn := old.(*nodeFacts), obj.(*nodeFacts)
			if !maps.Equal(on.Annotations, nn.Annotations) || !maps.Equal(on.Labels, nn.Labels) {
				r.enqueueForNode(on, nn)
			}
			if !on.sameConditions(nn) {
				r.gates.nodeChanged(on.node(), nn.node())
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*nodeFacts); ok {
				r.nodeCache.OnDelete(n)
				r.forgetStatus(n.Name)
				r.enqueueForNode(n)
			}
		},
	}); err != nil {
		return err
	}
	cmHandler := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			r.enqueueFor(cm.Namespace, cm.Name)
		}
	}
	if _, err := configMaps.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: cmHandler, UpdateFunc: func(_, obj any) { cmHandler(obj) }, DeleteFunc: cmHandler,
	}); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	cmFactory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cmFactory.Shutdown()
	defer dynFactory.Shutdown()
	stopBudgets, err := r.startBudgets(ctx)
	if err != nil {
		return err
	}
	defer stopBudgets()
	if !r.waitForSync(ctx, nodes.HasSynced, configMaps.HasSynced, rollouts.HasSynced) {
		return nil
	}
	c.synced.Store(true)
	logger.Info("Rollout controller running", "workers", o.Workers, "namespace", o.Namespace)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() { wait.UntilWithContext(ctx, r.work, time.Second) })
	}
	wg.Go(func() { r.gates.run(ctx) })
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
	return nil
}

// waitForSync waits for the informers until ctx ends (false). Every
// SyncPatience it asks the API server why they have not synced and says
// what to do: the CRD is not installed, or the controller's identity may
// not list what it must (client-go's reflector only logs the raw error,
// and retries).
func (r *runner) waitForSync(ctx context.Context, synced ...cache.InformerSynced) bool {
	logger := klog.FromContext(ctx)
	for {
		waitCtx, cancel := context.WithTimeout(ctx, r.c.opts.SyncPatience)
		ok := cache.WaitForCacheSync(waitCtx.Done(), synced...)
		cancel()
		switch {
		case ok:
			return true
		case ctx.Err() != nil:
			return false
		}
		o := r.c.opts
		_, err := o.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(o.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		switch {
		case apierrors.IsNotFound(err):
			logger.Error(err, "ConfigRollouts are not served: the CRD is not installed; waiting for it",
				"crd", "configrollouts.dynconfig.io", "install", "kubectl apply -f deploy/rollout/dynconfig.io_configrollouts.yaml")
		case apierrors.IsForbidden(err):
			logger.Error(err, "This identity may not list ConfigRollouts; waiting for its grants",
				"namespace", o.Namespace, "grants", "deploy/overlays/one-namespace/rbac.yaml with --namespace (or deploy/overlays/cluster-wide/rbac.yaml)")
		case err != nil:
			logger.Error(err, "Listing ConfigRollouts failed; waiting")
		default:
			for _, probe := range []struct {
				what string
				list func() error
			}{
				{"Nodes", func() error {
					_, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: o.NodeLabelSelector})
					return err
				}},
				{"ConfigMaps", func() error {
					_, err := o.Client.CoreV1().ConfigMaps(o.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
					return err
				}},
			} {
				if err := probe.list(); err != nil {
					logger.Error(err, "Listing "+probe.what+" failed; waiting", "namespace", o.Namespace)
				}
			}
		}
	}
}

// stripConfigMapData keeps a ConfigMap's keys, not its values.
func stripConfigMapData(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID, ResourceVersion: cm.ResourceVersion,
	}, Immutable: cm.Immutable}
	if len(cm.Data) > 0 {
		out.Data = make(map[string]string, len(cm.Data))
		for k := range cm.Data {
			out.Data[k] = ""
		}
	}
	return out, nil
}
