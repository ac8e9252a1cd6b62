package kubeletdropin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// Common names the state both roles share; they must agree on every field.
type Common struct {
	// Files are the kubelet's config files.
	Files Files
	// StateDir is dynconfig's state dir for the kubelet. Required.
	StateDir string
	// KubeletVersion names the tracking dir (bad marks, startups), so a new
	// kubelet version does not inherit the verdicts of an old one.
	// Required.
	KubeletVersion string
	// DefaultTrial applies to a ConfigMap without trial annotations.
	// Default: components.DefaultTrial().
	DefaultTrial components.Trial
	// DisableRemoteConfig resets current and last-known-good to the local
	// config: the node runs its own files only.
	DisableRemoteConfig bool
	// ConfirmWithin: see dynconfig.Options.ConfirmWithin. Both roles must
	// be given the same value: the pre-start role applies the deadline to
	// the kubelet's next start, the run role while the kubelet runs (its
	// healthz answering is the confirmation).
	ConfirmWithin time.Duration
	// KubeletRootDir is the kubelet's --root-dir, where it keeps the state
	// files a drain-class change resets (statefiles.go). Default:
	// DefaultKubeletRootDir.
	KubeletRootDir string
	// Component is the name the roles follow and report under (the Node's
	// assignment, status and claim annotations, the ConfigOK condition
	// type: package nodeapi). Default: nodeapi.DefaultComponent
	// ("kubelet"). Another name lets these roles share a Node with another
	// agent that reports as "kubelet" (the integration tests run them
	// beside a hollow kubelet).
	Component string
}

func (c Common) options(ctx context.Context) (dynconfig.Options[Config], error) {
	l, err := NewLayers(c.Files, klog.FromContext(ctx))
	if err != nil {
		return dynconfig.Options[Config]{}, err
	}
	return dynconfig.Options[Config]{
		Component:           nodeapi.ComponentOrDefault(c.Component),
		Profile:             kubelet.Profile{},
		Layers:              l,
		StateDir:            c.StateDir,
		ComponentVersion:    c.KubeletVersion,
		DefaultTrial:        c.DefaultTrial,
		DisableRemoteConfig: c.DisableRemoteConfig,
		ConfirmWithin:       c.ConfirmWithin,
	}, nil
}

// DefaultPreStartTimeout bounds the pre-start role: well inside systemd's
// default TimeoutStartSec (90s).
const DefaultPreStartTimeout = 30 * time.Second

// PreStartResult says what the pre-start role did.
type PreStartResult struct {
	// Chosen is the config handed to the kubelet; nil when the role gave
	// up and left the drop-in as it was.
	Chosen *dynconfig.Chosen
	// Fallback, when not empty, says why the role gave up, and what it did
	// instead.
	Fallback string
	// RemovedStateFiles are the kubelet's state files removed for a
	// drain-class change (paths), before the drop-in was written.
	RemovedStateFiles []string
}

