package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// DefaultReportBackoff is the retry schedule of NodeReporter when
// NodeReporterOptions.Backoff is left zero: five attempts, waiting about
// 0.2s, 0.4s, 0.8s and 1.6s in between.
func DefaultReportBackoff() wait.Backoff {
	return wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1}
}

// NodeReporterOptions configures a NodeReporter.
type NodeReporterOptions struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName is the Node whose status carries the condition. Required; a
	// DNS subdomain, like every Node name.
	NodeName string
	// Clock stamps lastHeartbeatTime and lastTransitionTime. Default: the
	// real clock.
	Clock clock.PassiveClock
	// Backoff bounds the attempts of one report (conflicts and transient
	// API errors are retried). Default (Steps == 0): DefaultReportBackoff.
	Backoff wait.Backoff
	// Component names the reporting component; it chooses the default
	// condition type (nodeapi.ConditionTypeFor) and the annotation of the
	// nodeapi.ConfigStatus (nodeapi.StatusAnnotationFor). Default: the kubelet. It
	// must be a DNS label (nodeapi.ValidateComponentName).
	Component string
	// nodeapi.ConditionType is the type of the condition to patch: the component's
	// own, so that several components on one Node keep their conditions
	// apart. Default: nodeapi.ConditionTypeFor(Component) (ConfigOK for the
	// kubelet).
	ConditionType corev1.NodeConditionType
}

// NodeReporter patches the ConfigOK condition onto a Node's status. It
// satisfies the Controller's Reporter interface. Its methods may be called
// from several goroutines, but reports racing each other may land in any
// order.
type NodeReporter struct {
	client  kubernetes.Interface
	node    string
	typ     corev1.NodeConditionType
	annot   string // the nodeapi.ConfigStatus annotation
	clock   clock.PassiveClock
	backoff wait.Backoff

	mu sync.Mutex
	// last is the ConfigOK condition the API server returned for the last
	// successful patch: the previous condition of the next report, so a
	// report costs one PATCH instead of a GET and a PATCH. It is dropped
	// on any failure, and the next attempt reads the Node again.
	last *corev1.NodeCondition
}

