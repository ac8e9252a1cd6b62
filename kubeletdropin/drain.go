package kubeletdropin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/drain"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components/kubelet/changeclass"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// DefaultDrainTimeout bounds one drain of the Node for a drain-class change:
// well below a ConfigRollout's default progress deadline (600 s), so that
// a drain that cannot finish is reported "not applied here" before the
// rollout's deadline would count the node as failed.
const DefaultDrainTimeout = 5 * time.Minute

// DrainOptions says how the run role drains the Node for a change of class
// changeclass.Drain.
type DrainOptions struct {
	// Timeout bounds one drain: the evictions (retried while a
	// PodDisruptionBudget does not allow them, as kubectl drain does) and
	// the wait for the evicted pods to be gone. Default:
	// DefaultDrainTimeout.
	Timeout time.Duration
	// EvictRetryDelay is how long to wait before asking again for an
	// eviction a PodDisruptionBudget refused. Default: 5s (kubectl's).
	EvictRetryDelay time.Duration
}

// drainer is the run role's External.BeforeRestart and External.Settled
// for the stock kubelet: it asks StateChange what the kubelet's state files
// will see when the kubelet next starts on the config to run (the
// pre-start role's comparison, made ahead), and for a Drain change cordons
// the Node, evicts its pods through the Eviction API with
// k8s.io/kubectl/pkg/drain (PodDisruptionBudgets honoured, DaemonSet and
// mirror pods left, emptyDir data deleted) and marks the node drained
// (MarkDrained), so that the pre-start role removes the state files; a
// Refuse change is refused without a restart. Once the kubelet runs its
// last-known-good healthily, it uncordons the Node it cordoned.
type drainer struct {
	common   Common
	client   kubernetes.Interface
	nodeName string
	rootDir  string
	opts     DrainOptions
	now      func() time.Time
}

func newDrainer(o RunOptions) *drainer {
	d := &drainer{common: o.Common, client: o.Client, nodeName: o.NodeName, rootDir: o.KubeletRootDir, opts: o.Drain, now: time.Now}
	if d.opts.Timeout <= 0 {
		d.opts.Timeout = DefaultDrainTimeout
	}
	if d.opts.EvictRetryDelay <= 0 {
		d.opts.EvictRetryDelay = 5 * time.Second
	}
	return d
}

// BeforeRestart is External.BeforeRestart (see drainer).
func (d *drainer) BeforeRestart(ctx context.Context, plan dynconfig.RestartPlan) error {
	logger := klog.FromContext(ctx)
	ch, err := StateChange(d.common, plan.To.Document, logger.WithName("statechange"))
	if err != nil {
		// Nothing known of the change: the pre-start role removes no state
		// file without a drain, and the kubelet's own start check (a crash
		// loop, rolled back) stays the guard.
		logger.Error(err, "Classifying the change; restarting without a drain")
		return nil
	}
	config := describeChosen(plan.To)
	switch ch.Class {
	case changeclass.Restart:
		return nil
	case changeclass.Refuse:
		if plan.Rollback {
			return nil
		}
		return &lkg.ConfigError{Stage: lkg.StageValidate, Err: fmt.Errorf(
			"kubelet config %s changes %s, which dynconfig cannot change in place on a node that ran with the old value (change class Refuse, package changeclass): the node refuses it without trying it",
			config, strings.Join(ch.Fields, ", "))}
	}
	logger.Info("The change needs a drain of the Node", "config", config, "change", ch.String(), "rollback", plan.Rollback)
	// The evictions are bounded by opts.Timeout; the list, the cordon and
	// the mark are bounded here too, so that an API server that hangs
	// cannot keep the state dir held.
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout+time.Minute)
	defer cancel()
	return d.drainFor(ctx, config, plan.Rollback)
}