// PreStart is the pre-start role: it records this start of the kubelet,
// decides, and writes or removes dynconfig's drop-in. It needs nothing from
// the cluster, and returns within timeout (DefaultPreStartTimeout if 0).
// Its error is only for the log: a caller must let the kubelet start
// whatever it returns. On a failure it leaves the drop-in as it was (the
// config the kubelet ran last), except when the node's own files are
// invalid, when it removes it, so that the kubelet starts on the node's own
// config as it would without dynconfig. Before it writes the drop-in, it
// removes the kubelet's state files (in Common.KubeletRootDir) that a
// drain-class change names, under the rule of statefiles.go (MarkDrained).
func PreStart(ctx context.Context, c Common, timeout time.Duration) (PreStartResult, error) {
	if timeout <= 0 {
		timeout = DefaultPreStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res PreStartResult
	opts, err := c.options(ctx)
	if err != nil {
		res.Fallback = "invalid options; the drop-in is left as it was"
		return res, err
	}
	if err := os.MkdirAll(c.Files.ConfigDir, 0o755); err != nil {
		res.Fallback = "the config dir cannot be created; nothing written"
		return res, fmt.Errorf("kubeletdropin: %w", err)
	}
	opts.External = &dynconfig.External{
		Role:        dynconfig.PreStart,
		LockTimeout: timeout * 2 / 3,
		Apply: func(ctx context.Context, ch dynconfig.Chosen) error {
			// The state files go first and the record of what they are
			// made for last: a crash in between removes again.
			sf := c.prepareStateFiles(opts.Layers, ch, klog.FromContext(ctx))
			if sf != nil {
				if err := sf.remove(); err != nil {
					return err
				}
				for _, name := range sf.plan.Remove {
					res.RemovedStateFiles = append(res.RemovedStateFiles, filepath.Join(sf.rootDir, name))
				}
			}
			if err := c.Files.Apply(ctx, ch); err != nil {
				return err
			}
			res.Chosen = &ch
			if sf != nil {
				sf.record()
			}
			return nil
		},
	}
	ctrl, err := dynconfig.New(opts)
	if err != nil {
		res.Fallback = "invalid options; the drop-in is left as it was"
		return res, err
	}
	defer ctrl.Close()
	_, err = ctrl.Bootstrap(ctx)
	if err == nil {
		return res, nil
	}
	var ce *lkg.ConfigError
	if res.Chosen == nil && errors.As(err, &ce) {
		res.Fallback = "the node's own kubelet config is invalid; dynconfig's drop-in is removed and the kubelet starts on the node's files"
		if rerr := c.Files.Remove(); rerr != nil {
			res.Fallback = "the node's own kubelet config is invalid, and dynconfig's drop-in could not be removed"
			err = errors.Join(err, rerr)
		}
		return res, err
	}
	if res.Chosen == nil {
		res.Fallback = "nothing decided; dynconfig's drop-in is left as it was"
	}
	return res, err
}

// RunOptions configures the run role.
type RunOptions struct {
	Common
	// Client is the node's client (the kubelet's own credentials serve:
	// the Node authorizer lets them read and patch their Node). Required.
	Client kubernetes.Interface
	// NodeName is the kubelet's Node. Required.
	NodeName string
	// Restarter restarts kubelet.service (SystemdRestarter). Required.
	Restarter dynconfig.Restarter
	// HealthzURL is the kubelet's healthz endpoint. Default:
	// http://127.0.0.1:10248/healthz.
	HealthzURL string
	// PollInterval, StartTimeout: see dynconfig.External.
	PollInterval, StartTimeout time.Duration
	// Registerer receives the metrics, labelled component="kubelet".
	Registerer prometheus.Registerer
	// ResyncPeriod: see dynconfig.Options.
	ResyncPeriod time.Duration
	// Drain says how the Node is drained for a change of class
	// changeclass.Drain (drain.go).
	Drain DrainOptions
}

// overriddenEvents returns the hook that records, as a Warning Event on the
// Node (status.EventReasonConfigOverridden), which fields of the assigned
// config a later node drop-in overrides: once for each new message (Build
// runs again on every sync; a repeat of the last message records nothing,
// and across restarts the reporter counts repeats in one Event).
func overriddenEvents(ctx context.Context, events *status.EventReporter) func(config string, fields []string) {
	var mu sync.Mutex
	last := ""
	return func(config string, fields []string) {
		if len(fields) > 10 {
			fields = append(fields[:10:10], fmt.Sprintf("and %d more", len(fields)-10))
		}
		msg := fmt.Sprintf("%s: fields set again by node drop-ins that sort after dynconfig's file, so the node's values run: %s",
			config, strings.Join(fields, ", "))
		mu.Lock()
		defer mu.Unlock()
		if msg == last {
			return
		}
		last = msg
		if err := events.RecordWarning(ctx, status.EventReasonConfigOverridden, msg); err != nil {
			klog.FromContext(ctx).Error(err, "Recording an event", "reason", status.EventReasonConfigOverridden)
		}
	}
}

// DefaultHealthzURL is the kubelet's default healthz endpoint.
const DefaultHealthzURL = "http://127.0.0.1:10248/healthz"

// Run is the run role: it follows the Node's assignment until ctx ends
// (dynconfig.RunExternal).
func Run(ctx context.Context, o RunOptions) error {
	if o.Client == nil || o.NodeName == "" {
		return errors.New("kubeletdropin: RunOptions.Client and NodeName are required")
	}
	opts, err := o.options(ctx)
	if err != nil {
		return err
	}
	if o.HealthzURL == "" {
		o.HealthzURL = DefaultHealthzURL
	}
	opts.Cluster = &dynconfig.Cluster{Client: o.Client, NodeName: o.NodeName}
	events, err := status.NewEventReporter(status.EventReporterOptions{Client: o.Client, NodeName: o.NodeName, Component: opts.Component})
	if err != nil {
		return fmt.Errorf("kubeletdropin: %w", err)
	}
	opts.Events = events
	if l, ok := opts.Layers.(*layers); ok {
		l.overriddenHook = overriddenEvents(ctx, events)
	}
	opts.Registerer = o.Registerer
	opts.ResyncPeriod = o.ResyncPeriod
	d := newDrainer(o)
	opts.External = &dynconfig.External{
		Role:          dynconfig.Follow,
		Restarter:     o.Restarter,
		Healthy:       Healthy(o.Client, o.NodeName, o.HealthzURL),
		PromotionHeld: promotionHeld(o.Client, o.NodeName, nodeapi.ComponentOrDefault(o.Component), time.Now),
		BeforeRestart: d.BeforeRestart,
		Settled:       d.Settled,
		PollInterval:  o.PollInterval,
		StartTimeout:  o.StartTimeout,
	}
	return dynconfig.RunExternal(ctx, opts)
}

// Healthy returns the kubelet's health check, which confirms a config
// (Common.ConfirmWithin) and lets it be promoted: the node's own evidence,
// its healthz answering 200, decides. The Node's Ready condition is read
// from the API server as an extra, within half of what is left of ctx's
// time: a Ready the kubelet reported False fails the check; an API server
// that does not answer (down, hanging, an error), a Node not registered
// yet, no Ready condition, or Ready Unknown (what the node controller sets
// when it stops hearing from the kubelet, not the kubelet's own word) do
// not: an API server outage must never be why a healthy config is not
// confirmed, reverted and marked bad.
func Healthy(client kubernetes.Interface, nodeName, healthzURL string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthzURL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("kubelet healthz: %w", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kubelet healthz: %s: %s", resp.Status, body)
		}
		return readyVeto(ctx, client, nodeName)
	}
}

