package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
)

// renderOptions are the arguments of render.
type renderOptions struct {
	component string
	// node, when set, takes the remote config from the node's assignment
	// on the API server.
	node string
	// stateDir, when set, takes the remote config from the state dir's
	// current checkpoint.
	stateDir string
	// config, configDir and instance are the local layers, as the
	// component's --config, --config-dir and instance file.
	config, configDir, instance string
	// sets are --set PATH=VALUE: the component's command-line flags, the
	// top layer.
	sets    []string
	output  string
	timeout time.Duration
}

func newRenderCommand(stdout io.Writer, d deps) *cobra.Command {
	o := renderOptions{component: nodeapi.DefaultComponent, output: outputYAML, timeout: 30 * time.Second}
	var clientFlags *genericclioptions.ConfigFlags
	cmd := &cobra.Command{
		Use:   "render [--node N | --state-dir DIR] [--config FILE] [--config-dir DIR] [--instance FILE] [--component C]",
		Short: "Show the config a node would run, and which layer set each field (dry run)",
		Long: `render merges a component's config layers as the component does and prints
the result with the layer that set each field: the built-in defaults, the
base config, the drop-ins and the instance file, lowest precedence first.
It writes nothing, anywhere.

The base config is, in this order:
  --node N         the ConfigMap the node's assignment annotation names for the
                   component, read from the API server (the kubectl client
                   flags select the cluster); --config when nothing is assigned
  --state-dir DIR  the state dir's current checkpoint, what the component
                   runs after its next restart; its last-known-good when
                   current is marked bad (or the marks cannot be read);
                   --config when that is local. The state dir is read
                   without its lock.
  --config FILE    the local config file (the component's --config)

--config-dir (the kubelet's drop-in directory, *.conf in lexical order),
--instance (the instance-specific file of the KEP) and --set PATH=VALUE (what
the component's command-line flags set) are applied over the base, in this
order, as the component applies them. --component (kubelet or kube-proxy) selects
the config type, the payload key and the assignment annotation.

The output is the merged, defaulted config as YAML, followed by the layer
of every field as comments ("-o json": {config, provenance, warnings, base}).

Exit status: 0 when the config merges and validates, 1 when a layer cannot be
read or the config is invalid (every error is reported, naming the layer and
field), 2 on a usage error.`,
		Example: `  # What node-1's kubelet would run with its assignment and its local drop-ins.
  dynconfigctl render --node node-1 --config /etc/kubernetes/kubelet.conf \
      --config-dir /etc/kubernetes/kubelet.conf.d

  # What a component runs after a restart, from its state dir, on the node.
  dynconfigctl render --state-dir /var/lib/kubelet/dynamic-config --config /etc/kubernetes/kubelet.conf

  # A kube-proxy config and its instance file, offline.
  dynconfigctl render --component kube-proxy --config proxy.yaml --instance node-1.yaml

  # With the flags of the kubelet's unit: --max-pods=150 --feature-gates=KubeletTracing=true.
  dynconfigctl render --config kubelet.yaml --set maxPods=150 --set 'featureGates[KubeletTracing]=true'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.validate(cmd)
			if err != nil {
				return err
			}
			var fetch remoteFetcher
			if o.node != "" {
				c, err := d.newClient(clientFlags)
				if err != nil {
					return err
				}
				fetch = func(ctx context.Context) (*merge.Document, string, error) {
					return nodeBase(ctx, c.client.CoreV1(), o.node, p)
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			return runRender(ctx, stdout, p, o, fetch)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.component, "component", o.component, "the component: "+knownComponents())
	f.StringVar(&o.node, "node", "", "take the base config from this node's assignment on the API server")
	f.StringVar(&o.stateDir, "state-dir", "", "take the base config from this state dir's current checkpoint")
	f.StringVar(&o.config, "config", "", "the local config file, the base when no remote config is found")
	f.StringVar(&o.configDir, "config-dir", "", "a drop-in directory, applied over the base (*.conf, lexical order)")
	f.StringVar(&o.instance, "instance", "", "an instance-specific config file, applied last (strategic merge patch)")
	f.StringArrayVar(&o.sets, "set", nil, "a field the component's command line sets, PATH=VALUE (VALUE in YAML: 150, true, \"10s\", [a, b]); repeatable; the top layer")
	f.StringVarP(&o.output, "output", "o", o.output, "output format: yaml (with the provenance as comments) or json")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "how long to wait for the API server (with --node)")
	clientFlags = addClientFlags(cmd)
	return cmd
}

// remoteFetcher returns the base document from the API server, or nil when
// nothing is assigned, and a description of where it came from.
type remoteFetcher func(ctx context.Context) (*merge.Document, string, error)

// validate checks the flags and returns the component's profile.
func (o renderOptions) validate(cmd *cobra.Command) (profile, error) {
	p, ok := lookupProfile(o.component)
	if !ok {
		return profile{}, usagef("--component %q: render knows %s", o.component, knownComponents())
	}
	for _, name := range []string{"node", "state-dir", "config", "config-dir", "instance"} {
		if f := cmd.Flags().Lookup(name); f.Changed && f.Value.String() == "" {
			return profile{}, usagef("--%s must not be empty", name)
		}
	}
	if o.node != "" && o.stateDir != "" {
		return profile{}, usagef("--node and --state-dir are both a source of the remote config; give one")
	}
	switch o.output {
	case outputYAML, outputJSON:
	default:
		return profile{}, usagef("--output %q: want yaml or json", o.output)
	}
	if o.timeout <= 0 {
		return profile{}, usagef("--timeout must be positive, got %v", o.timeout)
	}
	if _, err := parseSets(o.sets); err != nil {
		return profile{}, err
	}
	return p, nil
}

// parseSets parses --set PATH=VALUE into the overrides of the flags layer;
// each is named "--set PATH" in the provenance.
func parseSets(sets []string) ([]merge.Override, error) {
	var out []merge.Override
	for _, s := range sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(path) == "" {
			return nil, usagef("--set %q: want PATH=VALUE (for example maxPods=150 or featureGates[KubeletTracing]=true)", s)
		}
		var v any
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			return nil, usagef("--set %q: VALUE is not YAML: %s", s, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		}
		out = append(out, merge.Override{Path: path, Value: v, Source: "--set " + path})
	}
	return out, nil
}

// renderResult is the document of -o json.
type renderResult struct {
	// Base says where the base config came from.
	Base       string            `json:"base"`
	Config     any               `json:"config"`
	Provenance map[string]string `json:"provenance"`
	Warnings   []string          `json:"warnings,omitempty"`
}

// runRender builds the layers, merges them and prints the result.
func runRender(ctx context.Context, w io.Writer, p profile, o renderOptions, fetch remoteFetcher) error {
	var layers merge.Layers
	var base string
	switch {
	case fetch != nil:
		doc, from, err := fetch(ctx)
		if err != nil {
			return err
		}
		layers.Base, base = doc, from
	case o.stateDir != "":
		doc, from, err := stateDirBase(o.stateDir, p)
		if err != nil {
			return err
		}
		layers.Base, base = doc, from
	}
	if layers.Base == nil && o.config != "" {
		data, err := readRegularFile(o.config)
		if err != nil {
			return fmt.Errorf("read --config %s: %w", o.config, err)
		}
		layers.Base = &merge.Document{Name: o.config, Data: data}
		if base == "" {
			base = "--config " + o.config
		} else {
			base += "; --config " + o.config
		}
	}
	if base == "" {
		base = "none (the built-in defaults)"
	}
	if o.instance != "" {
		data, err := readRegularFile(o.instance)
		if err != nil {
			return fmt.Errorf("read --instance %s: %w", o.instance, err)
		}
		layers.Instance = &merge.Document{Name: o.instance, Data: data}
	}
	flags, err := parseSets(o.sets)
	if err != nil {
		return err
	}
	layers.Flags = flags
	res, err := p.merge(layers, o.configDir, merge.Options{})
	if err != nil {
		return err
	}
	out := renderResult{Base: base, Config: res.object, Provenance: res.provenance, Warnings: res.warnings}
	if o.output == outputJSON {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	return writeRenderYAML(w, out)
}

// writeRenderYAML writes the config as YAML, preceded by where its base came
// from and followed by the provenance of every field, as comments, so that
// the output is itself a config file.
func writeRenderYAML(w io.Writer, r renderResult) error {
	b, err := yaml.Marshal(r.Config)
	if err != nil {
		return err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Base: %s\n", r.Base)
	for _, warning := range r.Warnings {
		fmt.Fprintf(&sb, "# Warning: %s\n", warning)
	}
	sb.Write(b)
	sb.WriteString("# Provenance (field: the layer that set it; a field not listed is set by no layer and has its zero value):\n")
	paths := make([]string, 0, len(r.Provenance))
	for path := range r.Provenance {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	for _, path := range paths {
		fmt.Fprintf(&sb, "#   %s: %s\n", path, r.Provenance[path])
	}
	_, err = io.WriteString(w, sb.String())
	return err
}

// nodeBase reads the node's assignment for the component and the payload of
// the ConfigMap it names, checked as the component checks it
// (source.Resolve). Nothing assigned is a nil document.
func nodeBase(ctx context.Context, client corev1client.CoreV1Interface, node string, p profile) (*merge.Document, string, error) {
	n, err := client.Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("node %s not found", node)
	}
	if err != nil {
		return nil, "", fmt.Errorf("get node %s: %w", node, err)
	}
	key := nodeapi.AssignmentAnnotationFor(p.component)
	src, from, err := assignmentOf(n, p.component)
	if err != nil {
		return nil, "", err
	}
	if src == nil {
		if from == "" {
			return nil, fmt.Sprintf("node %s has no %s annotation (its local config)", node, key), nil
		}
		return nil, fmt.Sprintf("node %s annotation %s is empty (its local config)", node, key), nil
	}
	ref := src.ConfigMap
	cm, err := client.ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("node %s is assigned ConfigMap %s/%s, which is not found", node, ref.Namespace, ref.Name)
	}
	if err != nil {
		return nil, "", fmt.Errorf("get ConfigMap %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	payloadKey := nodeapi.PayloadKeyOf(src, p.payloadKey)
	if _, ok := cm.Data[payloadKey]; !ok {
		return nil, "", missingKeyError(cm, payloadKey, "")
	}
	if _, err := source.Resolve(src, cm, p.payloadKey); err != nil {
		return nil, "", fmt.Errorf("node %s: its assignment of ConfigMap %s/%s: %w", node, ref.Namespace, ref.Name, err)
	}
	name := fmt.Sprintf("configmap %s/%s key %s", cm.Namespace, cm.Name, payloadKey)
	how := "assigned to node " + node
	if from == fromLegacyConfigSource {
		how += " by its legacy spec.configSource"
	}
	return &merge.Document{Name: name, Data: []byte(cm.Data[payloadKey])},
		fmt.Sprintf("%s (UID %s, resourceVersion %s), %s", name, cm.UID, cm.ResourceVersion, how), nil
}

// stateDirBase reads the state dir's current checkpoint without its lock
// (checkpoint.Inspect: checksums verified, nothing written). A local current
// is a nil document; a current whose checkpoint is missing or damaged is an
// error that names it.
func stateDirBase(dir string, p profile) (*merge.Document, string, error) {
	sd, err := checkStateDirToRead(dir)
	if err != nil {
		return nil, "", err
	}
	snap, err := checkpoint.Inspect(sd.path)
	if err != nil {
		return nil, "", err
	}
	if snap.Current.Err != nil {
		return nil, "", fmt.Errorf("state dir %s: current cannot be read: %w; inspect it with dynconfigctl inspect", sd.path, snap.Current.Err)
	}
	src := snap.Current.Pointer.Source
	if src == nil {
		return nil, fmt.Sprintf("state dir %s: current is the local config", sd.path), nil
	}
	// A current marked bad (or whose marks cannot be read) never runs: the
	// component rolls back, and so does this render (lkg.Decide's rule).
	if why := currentBlocked(snap, src); why != "" {
		return rollbackBase(snap, sd.path, src, why, p)
	}
	return checkpointBase(snap, sd.path, src, "current", p)
}

// currentBlocked says why the component would not run current src at its
// next start for want of marks: a bad mark in the tracking dir of the
// component version that started last (the one with the newest startup),
// or marks it cannot read. "" when nothing blocks it.
func currentBlocked(snap *checkpoint.Snapshot, src *corev1.NodeConfigSource) string {
	var ts *checkpoint.TrackingState
	var newest time.Time
	for i := range snap.Tracking {
		t := &snap.Tracking[i]
		if ts == nil {
			ts = t
		}
		if n := len(t.Startups); n > 0 && t.Startups[n-1].After(newest) {
			ts, newest = t, t.Startups[n-1]
		}
	}
	if ts == nil {
		return ""
	}
	if ts.BadMarksErr != nil && !errors.Is(ts.BadMarksErr, checkpoint.ErrCorrupt) {
		return fmt.Sprintf("the bad marks of component version %s cannot be read (%v)", ts.ComponentVersion, ts.BadMarksErr)
	}
	if _, mark, ok := ts.BadMarks.Lookup(src); ok {
		return fmt.Sprintf("current (UID %s) is marked bad for component version %s: %s", src.ConfigMap.UID, ts.ComponentVersion, mark.Reason)
	}
	return ""
}

// rollbackBase is the base the component runs instead of a blocked current:
// the last-known-good checkpoint, or the local config (a nil document) when
// last-known-good is local or cannot be used.
func rollbackBase(snap *checkpoint.Snapshot, dir string, cur *corev1.NodeConfigSource, why string, p profile) (*merge.Document, string, error) {
	in := lkg.Input{Current: cur, CurrentBad: &lkg.Entry{Reason: why}, LoadCurrent: func() error { return nil }}
	if snap.LastKnownGood.Err != nil {
		in.LastKnownGoodError = snap.LastKnownGood.Err
	} else {
		in.LastKnownGood = snap.LastKnownGood.Pointer.Source
	}
	in.LoadLastKnownGood = func() error {
		_, _, err := checkpointBase(snap, dir, in.LastKnownGood, "last-known-good", p)
		return err
	}
	d, err := lkg.Decide(in)
	if err != nil {
		return nil, "", err
	}
	if d.Run == nil {
		local := fmt.Sprintf("state dir %s: %s, so the component runs the local config", dir, why)
		if d.LastKnownGoodUnusable != nil {
			local += fmt.Sprintf(" (last-known-good is unusable: %v)", d.LastKnownGoodUnusable)
		}
		return nil, local, nil
	}
	doc, from, err := checkpointBase(snap, dir, d.Run, "last-known-good", p)
	if err != nil {
		return nil, "", err
	}
	return doc, fmt.Sprintf("%s; %s, so the component runs last-known-good", from, why), nil
}

// checkpointBase is the payload of the checkpoint src names, which the
// state dir's pointer role ("current", "last-known-good") references.
func checkpointBase(snap *checkpoint.Snapshot, dir string, src *corev1.NodeConfigSource, role string, p profile) (*merge.Document, string, error) {
	k, ok := checkpoint.KeyFromSource(src)
	if !ok {
		return nil, "", fmt.Errorf("state dir %s: %s names no checkpoint (%s)", dir, role, describeSourceLong(src))
	}
	c, ok := snap.Checkpoint(k)
	if !ok {
		return nil, "", fmt.Errorf("state dir %s: %s's checkpoint %s is missing; inspect it with dynconfigctl inspect", dir, role, k)
	}
	if c.Err != nil {
		return nil, "", fmt.Errorf("state dir %s: %s's checkpoint %s cannot be read: %w", dir, role, k, c.Err)
	}
	payloadKey := nodeapi.PayloadKeyOf(src, p.payloadKey)
	data, ok := c.ConfigMap.Data[payloadKey]
	if !ok {
		return nil, "", fmt.Errorf("state dir %s: %s's checkpoint %s: %w", dir, role, k, missingKeyError(c.ConfigMap, payloadKey, ""))
	}
	name := fmt.Sprintf("configmap %s/%s key %s", c.ConfigMap.Namespace, c.ConfigMap.Name, payloadKey)
	return &merge.Document{Name: name, Data: []byte(data)},
		fmt.Sprintf("%s (UID %s, resourceVersion %s), %s in state dir %s", name, c.ConfigMap.UID, c.ConfigMap.ResourceVersion, role, dir), nil
}

// describeSourceLong names a config source in an error.
func describeSourceLong(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return "no ConfigMap"
	}
	r := src.ConfigMap
	return fmt.Sprintf("ConfigMap %s/%s, UID %q, resourceVersion %q", r.Namespace, r.Name, r.UID, r.ResourceVersion)
}