// drainFor cordons and drains the Node for config and marks it drained.
// A rollback while the Node is still cordoned by dynconfig needs no second
// drain: nothing was scheduled there since. On a failure it uncordons the
// Node if it cordoned it in this call, and returns why.
func (d *drainer) drainFor(ctx context.Context, config string, rollback bool) error {
	logger := klog.FromContext(ctx)
	node, err := d.client.CoreV1().Nodes().Get(ctx, d.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("draining node %s for kubelet config %s: reading the Node: %w", d.nodeName, config, err)
	}
	_, ours := node.Annotations[nodeapi.CordonAnnotation]
	if rollback && ours && node.Spec.Unschedulable {
		logger.Info("Rolling back on a Node dynconfig still keeps cordoned: no second drain", "config", config)
		return d.markDrained(config)
	}
	cordoned := false
	switch {
	case !node.Spec.Unschedulable:
		if err := d.cordon(ctx, node, config); err != nil {
			return fmt.Errorf("draining node %s for kubelet config %s: cordoning: %w", d.nodeName, config, err)
		}
		cordoned = true
	case !ours:
		logger.Info("The Node is cordoned already (not by dynconfig): draining it without cordoning, and it stays cordoned", "config", config)
	}
	fail := func(err error) error {
		if cordoned {
			// Also when ctx ended (the run role stops): a Node left
			// cordoned would stay so until the next Settled.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if uerr := d.uncordon(uctx); uerr != nil {
				logger.Error(uerr, "Uncordoning the Node after the drain failed")
				err = fmt.Errorf("%w; and the Node could not be uncordoned: %v", err, uerr)
			}
		}
		return err
	}
	if err := d.drain(ctx); err != nil {
		return fail(fmt.Errorf("draining node %s for kubelet config %s: %w", d.nodeName, config, err))
	}
	if err := d.markDrained(config); err != nil {
		return fail(err)
	}
	return nil
}

func (d *drainer) markDrained(config string) error {
	if err := MarkDrained(d.rootDir, config); err != nil {
		return fmt.Errorf("node %s drained for kubelet config %s, but: %w", d.nodeName, config, err)
	}
	return nil
}

// cordonPatch sets or removes spec.unschedulable with the cordon
// annotation, in one merge patch on the resourceVersion read.
func cordonPatch(resourceVersion string, on bool, why string) ([]byte, error) {
	var ann any
	if on {
		ann = why
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion, "annotations": map[string]any{nodeapi.CordonAnnotation: ann}},
		"spec":     map[string]any{"unschedulable": on},
	})
}

func (d *drainer) cordon(ctx context.Context, node *corev1.Node, config string) error {
	why := fmt.Sprintf("cordoned by dynconfig at %s to drain the node for kubelet config %s; dynconfig uncordons it once the kubelet runs its last-known-good config healthily",
		d.now().UTC().Format(time.RFC3339), config)
	p, err := cordonPatch(node.ResourceVersion, true, why)
	if err != nil {
		return err
	}
	_, err = d.client.CoreV1().Nodes().Patch(ctx, d.nodeName, types.MergePatchType, p, metav1.PatchOptions{FieldManager: fieldManager})
	if err == nil {
		klog.FromContext(ctx).Info("Node cordoned", "config", config)
	}
	return err
}

const fieldManager = "dynconfig-kubelet"

// uncordon uncordons the Node if dynconfig cordoned it (it carries
// nodeapi.CordonAnnotation), clearing the drained mark first: a Node that
// is not kept cordoned is not drained. A conflict is read again.
func (d *drainer) uncordon(ctx context.Context) error {
	for range 5 {
		node, err := d.client.CoreV1().Nodes().Get(ctx, d.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ours := node.Annotations[nodeapi.CordonAnnotation]; !ours {
			return nil
		}
		if err := ClearDrained(d.rootDir); err != nil {
			return err
		}
		p, err := cordonPatch(node.ResourceVersion, false, "")
		if err != nil {
			return err
		}
		_, err = d.client.CoreV1().Nodes().Patch(ctx, d.nodeName, types.MergePatchType, p, metav1.PatchOptions{FieldManager: fieldManager})
		if apierrors.IsConflict(err) {
			continue
		}
		if err == nil {
			klog.FromContext(ctx).Info("Node uncordoned")
		}
		return err
	}
	return fmt.Errorf("uncordoning node %s: it kept changing", d.nodeName)
}

// Settled is External.Settled: the kubelet runs its last-known-good
// healthily, so a Node dynconfig cordoned is uncordoned.
func (d *drainer) Settled(ctx context.Context) error { return d.uncordon(ctx) }

// drain evicts the Node's pods as kubectl drain --ignore-daemonsets
// --delete-emptydir-data --timeout does, within opts.Timeout, and says
// which pods did not go and why.
func (d *drainer) drain(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	c := &nodeClient{Interface: d.client, nodeName: d.nodeName, refusals: map[string]string{}}
	out := logWriter{logger: logger}
	h := &drain.Helper{
		Ctx:                  ctx,
		Client:               c,
		GracePeriodSeconds:   -1, // each pod's own
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   true,
		Timeout:              d.opts.Timeout,
		EvictErrorRetryDelay: d.opts.EvictRetryDelay,
		Out:                  out,
		ErrOut:               out,
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, _ bool, err error) {
			if err == nil {
				logger.Info("Pod evicted", "pod", klog.KObj(pod))
			}
		},
	}
	list, errs := h.GetPodsForDeletion(d.nodeName)
	if len(errs) > 0 {
		return fmt.Errorf("pods that kubectl drain would not evict either: %v", errors.Join(errs...))
	}
	pods := list.Pods()
	if w := list.Warnings(); w != "" {
		logger.Info("Drain: " + w)
	}
	if len(pods) == 0 {
		return nil
	}
	start := d.now()
	if err := h.DeleteOrEvictPods(pods); err != nil {
		return fmt.Errorf("the drain did not finish (drain timeout %v; %d of %d pods still on the node; %s): %w",
			d.opts.Timeout, c.remaining(ctx, pods), len(pods), c.why(), err)
	}
	logger.Info("Node drained", "pods", len(pods), "took", d.now().Sub(start).Round(time.Millisecond))
	return nil
}