// readyVeto returns an error when the API server answers that the Node's
// Ready is False; nil when it is anything else or cannot be read.
func readyVeto(ctx context.Context, client kubernetes.Interface, nodeName string) error {
	rctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	node, err := client.CoreV1().Nodes().Get(rctx, nodeName, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("The Node's Ready cannot be read; the kubelet's healthz alone decides", "node", nodeName, "err", err)
		return nil
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse {
			return fmt.Errorf("node %s: Ready is %s: %s", nodeName, c.Status, c.Message)
		}
	}
	return nil
}

// PromotionHeld returns the run role's promotion hold: it reads the Node's
// claim of the kubelet (nodeapi.ReadClaim) and holds while the claim asks
// (nodeapi.Claim.PromotionHeld: a rollout with health gates has not passed
// the Node yet, and its holdUntil is not reached). When the Node cannot be
// read, the last claim read decides, until its holdUntil: an API server
// outage neither lifts a hold early nor makes one up. A claim that does
// not decode holds nothing.
func PromotionHeld(client kubernetes.Interface, nodeName string, now func() time.Time) func(ctx context.Context) bool {
	return promotionHeld(client, nodeName, nodeapi.DefaultComponent, now)
}

// promotionHeld is PromotionHeld for the claim of component.
func promotionHeld(client kubernetes.Interface, nodeName, component string, now func() time.Time) func(ctx context.Context) bool {
	var mu sync.Mutex
	var last *nodeapi.Claim
	return func(ctx context.Context) bool {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			klog.FromContext(ctx).V(2).Info("The Node cannot be read; the last claim read decides the promotion hold", "node", nodeName, "err", err)
		} else {
			c, err := nodeapi.ReadClaim(node, component)
			if err != nil {
				klog.FromContext(ctx).Error(err, "Reading the rollout claim; no promotion hold")
			}
			last = c
		}
		return last.PromotionHeld(now())
	}
}
