package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/internal/kubeflags"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// Clients is what the commands need from the kubectl client flags.
type Clients struct {
	// Dynamic reads and writes ConfigRollouts.
	Dynamic dynamic.Interface
	// Namespace is the namespace the flags select.
	Namespace string
}

// UsageError is an error of the command line found once a command runs (a
// flag value it checks itself, such as --steps); a caller exits with its
// usage status (2) for it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Options configures NewCommand.
type Options struct {
	// Out receives results, ErrOut nothing yet (errors are returned).
	// Default: os.Stdout and os.Stderr.
	Out, ErrOut io.Writer
	// NewClients builds the clients from the kubectl flags the command
	// adds. Default: from their kubeconfig loading rules.
	NewClients func(*genericclioptions.ConfigFlags) (Clients, error)
	// Clock paces status -w and ages. Default: the real clock.
	Clock clock.Clock
}

// NewCommand returns `rollout` and its subcommands, with the kubectl client
// flags (--kubeconfig, --namespace, ...) on it.
func NewCommand(o Options) *cobra.Command {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.ErrOut == nil {
		o.ErrOut = os.Stderr
	}
	if o.NewClients == nil {
		o.NewClients = clientsFromFlags
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Roll a ConfigMap out to nodes in steps (ConfigRollout), follow and steer it",
		Long: `rollout drives ConfigRollouts (dynconfig.io/v1alpha1), which the rollout
controller (dynconfig-rollout) runs: it assigns the ConfigMap to a few nodes at
a time, waits for each node's component to report it promoted, halts when more
than --max-failures nodes fail and puts the nodes it changed back.`,
		SilenceUsage: true,
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.CacheDir = nil
	flags.AddFlags(cmd.PersistentFlags())
	c := &commands{o: o, flags: flags}
	cmd.AddCommand(c.start(), c.status(), c.history(),
		c.list("list", "List the rollouts of the namespace (-A: of every namespace), as kubectl get does", false),
		c.list("get NAME...", "Show rollouts in a table or as -o json|yaml|wide|name|jsonpath=|custom-columns=", true),
		c.deleteCmd(),
		c.steer("pause", "Stop assigning new nodes (nodes in trial are still followed)", `{"spec":{"paused":true}}`),
		c.resume(),
		c.steer("abort", "Stop the rollout for good; what is done stays", `{"spec":{"abort":true}}`),
		c.steer("undo", "Put every node the rollout changed back on its previous source", `{"spec":{"undo":true}}`))
	return cmd
}

type commands struct {
	o     Options
	flags *genericclioptions.ConfigFlags
}

func clientsFromFlags(f *genericclioptions.ConfigFlags) (Clients, error) {
	cfg, ns, err := kubeflags.RESTConfig(f, "dynconfigctl")
	if err != nil {
		return Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("create API client: %w", err)
	}
	return Clients{Dynamic: dyn, Namespace: ns}, nil
}

func (c *commands) rollouts() (dynamic.ResourceInterface, string, error) {
	cl, err := c.o.NewClients(c.flags)
	if err != nil {
		return nil, "", err
	}
	return cl.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(cl.Namespace), cl.Namespace, nil
}

func get(ctx context.Context, ri dynamic.ResourceInterface, ns, name string) (*v1alpha1.ConfigRollout, error) {
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("ConfigRollout %s/%s not found", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("get ConfigRollout %s/%s: %w", ns, name, err)
	}
	var ro v1alpha1.ConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		return nil, fmt.Errorf("decode ConfigRollout %s/%s: %w", ns, name, err)
	}
	return &ro, nil
}

// startOptions are start's flags.
type startOptions struct {
	configMap, component, key, selector, steps string
	maxUnavailable                             string
	maxFailures                                int32
	deadline                                   time.Duration
	noRevert, paused                           bool
	preflight                                  string
	preflightTimeout                           time.Duration
	fleet                                      fleetOptions
}

