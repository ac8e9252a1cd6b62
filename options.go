package dynconfig

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

// Profile tells the Controller how to handle a component's config type T.
// components/kubelet.Profile and components/kubeproxy.Profile are the
// built-in ones; a third-party component writes its own.
type Profile[T any] interface {
	// GroupVersionKind is the apiVersion and kind every document carries.
	GroupVersionKind() schema.GroupVersionKind
	// PayloadKey is the ConfigMap data key that holds the config.
	PayloadKey() string
	// Default fills unset fields of obj in place.
	Default(obj *T)
	// Validate returns every problem of obj, with field paths.
	Validate(obj *T) field.ErrorList
}

// Document is one named config document: a file, or a ConfigMap's payload.
type Document = merge.Document

// Layers builds the config the component runs from its layers: built-in
// defaults < the base document < drop-ins < instance config < flags. See
// NewLayers for the implementation over package merge.
type Layers[T any] interface {
	// Build merges, defaults and validates the layers over base. A nil base
	// means the local init file (or defaults alone when there is none); a
	// remote config's payload replaces the init file. Errors say which
	// document and field. Return a *lkg.ConfigError with StageDecode for a
	// document that cannot be decoded; any other error counts as a
	// validation failure.
	Build(base *Document) (*T, error)
	// HasInitConfig reports whether a local init file is configured: the
	// local config is then reported as "init", else as "default".
	HasInitConfig() bool
}

// Reporter publishes the ConfigOK condition. status.NodeReporter patches it
// onto the Node; a Reporter is called from one goroutine at a time.
type Reporter interface {
	ReportConfigOK(ctx context.Context, report status.Report) error
}

// EventRecorder records the Node events of config changes;
// status.EventReporter implements it.
type EventRecorder interface {
	// RecordConfigChanged is called before a restart for a new config.
	RecordConfigChanged(ctx context.Context, message string) error
	// RecordRolledBack is called when a config is found bad and the
	// component rolls back.
	RecordRolledBack(ctx context.Context, message string) error
	// RecordWarning records other Warning events: reason is
	// status.EventReasonConfigDeadEnd when the node enters a dead end, and
	// status.EventReasonStateFileQuarantined when a corrupt state file was
	// moved to the quarantine (the message says where).
	RecordWarning(ctx context.Context, reason, message string) error
}

// Cluster ties a component to its Node on the API server. With
// Options.Cluster set, the Controller builds the parts of the wiring the
// caller left nil: the Remote, the Reporter and the EventRecorder, each for
// Options.Component and with the Profile's payload key.
type Cluster struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName is the Node the component runs on. Required.
	NodeName string
	// ConfigMap, when set, is the one ConfigMap every node of this
	// component runs (source.NewFixed), instead of the Node's assignment
	// annotation (source.NewNode with nodeapi.AssignmentAnnotationFor(Component)).
	ConfigMap *types.NamespacedName
}

