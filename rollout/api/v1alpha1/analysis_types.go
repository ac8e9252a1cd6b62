package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutAnalysis is spec.analysis: health gates that watch each node while
// it is in trial and, once its component reports the config promoted, for
// Soak more. A node that fails a gate counts as failed, with the gate's
// reason, under the usual maxFailures, halt and revert rules; a step is
// done only once its nodes passed their soak.
//
// The built-in node checks (Node) are on whenever spec.analysis is set;
// the pod, component condition, Prometheus and webhook checks only when
// they are set. "New" means not there when the node was assigned: a check
// fails on what the config changed, not on what the node already had.
type RolloutAnalysis struct {
	// Soak is how long a promoted node keeps being checked before it
	// counts as done (and leaves room for the next node). Default 0: the
	// gates watch the trial only, and once more at promotion.
	// +optional
	Soak *metav1.Duration `json:"soak,omitempty"`
	// Node configures the built-in checks of the Node's own conditions.
	// +optional
	Node *NodeAnalysis `json:"node,omitempty"`
	// Pods checks that the pods on the node stay Ready; absent: not
	// checked.
	// +optional
	Pods *PodAnalysis `json:"pods,omitempty"`
	// ComponentConditions are Node condition types, of other components
	// on the node, that must stay True: one that turns anything else after
	// the node was assigned fails it. A condition the Node does not carry
	// is not checked.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:MinLength=1
	ComponentConditions []string `json:"componentConditions,omitempty"`
	// Prometheus are queries whose result must stay within a range.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Prometheus []PrometheusCheck `json:"prometheus,omitempty"`
	// Webhooks are endpoints that answer go or no-go for a node.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Webhooks []WebhookCheck `json:"webhooks,omitempty"`
}

// NodeAnalysis configures the built-in Node checks.
type NodeAnalysis struct {
	// Disabled turns the built-in Node checks off.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Conditions are the Node condition types that must not turn True
	// after the node was assigned. Default: MemoryPressure,
	// DiskPressure, PIDPressure and NetworkUnavailable. Besides them, the
	// Node's Ready condition must not turn anything else than True.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:MinLength=1
	Conditions []string `json:"conditions,omitempty"`
	// GracePeriod is how long Ready (or a component condition) may stay
	// other than True before it fails the node: a component that restarts
	// may take its node out of Ready for a moment. Pressure conditions
	// fail at once. Default 30s.
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// PodAnalysis checks the pods bound to the node. The pods are those that
// were on the node when it was assigned, plus the ones bound since; pods
// that succeeded or are being deleted are left out.
//
// +kubebuilder:validation:XValidation:rule="has(self.maxUnready) || has(self.maxNewFailures)",message="set maxUnready, maxNewFailures or both"
type PodAnalysis struct {
	// Selector picks the pods that count; absent: every pod on the node.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// MaxUnready is how many of the pods that were Ready when the node
	// was assigned may be not Ready (for longer than the grace period, or
	// failed) before the node fails: a number or a percentage of them.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^(100|[1-9]?[0-9])%$`
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 0",message="must not be negative"
	// +optional
	MaxUnready *intstr.IntOrString `json:"maxUnready,omitempty"`
	// MaxNewFailures is how many pods may newly fail (evicted, rejected
	// at admission, or failed otherwise: phase Failed and not failed when
	// the node was assigned) before the node fails.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxNewFailures *int32 `json:"maxNewFailures,omitempty"`
	// GracePeriod is how long a pod may be not Ready before it counts.
	// Default 30s.
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// ExternalCheck is what the Prometheus and webhook checks share.
type ExternalCheck struct {
	// Name names the check in reasons and Events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Interval is how often the check runs for each node it watches.
	// Default 30s.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Timeout bounds one run. Default 10s.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// ConsecutiveErrorLimit is how many runs in a row may end in an error
	// (unreachable, a timeout, an answer that does not decode, a webhook's
	// 5xx) before the node fails: an error is inconclusive, not a failure,
	// and one error more than the limit fails the node, as Argo Rollouts
	// counts them. Default 4.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`
}

// PrometheusCheck is a query to a Prometheus HTTP API (/api/v1/query) whose
// every sample must stay within [Min, Max]. "$node" in the query is
// replaced by the node's name. An empty result is an error (inconclusive).
//
// +kubebuilder:validation:XValidation:rule="has(self.min) || has(self.max)",message="set min, max or both"
type PrometheusCheck struct {
	ExternalCheck `json:",inline"`
	// Address is the Prometheus base URL, e.g. http://prometheus.monitoring:9090.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Address string `json:"address"`
	// Query is the PromQL query; "$node" stands for the node's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
	// Min and Max bound each sample (a decimal number); absent: unbounded.
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	// +optional
	Min *string `json:"min,omitempty"`
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	// +optional
	Max *string `json:"max,omitempty"`
}

// WebhookCheck is an endpoint that answers go or no-go for a node: the
// controller POSTs a WebhookRequest as JSON; a 2xx answer is go, a 4xx
// answer is no-go with the answer's body (its start) as the reason, except
// 408 and 429; those, any other answer (a 5xx) and no answer are errors
// (ConsecutiveErrorLimit).
type WebhookCheck struct {
	ExternalCheck `json:",inline"`
	// URL to POST to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
}

// WebhookRequest is the body a webhook check POSTs.
type WebhookRequest struct {
	// Rollout names the ConfigRollout.
	Rollout WebhookRollout `json:"rollout"`
	// Node is the node's name.
	Node string `json:"node"`
	// Component is the component whose config rolls out.
	Component string `json:"component"`
	// ConfigMap is the config being rolled out.
	ConfigMap WebhookConfigMap `json:"configMap"`
	// Phase is "Trial" while the node's component has not promoted the
	// config, "Soak" after.
	Phase string `json:"phase"`
	// AssignedAt is when the node was assigned the config.
	AssignedAt metav1.Time `json:"assignedAt"`
}

// WebhookRollout names a ConfigRollout in a WebhookRequest.
type WebhookRollout struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// WebhookConfigMap names the rolled-out ConfigMap in a WebhookRequest.
type WebhookConfigMap struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}