func (c *commands) start() *cobra.Command {
	var so startOptions
	cmd := &cobra.Command{
		Use:   "start NAME --configmap CM [--steps 1,10%,pause,50%,100%] [flags]",
		Short: "Create a ConfigRollout of a ConfigMap in the namespace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ro, err := so.rollout(args[0])
			if err != nil {
				return &UsageError{Err: err}
			}
			ri, ns, err := c.rollouts()
			if err != nil {
				return err
			}
			ro.Namespace = ns
			if err := c.startChecks(cmd.Context(), ns, ro.Spec.ConfigMapName, &so.fleet); err != nil {
				return err
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
			if err != nil {
				return err
			}
			if _, err := ri.Create(cmd.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create ConfigRollout %s/%s: %w", ns, ro.Name, err)
			}
			_, err = fmt.Fprintf(c.o.Out, "configrollout %s/%s created: %s to %s on %s in steps %s\n",
				ns, ro.Name, ro.Spec.ConfigMapName, nodeapi.ComponentOrDefault(ro.Spec.Component), orAll(so.selector, "every node"), so.steps)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&so.configMap, "configmap", "", "the ConfigMap (in the namespace) to roll out (required)")
	f.StringVar(&so.component, "component", nodeapi.DefaultComponent, "the component whose config it is")
	f.StringVar(&so.key, "key", "", "the ConfigMap data key (default: the component's; required for a component other than "+nodeapi.KnownComponents()+")")
	f.StringVarP(&so.selector, "selector", "l", "", "the nodes, as a label selector (default: every node)")
	f.StringVar(&so.steps, "steps", "1,10%,50%,100%", "comma-separated steps: a node count, a percentage, pause (until resumed) or pause=DURATION")
	f.StringVar(&so.maxUnavailable, "max-unavailable", "1", "nodes in trial at once: a count or a percentage")
	f.Int32Var(&so.maxFailures, "max-failures", 0, "nodes that may fail before the rollout halts")
	f.DurationVar(&so.deadline, "progress-deadline", 10*time.Minute, "how long a node may take to report the config promoted")
	f.BoolVar(&so.noRevert, "no-revert-on-halt", false, "leave the nodes as they are when the rollout halts")
	f.BoolVar(&so.paused, "paused", false, "create it paused")
	f.StringVar(&so.preflight, "preflight", "", "ask every selected node to check the config against its own layers before any node applies it: Required (halt on a failed, overridden or silent node), Warn (name them and go on) or Off (default)")
	f.DurationVar(&so.preflightTimeout, "preflight-timeout", 0, "how long the pre-flight check waits for the nodes' answers (default 2m)")
	so.fleet.addFlags(f)
	return cmd
}

func orAll(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// rollout builds the ConfigRollout the flags describe.
func (so startOptions) rollout(name string) (*v1alpha1.ConfigRollout, error) {
	if so.configMap == "" {
		return nil, errors.New("--configmap is required")
	}
	steps, err := ParseSteps(so.steps)
	if err != nil {
		return nil, fmt.Errorf("--steps: %w", err)
	}
	mu, err := parseIntOrPercent(so.maxUnavailable)
	if err != nil {
		return nil, fmt.Errorf("--max-unavailable: %w", err)
	}
	if so.key == "" {
		if _, ok := nodeapi.DefaultPayloadKey(so.component); !ok {
			return nil, fmt.Errorf("--key is required: component %q has no default payload key (only %s have one)", so.component, nodeapi.KnownComponents())
		}
	}
	if so.maxFailures < 0 {
		return nil, fmt.Errorf("--max-failures: must not be negative, got %d", so.maxFailures)
	}
	if so.deadline < time.Second {
		return nil, fmt.Errorf("--progress-deadline: at least 1s, got %v", so.deadline)
	}
	switch v1alpha1.PreflightPolicy(so.preflight) {
	case "", v1alpha1.PreflightRequired, v1alpha1.PreflightWarn, v1alpha1.PreflightOff:
	default:
		return nil, fmt.Errorf("--preflight: one of %s, %s and %s, got %q", v1alpha1.PreflightRequired, v1alpha1.PreflightWarn, v1alpha1.PreflightOff, so.preflight)
	}
	if so.preflightTimeout != 0 && (so.preflightTimeout < time.Second || so.preflightTimeout > time.Hour) {
		return nil, fmt.Errorf("--preflight-timeout: from 1s to 1h, got %v", so.preflightTimeout)
	}
	ro := &v1alpha1.ConfigRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion().String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ConfigRolloutSpec{
			Component: so.component, ConfigMapName: so.configMap, PayloadKey: so.key, Steps: steps,
			MaxUnavailable: &mu, MaxFailures: so.maxFailures, Paused: so.paused,
			ProgressDeadlineSeconds: ptrTo(int32(so.deadline / time.Second)),
			Preflight:               v1alpha1.PreflightPolicy(so.preflight),
		},
	}
	if so.preflightTimeout != 0 {
		ro.Spec.PreflightTimeoutSeconds = ptrTo(int32(so.preflightTimeout / time.Second))
	}
	if so.selector != "" {
		sel, err := metav1.ParseToLabelSelector(so.selector)
		if err != nil {
			return nil, fmt.Errorf("--selector: %w", err)
		}
		ro.Spec.NodeSelector = sel
	}
	if so.noRevert {
		ro.Spec.RevertOnHalt = ptrTo(false)
	}
	if err := so.fleet.apply(&ro.Spec); err != nil {
		return nil, err
	}
	return ro, nil
}

func ptrTo[T any](v T) *T { return &v }

// ParseSteps parses a comma-separated list of steps: "3" (nodes), "10%"
// (of the selected nodes), "pause" (until resumed), "pause=10m".
func ParseSteps(s string) ([]v1alpha1.RolloutStep, error) {
	var out []v1alpha1.RolloutStep
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "pause":
			out = append(out, v1alpha1.RolloutStep{Pause: &v1alpha1.RolloutPause{}})
		case strings.HasPrefix(part, "pause="):
			d, err := time.ParseDuration(strings.TrimPrefix(part, "pause="))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("step %d %q: want pause=DURATION with a positive duration", i+1, part)
			}
			out = append(out, v1alpha1.RolloutStep{Pause: &v1alpha1.RolloutPause{Duration: &metav1.Duration{Duration: d}}})
		default:
			v, err := parseIntOrPercent(part)
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i+1, err)
			}
			out = append(out, v1alpha1.RolloutStep{Nodes: &v})
		}
	}
	if len(out) > 16 {
		return nil, fmt.Errorf("%d steps, at most 16", len(out))
	}
	return out, nil
}