// describeChosen names a config for messages.
func describeChosen(ch dynconfig.Chosen) string {
	if ch.Source == nil {
		return "local (the node's own files)"
	}
	return nodeapi.DescribeSource(ch.Source)
}

// logWriter logs what kubectl's drain helper prints, a line at a time.
type logWriter struct{ logger klog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			w.logger.Info("Drain: " + line)
		}
	}
	return len(p), nil
}

var _ io.Writer = logWriter{}

// nodeClient is the client the drain helper uses, on the kubelet's own
// credentials. Two adaptations, both narrow:
//   - the Node authorizer lets a node get only the pods bound to it, so a
//     pod that is gone answers Forbidden, not NotFound, and the helper would
//     take the end of a successful eviction for a failure: on Forbidden, Get
//     asks again by listing the node's pods (fieldSelector spec.nodeName,
//     which the Node authorizer allows) and answers NotFound when the pod is
//     not among them;
//   - it remembers the last reason each pod's eviction was refused (the
//     PodDisruptionBudget's message), to say why a drain did not finish.
type nodeClient struct {
	kubernetes.Interface
	nodeName string

	mu       sync.Mutex
	refusals map[string]string // namespace/name -> last refusal
}

func (c *nodeClient) CoreV1() typedcorev1.CoreV1Interface {
	return nodeCoreV1{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

func (c *nodeClient) PolicyV1() typedpolicyv1.PolicyV1Interface {
	return nodePolicyV1{PolicyV1Interface: c.Interface.PolicyV1(), c: c}
}

func (c *nodeClient) refused(ns, name string, err error) {
	msg := err.Error()
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Details != nil {
		for _, cause := range se.Status().Details.Causes {
			if cause.Type == policyv1.DisruptionBudgetCause {
				msg += " (" + cause.Message + ")"
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refusals[ns+"/"+name] = msg
}

// why names the pods whose eviction was refused and the last reason.
func (c *nodeClient) why() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.refusals) == 0 {
		return "no eviction was refused"
	}
	var out []string
	for pod, msg := range c.refusals {
		out = append(out, fmt.Sprintf("pod %s: %s", pod, msg))
	}
	slices.Sort(out)
	if len(out) > 5 {
		out = append(out[:5:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

// remaining counts the pods still on the node.
func (c *nodeClient) remaining(ctx context.Context, pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if _, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
			n++
		}
	}
	return n
}

type nodeCoreV1 struct {
	typedcorev1.CoreV1Interface
	c *nodeClient
}

func (v nodeCoreV1) Pods(namespace string) typedcorev1.PodInterface {
	return nodePods{PodInterface: v.CoreV1Interface.Pods(namespace), c: v.c, namespace: namespace}
}

type nodePods struct {
	typedcorev1.PodInterface
	c         *nodeClient
	namespace string
}

func (p nodePods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	pod, err := p.PodInterface.Get(ctx, name, opts)
	if !apierrors.IsForbidden(err) {
		return pod, err
	}
	list, lerr := p.PodInterface.List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("spec.nodeName", p.c.nodeName),
		fields.OneTermEqualSelector("metadata.name", name),
	).String()})
	if lerr != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

type nodePolicyV1 struct {
	typedpolicyv1.PolicyV1Interface
	c *nodeClient
}

func (v nodePolicyV1) Evictions(namespace string) typedpolicyv1.EvictionInterface {
	return nodeEvictions{EvictionInterface: v.PolicyV1Interface.Evictions(namespace), c: v.c}
}

type nodeEvictions struct {
	typedpolicyv1.EvictionInterface
	c *nodeClient
}

func (e nodeEvictions) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	err := e.EvictionInterface.Evict(ctx, ev)
	switch {
	case err == nil:
		klog.FromContext(ctx).Info("Eviction accepted", "pod", klog.KRef(ev.Namespace, ev.Name))
	case !apierrors.IsNotFound(err):
		e.c.refused(ev.Namespace, ev.Name, err)
	}
	return err
}
