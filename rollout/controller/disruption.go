package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// podsTTL is how long the pods read on a node serve the plans that follow:
// a burst of plans (every Node event of a rollout plans it) reads each
// node once. A pod served from this cache counts as Ready whatever it was
// then: one that turned Ready since would otherwise be missed (the
// budgets' status, from the informer, already counts it healthy), so a
// cached read can only hold a node longer, never let one go too soon.
const podsTTL = 5 * time.Second

// budgets gathers plan.Input.Disruption: the PodDisruptionBudgets of every
// namespace from an informer (they are few, and the disruption
// controller keeps their status.disruptionsAllowed current), and the pods
// of a node only when the planner considers that node (the nodes in trial
// and the candidates of an assignment round, never the whole fleet): a
// list by spec.nodeName from the API server's watch cache, kept podsTTL.
//
// Cost at 1,000 nodes: no pod is watched; a round reads the pods of the
// nodes in trial (at most maxUnavailable) and of each node it checks,
// which is the round's room when the budgets let the nodes go, and every
// candidate when they hold them all (then once per podsTTL at most, and
// the rollout is planned again every plan.DisruptionBudgetRequeue or when
// a budget changes).
type budgets struct {
	informer cache.SharedIndexInformer
	factory  informers.SharedInformerFactory
	client   kubernetes.Interface
	clock    clock.PassiveClock

	mu      sync.Mutex
	lastErr string               // the informer's last list or watch error
	pods    map[string]nodePods  // by node name
	sels    map[string]parsedSel // PDB selectors, by namespace/name
}

// nodePods is what was read of a node's pods.
type nodePods struct {
	at   time.Time
	pods []corev1.Pod
}

// parsedSel is a PDB's selector, parsed once per generation.
type parsedSel struct {
	generation int64
	sel        labels.Selector
}

// startBudgets makes and starts the PodDisruptionBudget informer of a
// run (r.budgets); a budget's change plans the rollouts that hold nodes
// back for budgets again. stop stops the informer.
func (r *runner) startBudgets(ctx context.Context) (stop func(), err error) {
	o := r.c.opts
	r.budgets, err = newBudgets(o.Client, o.Resync, o.Clock, r.enqueueHeld)
	if err != nil {
		return nil, err
	}
	return r.budgets.start(ctx), nil
}

// newBudgets makes the PodDisruptionBudget informer; changed is called
// when a budget changes.
func newBudgets(client kubernetes.Interface, resync time.Duration, clk clock.PassiveClock, changed func()) (*budgets, error) {
	factory := informers.NewSharedInformerFactory(client, resync)
	inf := factory.Policy().V1().PodDisruptionBudgets().Informer()
	b := &budgets{informer: inf, factory: factory, client: client, clock: clk, pods: map[string]nodePods{}, sels: map[string]parsedSel{}}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		b.mu.Lock()
		b.lastErr = err.Error()
		b.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("PodDisruptionBudget informer: %w", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		return nil, fmt.Errorf("PodDisruptionBudget informer: %w", err)
	}
	return b, nil
}

// start starts the informer; the returned function stops it. The
// controller does not wait for it to sync: until it has, rollouts that
// respect budgets assign nothing (plan.Disruption.Unknown says why), and
// the others go on.
func (b *budgets) start(ctx context.Context) (stop func()) {
	b.factory.Start(ctx.Done())
	return b.factory.Shutdown
}