func parseIntOrPercent(s string) (intstr.IntOrString, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return intstr.IntOrString{}, fmt.Errorf("%q: want a percentage from 1%% to 100%%", s)
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return intstr.IntOrString{}, fmt.Errorf("%q: want a positive node count or a percentage", s)
	}
	return intstr.FromInt32(int32(n)), nil
}

// steer returns a command that merge-patches the spec of NAME.
func (c *commands) steer(use, short, patch string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ri, ns, err := c.rollouts()
			if err != nil {
				return err
			}
			return c.patch(cmd.Context(), ri, ns, args[0], use, patch)
		},
	}
}

func (c *commands) patch(ctx context.Context, ri dynamic.ResourceInterface, ns, name, verb, patch string) error {
	if _, err := ri.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigRollout %s/%s not found", ns, name)
		}
		return fmt.Errorf("%s ConfigRollout %s/%s: %w", verb, ns, name, err)
	}
	_, err := fmt.Fprintf(c.o.Out, "configrollout %s/%s: %s requested\n", ns, name, verb)
	return err
}

// resume clears spec.paused and releases the pause step it waits at.
func (c *commands) resume() *cobra.Command {
	return &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a paused rollout, or release the pause step it waits at",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ri, ns, err := c.rollouts()
			if err != nil {
				return err
			}
			ro, err := get(cmd.Context(), ri, ns, args[0])
			if err != nil {
				return err
			}
			patch := fmt.Sprintf(`{"spec":{"paused":false,"resumedStep":%d}}`, ro.Status.CurrentStep)
			return c.patch(cmd.Context(), ri, ns, args[0], "resume", patch)
		},
	}
}

func (c *commands) history() *cobra.Command {
	return &cobra.Command{
		Use:   "history NAME",
		Short: "What happened to a rollout, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ri, ns, err := c.rollouts()
			if err != nil {
				return err
			}
			ro, err := get(cmd.Context(), ri, ns, args[0])
			if err != nil {
				return err
			}
			_, err = io.WriteString(c.o.Out, RenderHistory(ro))
			return err
		},
	}
}

func reverting(ro *v1alpha1.ConfigRollout) bool {
	if ro.Status.Reverting > 0 {
		return true
	}
	for _, r := range ro.Status.Nodes {
		if r.State == v1alpha1.NodeReverting {
			return true
		}
	}
	return false
}

// isTerminal reports whether w is a character device (a terminal), where
// -w redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