// NewNodeReporter validates opts and returns a NodeReporter. Errors name the
// offending option.
func NewNodeReporter(opts NodeReporterOptions) (*NodeReporter, error) {
	if opts.Client == nil {
		return nil, errors.New("status: NodeReporterOptions.Client is required")
	}
	if err := validateNodeName(opts.NodeName); err != nil {
		return nil, fmt.Errorf("status: NodeReporterOptions.NodeName: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff = DefaultReportBackoff()
	}
	if opts.Backoff.Steps < 0 || opts.Backoff.Duration < 0 {
		return nil, fmt.Errorf("status: NodeReporterOptions.Backoff: steps (%d) and duration (%v) must not be negative",
			opts.Backoff.Steps, opts.Backoff.Duration)
	}
	if opts.Component != "" {
		if err := nodeapi.ValidateComponentName(opts.Component); err != nil {
			return nil, fmt.Errorf("status: NodeReporterOptions.Component: %w", err)
		}
	}
	if opts.ConditionType == "" {
		opts.ConditionType = nodeapi.ConditionTypeFor(opts.Component)
	}
	if msgs := validation.IsQualifiedName(string(opts.ConditionType)); len(msgs) > 0 {
		return nil, fmt.Errorf("status: NodeReporterOptions.ConditionType %q: %s", opts.ConditionType, strings.Join(msgs, "; "))
	}
	return &NodeReporter{client: opts.Client, node: opts.NodeName, typ: opts.ConditionType,
		annot: nodeapi.StatusAnnotationFor(opts.Component), clock: opts.Clock, backoff: opts.Backoff}, nil
}

func validateNodeName(name string) error {
	if name == "" {
		return errors.New("required")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("%q is not a valid node name: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// ReportConfigOK builds the ConfigOK condition for r with ConfigOK from the
// condition on the Node (so lastTransitionTime survives an unchanged report,
// even across restarts) and sends a strategic merge patch of the status
// subresource holding only that condition: the Node's other conditions are
// untouched because conditions merge by type. The condition on the Node is
// the one the last successful PATCH returned; only the first report, and
// every attempt after a failed one, GETs the Node for it, so a report is
// usually one request. Conflicts and transient errors (server timeouts,
// throttling, unavailable, internal errors, broken connections) are retried
// with the configured backoff, each retry re-reading the Node; other errors,
// such as a Node that does not exist yet, end the report at once. The error
// names the node and wraps the last API error, so apierrors.IsNotFound and
// friends work on it.
func (n *NodeReporter) ReportConfigOK(ctx context.Context, r Report) error {
	switch r.Status {
	case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
	default:
		return fmt.Errorf("status: reporting %s on node %q: invalid status %q (want True, False or Unknown)",
			n.typ, n.node, r.Status)
	}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, n.backoff, func(ctx context.Context) (bool, error) {
		last = n.patch(ctx, r)
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			return false, nil
		}
		return false, last
	})
	where := fmt.Sprintf("status: reporting %s on node %q", n.typ, n.node)
	switch {
	case err == nil:
		return nil
	case last == nil: // ctx ended before the first attempt
		return fmt.Errorf("%s: %w", where, err)
	case errors.Is(err, last): // not retriable
		return fmt.Errorf("%s: %w", where, last)
	case ctx.Err() != nil: // ctx ended between attempts
		return fmt.Errorf("%s: %w (last attempt: %w)", where, err, last)
	}
	return fmt.Errorf("%s: giving up after %d attempts: %w", where, n.backoff.Steps, last)
}

// patch makes one attempt: PATCH the Node's status, after a GET of the
// Node when the previous condition is not known from an earlier patch.
func (n *NodeReporter) patch(ctx context.Context, r Report) error {
	n.mu.Lock()
	prev := n.last
	n.last = nil
	n.mu.Unlock()
	if prev == nil {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		prev = FindType(node.Status.Conditions, n.typ)
	}
	cond := Condition(n.typ, prev, r, metav1.NewTime(n.clock.Now()))
	body, err := StatusPatch(cond, n.annot, r.Config)
	if err != nil {
		return err
	}
	node, err := n.client.CoreV1().Nodes().Patch(ctx, n.node, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return err
	}
	if got := FindType(node.Status.Conditions, n.typ); got != nil {
		c := *got
		n.mu.Lock()
		n.last = &c
		n.mu.Unlock()
	}
	return nil
}

// ConditionPatch returns the strategic merge patch that sets cond on a
// Node's status: {"status":{"conditions":[cond]}}. Applied to the status
// subresource it replaces the condition of the same type and leaves the
// others alone.
func ConditionPatch(cond corev1.NodeCondition) ([]byte, error) {
	type status struct {
		Conditions []corev1.NodeCondition `json:"conditions"`
	}
	body, err := json.Marshal(struct {
		Status status `json:"status"`
	}{status{Conditions: []corev1.NodeCondition{cond}}})
	if err != nil {
		return nil, fmt.Errorf("encoding the %s condition patch: %w", cond.Type, err)
	}
	return body, nil
}

// StatusPatch returns the strategic merge patch of a Node's status
// subresource that sets cond and, when cfg is not nil, the annotation
// annotation to cfg's JSON: one request for both, so the condition and the
// nodeapi.ConfigStatus never disagree. (The status subresource keeps changes to
// metadata annotations; it resets only the spec.)
func StatusPatch(cond corev1.NodeCondition, annotation string, cfg *nodeapi.ConfigStatus) ([]byte, error) {
	if cfg == nil {
		return ConditionPatch(cond)
	}
	value, err := cfg.MarshalAnnotation()
	if err != nil {
		return nil, err
	}
	type meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	type status struct {
		Conditions []corev1.NodeCondition `json:"conditions"`
	}
	body, err := json.Marshal(struct {
		Metadata meta   `json:"metadata"`
		Status   status `json:"status"`
	}{meta{map[string]string{annotation: value}}, status{Conditions: []corev1.NodeCondition{cond}}})
	if err != nil {
		return nil, fmt.Errorf("encoding the %s status patch: %w", cond.Type, err)
	}
	return body, nil
}

// retriable reports whether a failed attempt may succeed if repeated.
func retriable(err error) bool {
	return apierrors.IsConflict(err) ||
		apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) ||
		utilnet.IsConnectionRefused(err) ||
		utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err)
}