// input is the Disruption a plan of ro reads: nil when the rollout
// ignores budgets or assigns nothing now (it is not active).
func (b *budgets) input(ctx context.Context, ro *v1alpha1.ConfigRollout) *plan.Disruption {
	if ro.Spec.PodDisruptionBudgets == v1alpha1.DisruptionBudgetsIgnore || !ro.Status.Phase.Active() || ro.DeletionTimestamp != nil {
		return nil
	}
	if !b.informer.HasSynced() {
		b.mu.Lock()
		why := "their cache has not synced yet"
		if b.lastErr != "" {
			why += " (listing PodDisruptionBudgets: " + b.lastErr + "; the controller needs list and watch on poddisruptionbudgets.policy in every namespace)"
		}
		b.mu.Unlock()
		return &plan.Disruption{Unknown: why}
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, obj := range b.informer.GetStore().List() {
		if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			pdbs = append(pdbs, pdb)
		}
	}
	slices.SortFunc(pdbs, func(x, y *policyv1.PodDisruptionBudget) int {
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	d := &plan.Disruption{Budgets: make([]plan.Budget, len(pdbs))}
	byNS := map[string][]int{}
	sels := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed := pdb.Status.DisruptionsAllowed
		if pdb.Status.ObservedGeneration < pdb.Generation {
			// The disruption controller has not seen its spec yet: the
			// Eviction API refuses, and so does the planner.
			allowed = 0
		}
		d.Budgets[i] = plan.Budget{Namespace: pdb.Namespace, Name: pdb.Name, Allowed: allowed}
		sels[i] = b.selector(pdb)
		byNS[pdb.Namespace] = append(byNS[pdb.Namespace], i)
	}
	b.forgetSelectors(pdbs)
	d.PodsOn = func(node string) ([]plan.Pod, error) {
		if len(pdbs) == 0 {
			return nil, nil
		}
		pods, cached, err := b.podsOn(ctx, node)
		if err != nil {
			return nil, err
		}
		var out []plan.Pod
		for i := range pods {
			pod := &pods[i]
			var of []int
			for _, j := range byNS[pod.Namespace] {
				if sels[j].Matches(labels.Set(pod.Labels)) {
					of = append(of, j)
				}
			}
			if of != nil {
				out = append(out, plan.Pod{Budgets: of, Ready: cached || healthy(pod)})
			}
		}
		return out, nil
	}
	return d
}

// selector returns a PDB's selector as the disruption controller reads it
// (policy/v1: an empty selector selects every pod of the namespace, a
// nil one none); an invalid one selects none, as there.
func (b *budgets) selector(pdb *policyv1.PodDisruptionBudget) labels.Selector {
	key := pdb.Namespace + "/" + pdb.Name
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sels[key]; ok && s.generation == pdb.Generation && pdb.Generation != 0 {
		return s.sel
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		sel = labels.Nothing()
	}
	b.sels[key] = parsedSel{generation: pdb.Generation, sel: sel}
	return sel
}

// forgetSelectors drops the parsed selectors of deleted budgets.
func (b *budgets) forgetSelectors(pdbs []*policyv1.PodDisruptionBudget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.sels) <= len(pdbs) {
		return
	}
	keep := make(map[string]bool, len(pdbs))
	for _, pdb := range pdbs {
		keep[pdb.Namespace+"/"+pdb.Name] = true
	}
	for key := range b.sels {
		if !keep[key] {
			delete(b.sels, key)
		}
	}
}

// podsOn lists the pods bound to node (from the watch cache), or returns
// the ones read within podsTTL (cached).
func (b *budgets) podsOn(ctx context.Context, node string) (pods []corev1.Pod, cached bool, err error) {
	now := b.clock.Now()
	b.mu.Lock()
	if p, ok := b.pods[node]; ok && now.Sub(p.at) < podsTTL {
		b.mu.Unlock()
		return p.pods, true, nil
	}
	b.mu.Unlock()
	list, err := b.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", node).String(),
		ResourceVersion: "0",
	})
	if err != nil {
		return nil, false, fmt.Errorf("list the pods on node %s: %w", node, err)
	}
	pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Spec.NodeName != node })
	b.mu.Lock()
	for name, p := range b.pods {
		if now.Sub(p.at) >= podsTTL {
			delete(b.pods, name)
		}
	}
	b.pods[node] = nodePods{at: now, pods: pods}
	b.mu.Unlock()
	return pods, false, nil
}

// healthy reports whether the disruption controller counts pod as
// healthy: Ready, and not being deleted.
func healthy(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// enqueueHeld plans again the rollouts that hold nodes back for their
// budgets (their DisruptionBudget condition is True): a budget changed.
func (r *runner) enqueueHeld() {
	for _, obj := range r.rollouts.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == v1alpha1.ConditionDisruptionBudget && m["status"] == string(metav1.ConditionTrue) {
				r.enqueue(u)
				break
			}
		}
	}
}