// Options configures a Controller. The zero value of each optional field
// is its documented default.
type Options[T any] struct {
	// Component names the component, a DNS label of at most 49
	// characters. Its assignment annotation (nodeapi.AssignmentAnnotationFor), its
	// condition type (nodeapi.ConditionTypeFor), its ConfigStatus annotation
	// (nodeapi.StatusAnnotationFor), its Events' source and its
	// metrics' component label are its own, so that several components on
	// one Node never read or overwrite each other's. Default: "kubelet",
	// which keeps the proposal's names (ConfigOK, dynconfig.io/config-source).
	Component string

	// Profile describes the config type. Required; the one place the
	// payload key comes from.
	Profile Profile[T]
	// Layers builds the config from the local files, flags and a remote
	// payload. Default: NewLayers over a merge pipeline of Profile (with
	// Merge) and Local.
	Layers Layers[T]
	// Local names the local files and flags of the default Layers; ignored
	// when Layers is set.
	Local LocalConfig
	// Merge configures the merge pipeline of the default Layers (lenient
	// decoding, platform policy, logger); ignored when Layers is set.
	Merge merge.Options
	// StateDir holds checkpoints, pointers and tracking files (the
	// --dynamic-config-dir). Required; one process per dir.
	StateDir string
	// ComponentVersion names the tracking dir, so a new version of the
	// component does not trust the bad marks and startups of an old one.
	// Required.
	ComponentVersion string

	// Cluster, when set, builds the Remote, Reporter and Events left nil
	// for this component's Node.
	Cluster *Cluster

	// Remote is where the node's assignment comes from. Nil (and no
	// Cluster) disables remote config: the component runs its local config.
	Remote source.Remote
	// DisableRemoteConfig ignores Remote (the proposal's opt-out flag) and
	// resets current and last-known-good to local.
	DisableRemoteConfig bool

	// Reporter publishes the ConfigOK condition and the ConfigStatus.
	// Default: with Cluster, a status.NodeReporter for Component; else the
	// condition is only logged. With both, both are called (Reporter
	// first).
	Reporter Reporter

	// Events records ConfigChanged and ConfigRolledBack events. Default:
	// with Cluster, a status.EventReporter for Component; else none.
	Events EventRecorder
	// Metrics exports the assigned, active and last-known-good configs,
	// errors and rollbacks (status.NewMetrics on a caller's Registerer).
	// Default: built on Registerer when that is set; else none.
	Metrics *status.Metrics
	// Registerer, when set and Metrics is nil, receives the Controller's
	// metrics with the constant label component=<Component>, so that
	// several components can share one registry.
	Registerer prometheus.Registerer

	// Restart is called when the component must run another config than
	// the one it runs (and cannot reload), so the process manager restarts
	// it on that config. It is never called when the config to run is the
	// one running. Default: os.Exit(0) (systemd with Restart=always
	// restarts it). If Restart returns, Run returns nil: the process is
	// expected to exit and start again with a new Controller. With Reload
	// set, it is called only when reloading the rollback target failed.
	Restart func()
	// Reload, when set, applies a config in process instead of a restart:
	// on a change the Controller decides again and calls Reload with the
	// config to run, when it is not the one running. An error means the
	// component did not apply it: current is marked bad (reason "failed to
	// apply current (UID: <uid>)"), ConfigOK turns False and Reload is
	// called again with the rollback target; if that fails too, Restart is
	// called.
	Reload func(ctx context.Context, cfg *T) error

	// RequireHealthy delays promotion to last-known-good until the
	// component called MarkHealthy, in addition to the trial period.
	RequireHealthy bool
	// ConfirmWithin, when positive, is the confirmation deadline of every
	// remote config (confirm or revert): a config that is not confirmed
	// healthy (MarkHealthy) within this time after it first ran is marked
	// bad (ConfigOK False, "failed to confirm current (UID: ...) healthy")
	// and rolled back by the node itself, with or without the API server.
	// The deadline is durable: it counts from the recorded first run, so
	// time down, crash restarts and reboots count and never start it
	// again, and a recorded confirmation survives them too (a confirmed
	// config is never reverted by the deadline, even when a later process
	// has not confirmed it yet). A clock stepped back never postpones the
	// deadline indefinitely nor fires it at once (see lkg.ConfirmDeadline).
	// It implies RequireHealthy: nothing unconfirmed becomes
	// last-known-good. A last-known-good config has no deadline.
	//
	// Turned on while a config is on trial, the deadline counts from that
	// config's first run: when that was longer ago than ConfirmWithin, the
	// next decision (a start, a new assignment, or Run's next wake)
	// reverts it unless a confirmation of it is already recorded.
	// Default: 0, no deadline.
	ConfirmWithin time.Duration
	// DefaultTrial is the trial used when a ConfigMap has no trial
	// annotations (components.TrialFromAnnotations reads them), and for
	// the startups file of the local config. Default:
	// components.DefaultTrial() (10m, threshold 3).
	DefaultTrial components.Trial
	// StartupSyncTimeout bounds everything Bootstrap asks of the cluster
	// (the assignment, its ConfigMap, the condition report, Events), from
	// the moment the state dir is locked: when the assignment cannot be
	// read in time the desired config is unclear (phase SyncFailed) and the
	// last-known-good config runs; what could not be reported is reported
	// by Run. Default: 10s.
	StartupSyncTimeout time.Duration
	// ResyncPeriod is how often Run re-reads the assignment even without a
	// change notification; each wait is jittered up to +10%. Default: 1m.
	ResyncPeriod time.Duration
	// Clock is the time source. Default: the real clock.
	Clock clock.WithTicker

	// External, when set, makes this Controller one of the two roles
	// that manage a component running in another process (the stock
	// kubelet): see External and RunExternal.
	External *External
}

