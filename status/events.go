package status

import (
	"context"
	"crypto/sha256"
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
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/nodeapi"
)

// The reasons of the Events an EventReporter records. They are CamelCase
// words, as Kubernetes event reasons are, so `kubectl get events
// --field-selector reason=ConfigRolledBack` finds them.
const (
	// EventReasonConfigChanged: a new config was checkpointed and made
	// current; the component restarts (or reloads) onto it. Type Normal.
	EventReasonConfigChanged = "ConfigChanged"
	// EventReasonConfigRolledBack: the current config was found bad and the
	// component runs its last-known-good config. Type Warning.
	EventReasonConfigRolledBack = "ConfigRolledBack"
	// EventReasonConfigDeadEnd: the rollback target crash-loops too; the
	// node needs a repair. Type Warning.
	EventReasonConfigDeadEnd = "ConfigDeadEnd"
	// EventReasonStateFileQuarantined: a corrupt or foreign file in the
	// state dir was moved to its quarantine. Type Warning.
	EventReasonStateFileQuarantined = "StateFileQuarantined"
	// EventReasonLastKnownGoodUnusable: the rollback target, checked while
	// another config runs, could not be used if a rollback needed it; the
	// node would fall back to its local config. Type Warning.
	EventReasonLastKnownGoodUnusable = "LastKnownGoodUnusable"
	// EventReasonConfigOverridden: fields the assigned config sets are set
	// again by a node file the component merges after it (a kubelet
	// drop-in that sorts after dynconfig's), so the node's values run, not
	// the assigned ones. Type Warning.
	EventReasonConfigOverridden = "ConfigOverridden"
	// EventReasonConfigNotApplied: the assigned config could not be applied
	// on this node (the stock kubelet's Node could not be drained for it in
	// time) and the component stays on the config it ran; nothing is
	// marked bad. Type Warning.
	EventReasonConfigNotApplied = "ConfigNotApplied"
	// EventReasonStateNewerFormat: a state file was written by a newer
	// dynconfig in a format this version does not read (a downgrade): not
	// damage, nothing is quarantined; this version runs its assignment or
	// its local config instead of what the file says.
	EventReasonStateNewerFormat = "StateNewerFormat"
)

// DefaultEventComponent is the event source component when
// EventReporterOptions.Component is empty.
const DefaultEventComponent = "dynconfig"

// EventReporterOptions configures an EventReporter.
type EventReporterOptions struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName is the Node the Events are about. Required.
	NodeName string
	// Component is the reporting component (source.component and
	// reportingController), e.g. "kubelet". A qualified name. Default:
	// DefaultEventComponent.
	Component string
	// Clock stamps the Events. Default: the real clock.
	Clock clock.PassiveClock
}

// EventReporter records config lifecycle Events on a Node. Like the
// kubelet, it refers to the Node by name and uses the name as the UID too,
// which `kubectl describe node` also searches for, so no GET of the Node is
// needed. The Events are core/v1 Events in the "default" namespace (the
// namespace Kubernetes uses for Events about cluster-scoped objects).
//
// Events are best effort: each Record call makes one Create (a repeated
// warning, two Patches) and returns its error; nothing is retried or rate
// limited, so callers should record only on transitions, as the Controller
// does. Safe for concurrent use.
//
// Warnings (RecordWarning: a dead end, a quarantined file, an unusable
// last-known-good) are deduplicated across restarts, as the kubelet's event
// recorder deduplicates within one process: the same reason and message
// about the same node is one Event, named after a hash of them, whose count
// and lastTimestamp are patched on each repeat. A component that
// crash-loops in a dead end so makes one Event, not one per start. Only the
// create and patch verbs are needed (no get).
type EventReporter struct {
	client    kubernetes.Interface
	node      string
	component string
	clock     clock.PassiveClock

	mu       sync.Mutex
	lastName int64 // the time part of the last Event name, kept increasing
}

// NewEventReporter validates opts and returns an EventReporter. Errors name
// the offending option.
func NewEventReporter(opts EventReporterOptions) (*EventReporter, error) {
	if opts.Client == nil {
		return nil, errors.New("status: EventReporterOptions.Client is required")
	}
	if err := validateNodeName(opts.NodeName); err != nil {
		return nil, fmt.Errorf("status: EventReporterOptions.NodeName: %w", err)
	}
	if opts.Component == "" {
		opts.Component = DefaultEventComponent
	}
	if msgs := validation.IsQualifiedName(opts.Component); len(msgs) > 0 {
		return nil, fmt.Errorf("status: EventReporterOptions.Component: %q: %s", opts.Component, strings.Join(msgs, "; "))
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &EventReporter{client: opts.Client, node: opts.NodeName, component: opts.Component, clock: opts.Clock}, nil
}

// RecordConfigChanged records a Normal ConfigChanged Event with message,
// before the component restarts onto a new config (see
// ConfigChangedMessage).
func (e *EventReporter) RecordConfigChanged(ctx context.Context, message string) error {
	return e.record(ctx, corev1.EventTypeNormal, EventReasonConfigChanged, message)
}

// RecordRolledBack records a Warning ConfigRolledBack Event with message,
// normally the reason of the ConfigOK condition that says why current was
// abandoned.
func (e *EventReporter) RecordRolledBack(ctx context.Context, message string) error {
	return e.record(ctx, corev1.EventTypeWarning, EventReasonConfigRolledBack, message)
}

// RecordWarning records a Warning Event with reason (one of the
// EventReason constants, such as EventReasonConfigDeadEnd) and message; a
// repeat of the same reason and message updates the one Event (count,
// lastTimestamp) instead of making another.
func (e *EventReporter) RecordWarning(ctx context.Context, reason, message string) error {
	now := e.clock.Now()
	sum := sha256.Sum256([]byte(e.component + "\x00" + reason + "\x00" + message))
	name := fmt.Sprintf("%s.%x", e.node, sum[:8])
	err := e.create(ctx, e.event(name, now, corev1.EventTypeWarning, reason, message))
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	for range 3 { // a concurrent repeat changed the count: read it again
		if err = e.bump(ctx, name, now); err == nil || !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("status: recording %s event for node %q: updating its count: %w", reason, e.node, err)
	}
	return nil
}

// bump moves lastTimestamp of the Event name to now, which returns its
// count, then adds one to the count if nobody else did meanwhile (a JSON
// patch whose test fails otherwise).
func (e *EventReporter) bump(ctx context.Context, name string, now time.Time) error {
	events := e.client.CoreV1().Events(metav1.NamespaceDefault)
	ts, err := json.Marshal(map[string]any{"lastTimestamp": metav1.NewTime(now)})
	if err != nil {
		return err
	}
	ev, err := events.Patch(ctx, name, types.MergePatchType, ts, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	count, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/count", "value": ev.Count},
		{"op": "replace", "path": "/count", "value": ev.Count + 1},
	})
	if err != nil {
		return err
	}
	_, err = events.Patch(ctx, name, types.JSONPatchType, count, metav1.PatchOptions{})
	return err
}

func (e *EventReporter) record(ctx context.Context, eventType, reason, message string) error {
	now := e.clock.Now()
	return e.create(ctx, e.event(fmt.Sprintf("%s.%x", e.node, e.nameTime(now.UnixNano())), now, eventType, reason, message))
}

func (e *EventReporter) create(ctx context.Context, ev *corev1.Event) error {
	if _, err := e.client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return err
		}
		return fmt.Errorf("status: recording %s event for node %q: %w", ev.Reason, e.node, err)
	}
	return nil
}

func (e *EventReporter) event(name string, now time.Time, eventType, reason, message string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1",
			Kind:       "Node",
			Name:       e.node,
			UID:        types.UID(e.node),
		},
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: e.component, Host: e.node},
		FirstTimestamp:      metav1.NewTime(now),
		LastTimestamp:       metav1.NewTime(now),
		Count:               1,
		ReportingController: e.component,
		ReportingInstance:   e.node,
	}
}

// nameTime returns t, or one more than the last value it returned when the
// clock has not moved, so two Events from one reporter never share a name
// (Event names are made of the node name and this time, as client-go's
// recorder makes them).
func (e *EventReporter) nameTime(t int64) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t <= e.lastName {
		t = e.lastName + 1
	}
	e.lastName = t
	return t
}

// ConfigChangedMessage is the ConfigChanged message for a restart onto src:
// "config changed to <nodeapi.DescribeSource(src)>, restarting".
func ConfigChangedMessage(src *corev1.NodeConfigSource) string {
	return fmt.Sprintf("config changed to %s, restarting", nodeapi.DescribeSource(src))
}

// ConfigReloadMessage is the ConfigChanged event message of a component that
// applies a new config in process: "config changed to <source>, reloading".
func ConfigReloadMessage(src *corev1.NodeConfigSource) string {
	return fmt.Sprintf("config changed to %s, reloading", nodeapi.DescribeSource(src))
}