// isNil reports whether v holds a nil pointer, map, slice, func, channel or
// interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

func (o *Options[T]) complete() error {
	var errs []error
	if o.Component == "" {
		o.Component = nodeapi.DefaultComponent
	} else if err := nodeapi.ValidateComponentName(o.Component); err != nil {
		errs = append(errs, fmt.Errorf("Options.Component: %w", err))
	}
	if o.Profile == nil {
		errs = append(errs, errors.New("Options.Profile is required"))
	}
	if isNil(o.Profile) && o.Profile != nil {
		errs = append(errs, errors.New("Options.Profile is a typed nil"))
	}
	if o.Layers != nil && isNil(o.Layers) {
		errs = append(errs, errors.New("Options.Layers is a typed nil"))
	}
	// A nil pointer in an interface is not a nil interface: it would be
	// called, and panic, in Bootstrap. The usual cause is a constructor
	// error that was dropped.
	if o.Remote != nil && isNil(o.Remote) {
		errs = append(errs, errors.New("Options.Remote is a typed nil (was an error of its constructor dropped?); leave it nil to disable remote config"))
	}
	if o.Reporter != nil && isNil(o.Reporter) {
		errs = append(errs, errors.New("Options.Reporter is a typed nil (was an error of its constructor dropped?); leave it nil to only log the condition"))
	}
	if o.Events != nil && isNil(o.Events) {
		errs = append(errs, errors.New("Options.Events is a typed nil (was an error of its constructor dropped?); leave it nil for no events"))
	}
	// A field that the option set would silently ignore is a mistake of
	// the caller: refuse it, naming both fields (client-go's leader
	// election refuses inconsistent timings the same way).
	if o.Layers != nil && !localIsZero(o.Local) {
		errs = append(errs, errors.New("Options.Local is set together with Options.Layers, which ignores it: give the local files to the Layers, or leave Layers nil"))
	}
	if o.Layers != nil && !reflect.ValueOf(o.Merge).IsZero() {
		errs = append(errs, errors.New("Options.Merge is set together with Options.Layers, which ignores it: configure the Layers' pipeline, or leave Layers nil"))
	}
	if o.Remote != nil && o.Cluster != nil {
		errs = append(errs, errors.New("Options.Remote is set together with Options.Cluster, which builds the Remote: set one of them"))
	}
	if o.StateDir == "" {
		errs = append(errs, errors.New("Options.StateDir is required"))
	}
	if o.ComponentVersion == "" {
		errs = append(errs, errors.New("Options.ComponentVersion is required"))
	}
	if o.DefaultTrial == (components.Trial{}) {
		o.DefaultTrial = components.DefaultTrial()
	} else if err := o.DefaultTrial.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Options.DefaultTrial: %w", err))
	}
	if o.ConfirmWithin < 0 {
		errs = append(errs, fmt.Errorf("Options.ConfirmWithin must not be negative, got %v", o.ConfirmWithin))
	} else if o.ConfirmWithin > 0 {
		o.RequireHealthy = true
	}
	if o.StartupSyncTimeout < 0 {
		errs = append(errs, fmt.Errorf("Options.StartupSyncTimeout must not be negative, got %v", o.StartupSyncTimeout))
	} else if o.StartupSyncTimeout == 0 {
		o.StartupSyncTimeout = 10 * time.Second
	}
	if o.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("Options.ResyncPeriod must not be negative, got %v", o.ResyncPeriod))
	} else if o.ResyncPeriod == 0 {
		o.ResyncPeriod = time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	errs = append(errs, o.completeExternal()...)
	if len(errs) == 0 {
		errs = append(errs, o.build()...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("dynconfig: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// build makes the parts left nil that Options can build: the default
// Layers, the Cluster wiring and the metrics. It runs once the fields it
// reads are valid.
func (o *Options[T]) build() []error {
	var errs []error
	if o.Layers == nil {
		p, err := merge.New[T](o.Profile, o.Merge)
		if err != nil {
			errs = append(errs, fmt.Errorf("Options.Profile: building the merge pipeline: %w", err))
		} else if o.Layers, err = NewLayers(p, o.Local); err != nil {
			errs = append(errs, fmt.Errorf("Options.Local: %w", err))
		}
	}
	if c := o.Cluster; c != nil {
		errs = append(errs, o.buildCluster(c)...)
	}
	if o.Metrics == nil && o.Registerer != nil {
		reg := prometheus.WrapRegistererWith(prometheus.Labels{"component": o.Component}, o.Registerer)
		m, err := status.NewMetrics(reg)
		if err != nil {
			errs = append(errs, fmt.Errorf("Options.Registerer: %w", err))
		}
		o.Metrics = m
	}
	return errs
}

func (o *Options[T]) buildCluster(c *Cluster) []error {
	var errs []error
	if c.Client == nil || isNil(c.Client) {
		return []error{errors.New("Options.Cluster.Client is required")}
	}
	if o.Remote == nil {
		var err error
		if c.ConfigMap != nil {
			o.Remote, err = source.NewFixed(source.FixedOptions{
				Client: c.Client, Namespace: c.ConfigMap.Namespace, Name: c.ConfigMap.Name,
				PayloadKey: o.Profile.PayloadKey(), Clock: o.Clock,
			})
		} else {
			o.Remote, err = source.NewNode(source.NodeOptions{
				Client: c.Client, NodeName: c.NodeName, PayloadKey: o.Profile.PayloadKey(),
				Annotation: nodeapi.AssignmentAnnotationFor(o.Component), Clock: o.Clock,
				PreflightAnnotation: nodeapi.PreflightAnnotationFor(o.Component),
			})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("Options.Cluster: %w", err))
			o.Remote = nil
		}
	}
	rep, err := status.NewNodeReporter(status.NodeReporterOptions{
		Client: c.Client, NodeName: c.NodeName, Component: o.Component, Clock: o.Clock,
	})
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("Options.Cluster: %w", err))
	case o.Reporter == nil:
		o.Reporter = rep
	default:
		o.Reporter = reporters{o.Reporter, rep}
	}
	if o.Events == nil {
		ev, err := status.NewEventReporter(status.EventReporterOptions{
			Client: c.Client, NodeName: c.NodeName, Component: o.Component, Clock: o.Clock,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("Options.Cluster: %w", err))
		} else {
			o.Events = ev
		}
	}
	return errs
}

// reporters calls each Reporter in turn; the first error is returned after
// all were called.
type reporters []Reporter

func (rs reporters) ReportConfigOK(ctx context.Context, r status.Report) error {
	var errs []error
	for _, x := range rs {
		if err := x.ReportConfigOK(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// localIsZero reports whether no field of l is set.
func localIsZero(l LocalConfig) bool {
	return l.InitFile == "" && l.DropInDir == "" && l.InstanceFile == "" && len(l.Flags) == 0
}
