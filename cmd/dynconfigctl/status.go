package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
)

// statusOptions are the arguments of status.
type statusOptions struct {
	nodes     []string
	selector  string
	component string
	output    string
	noHeaders bool
	timeout   time.Duration
	// pageSize is how many Nodes one List returns (500, as kubectl).
	pageSize int64
	// knownBad adds the known-bad section (knownbad.go); rollouts reads
	// the ConfigRollouts for it (nil: none is read).
	knownBad bool
	rollouts dynamic.Interface
}

// The -o values of status.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func newStatusCommand(stdout, stderr io.Writer, d deps) *cobra.Command {
	o := statusOptions{timeout: 30 * time.Second, pageSize: 500}
	var clientFlags *genericclioptions.ConfigFlags
	cmd := &cobra.Command{
		Use:   "status [NODE...] [--selector L] [--component C] [-o wide|json|yaml] [--no-headers]",
		Short: "Show the config of every component on every node, from the API server",
		Long: `status lists, for each node and each component on it that uses dynconfig,
what the component reports in its config-status annotation
(` + nodeapi.StatusAnnotation + ` for the kubelet,
` + nodeapi.StatusAnnotation + `.<component> for any other) and its condition
(ConfigOK for the kubelet, <Component>ConfigOK for any other):

  NODE        the node
  COMPONENT   the component (kubelet, kube-proxy, ...)
  ASSIGNED    the ConfigMap the node's assignment annotation names (for the
              kubelet without one, the legacy spec.configSource, marked so),
              or "local"; "(pending)" until the component reports it
  ACTIVE      the config the component runs ("local": its local config)
  LKG         its last-known-good config, the rollback target
  CONDITION   the component's condition and its status
  PHASE       Local, Trial, Promoted, RolledBack, DeadEnd (a node that
              needs a repair: see 'dynconfigctl inspect'), SyncFailed (the
              assignment could not be read; it runs what it ran) or
              NotApplied (the assigned config could not be applied on this
              node, e.g. its drain timed out; it runs what it ran and the
              config is not marked bad); a phase of a newer dynconfig is
              printed as it is

A component is listed when its node carries its assignment or its
config-status annotation; "<none>" means it has published nothing yet.
-o wide adds the resourceVersion of each config, the end of the trial, and
the condition's reason. -o json and -o yaml print everything, including the
raw assignment, the full status and the condition.

Exit status: 0 on success, 1 when the API server cannot be read or a node
carries an annotation that cannot be decoded (every other row is still
printed; the error names the node and annotation), 2 on a usage error.`,
		Example: `  # The whole fleet.
  dynconfigctl status

  # The kube-proxy of the nodes of one pool, with more detail.
  dynconfigctl status --selector pool=blue --component kube-proxy -o wide

  # Two nodes, as JSON, from another kubeconfig context.
  dynconfigctl status node-1 node-2 -o json --context prod`,
		Args: func(_ *cobra.Command, args []string) error {
			o.nodes = args
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			c, err := d.newClient(clientFlags)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			o.rollouts = c.dynamic
			return runStatus(ctx, stdout, stderr, c.client, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "the nodes to show, by label selector (as kubectl's, e.g. pool=blue,zone!=a)")
	f.StringVar(&o.component, "component", "", "show this component only (default: every component)")
	f.StringVarP(&o.output, "output", "o", outputTable, "output format: wide, json or yaml (default: a table)")
	f.BoolVar(&o.noHeaders, "no-headers", false, "print the table (and -o wide) without its header line")
	f.BoolVar(&o.knownBad, "known-bad", false, "below the table, list the configs the fleet knows bad: halted ConfigRollouts' and those nodes report bad")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "how long to wait for the API server")
	clientFlags = addClientFlags(cmd)
	return cmd
}

// validate checks the flags and arguments.
func (o statusOptions) validate() error {
	switch o.output {
	case outputTable, outputWide:
	case outputJSON, outputYAML:
		if o.noHeaders {
			return usagef("--no-headers goes with a table, not -o %s", o.output)
		}
	default:
		return usagef("--output %q: want wide, json or yaml", o.output)
	}
	if o.selector != "" {
		if len(o.nodes) > 0 {
			return usagef("--selector does not go with NODE arguments")
		}
		if _, err := labels.Parse(o.selector); err != nil {
			return usagef("--selector %q: %v", o.selector, err)
		}
	}
	if o.component != "" {
		if err := nodeapi.ValidateComponentName(o.component); err != nil {
			return &usageError{err: fmt.Errorf("--component: %w", err)}
		}
	}
	for _, n := range o.nodes {
		if n == "" {
			return usagef("a NODE must not be empty")
		}
	}
	if o.timeout <= 0 {
		return usagef("--timeout must be positive, got %v", o.timeout)
	}
	return nil
}

// componentStatus is one row of status: a component on a node.
type componentStatus struct {
	Node      string `json:"node"`
	Component string `json:"component"`
	// Assignment is the node's assignment annotation for the component,
	// decoded; nil when there is none (the local config).
	Assignment *corev1.NodeConfigSource `json:"assignment,omitempty"`
	// AssignmentFrom is where Assignment comes from: the annotation, or,
	// for the kubelet without one, the legacy spec.configSource, which the
	// Node source falls back to.
	AssignmentFrom string `json:"assignmentFrom,omitempty"`
	// AssignmentError says why the assignment could not be decoded.
	AssignmentError string `json:"assignmentError,omitempty"`
	// Status is what the component published; nil when nothing.
	Status *nodeapi.ConfigStatus `json:"status,omitempty"`
	// StatusError says why the status annotation could not be decoded.
	StatusError string `json:"statusError,omitempty"`
	// Condition is the component's condition; nil when it has none.
	Condition *corev1.NodeCondition `json:"condition,omitempty"`
}

// statusList is the document of -o json and -o yaml.
type statusList struct {
	Items []componentStatus `json:"items"`
}

// runStatus reads the nodes and prints one row per component. Rows whose
// annotations cannot be decoded are printed, and make the error returned.
func runStatus(ctx context.Context, stdout, stderr io.Writer, client kubernetes.Interface, o statusOptions) error {
	nodes, err := listNodes(ctx, client, o)
	if err != nil {
		return err
	}
	var rows []componentStatus
	var problems []error
	for _, n := range nodes {
		for _, c := range componentsOf(n) {
			if o.component != "" && c != o.component {
				continue
			}
			row, errs := statusOf(n, c)
			rows = append(rows, row)
			problems = append(problems, errs...)
		}
	}
	if err := printStatus(stdout, rows, o.output, o.noHeaders); err != nil {
		return err
	}
	if err := printKnownBad(ctx, stdout, o, nodes); err != nil {
		return err
	}
	if len(rows) == 0 && (o.output == outputTable || o.output == outputWide) {
		what := "dynconfig component"
		if o.component != "" {
			what = "component " + o.component
		}
		if _, err := fmt.Fprintf(stderr, "No %s found on %d node(s).\n", what, len(nodes)); err != nil {
			return err
		}
	}
	return errors.Join(problems...)
}

// listNodes gets the nodes named, or lists those the selector selects, page
// by page, sorted by name.
func listNodes(ctx context.Context, client kubernetes.Interface, o statusOptions) ([]*corev1.Node, error) {
	var nodes []*corev1.Node
	if len(o.nodes) > 0 {
		var errs []error
		for _, name := range o.nodes {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				errs = append(errs, fmt.Errorf("node %s not found", name))
			case err != nil:
				errs = append(errs, fmt.Errorf("get node %s: %w", name, err))
			default:
				nodes = append(nodes, n)
			}
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return nodes, nil
	}
	opts := metav1.ListOptions{LabelSelector: o.selector, Limit: o.pageSize}
	for {
		list, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for i := range list.Items {
			nodes = append(nodes, &list.Items[i])
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, nil
}

// componentsOf returns the components a node carries an assignment or a
// config-status annotation of (the kubelet also for a legacy
// spec.configSource): the kubelet first, then by name.
func componentsOf(n *corev1.Node) []string {
	seen := map[string]bool{}
	for key := range n.Annotations {
		for _, prefix := range []string{nodeapi.AssignmentAnnotation, nodeapi.StatusAnnotation} {
			switch {
			case key == prefix:
				seen[nodeapi.DefaultComponent] = true
			case strings.HasPrefix(key, prefix+"."):
				c := strings.TrimPrefix(key, prefix+".")
				// A key that is no component's is not ours (for
				// example one with a further dot).
				if nodeapi.ValidateComponentName(c) == nil {
					seen[c] = true
				}
			}
		}
	}
	if n.Spec.ConfigSource != nil {
		seen[nodeapi.DefaultComponent] = true
	}
	var out []string
	for c := range seen {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == nodeapi.DefaultComponent:
			return -1
		case b == nodeapi.DefaultComponent:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

// statusOf reads one component's row from its node. The errors name the
// node and the annotation that cannot be decoded.
func statusOf(n *corev1.Node, component string) (componentStatus, []error) {
	row := componentStatus{Node: n.Name, Component: component}
	var errs []error
	src, from, err := assignmentOf(n, component)
	if err != nil {
		row.AssignmentError = err.Error()
		errs = append(errs, err)
	} else {
		row.Assignment, row.AssignmentFrom = src, from
	}
	s, err := nodeapi.ReadConfigStatus(n, component)
	if err != nil {
		row.StatusError = err.Error()
		errs = append(errs, err)
	}
	row.Status = s
	if c := status.FindType(n.Status.Conditions, nodeapi.ConditionTypeFor(component)); c != nil {
		cc := *c
		row.Condition = &cc
	}
	return row, errs
}

// The places an assignment comes from (componentStatus.AssignmentFrom).
const (
	fromAnnotation         = "annotation"
	fromLegacyConfigSource = "spec.configSource"
)

// assignmentOf returns a component's assignment on node as the node reads
// it (nodeapi.ReadAssignment): its annotation when present; for the kubelet
// without one, the legacy spec.configSource (clusters from before 1.24 may
// still carry it); else nil. The error names the node and where the
// assignment is.
func assignmentOf(n *corev1.Node, component string) (*corev1.NodeConfigSource, string, error) {
	key := nodeapi.AssignmentAnnotationFor(component)
	if v, ok := n.Annotations[key]; ok {
		src, err := nodeapi.ParseAssignment(v)
		if err != nil {
			return nil, "", fmt.Errorf("node %q annotation %s: %w", n.Name, key, err)
		}
		return src, fromAnnotation, nil
	}
	src, set, err := nodeapi.ReadAssignment(n, key) // the legacy field, if any
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("node %q spec.configSource: %w", n.Name, err)
	case !set:
		return nil, "", nil
	}
	return src, fromLegacyConfigSource, nil
}

// printStatus prints the rows in the format of -o.
func printStatus(w io.Writer, rows []componentStatus, output string, noHeaders bool) error {
	switch output {
	case outputJSON:
		b, err := json.MarshalIndent(statusList{Items: nonNil(rows)}, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case outputYAML:
		b, err := yaml.Marshal(statusList{Items: nonNil(rows)})
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	wide := output == outputWide
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 6, 4, 3, ' ', 0)
	header := []string{"NODE", "COMPONENT", "ASSIGNED", "ACTIVE", "LKG", "CONDITION", "PHASE"}
	if wide {
		header = append(header, "TRIAL-ENDS", "REASON")
	}
	if !noHeaders {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.columns(wide), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func nonNil(rows []componentStatus) []componentStatus {
	if rows == nil {
		return []componentStatus{}
	}
	return rows
}

// Placeholders of the table.
const (
	cellNone    = "<none>"
	cellInvalid = "<invalid>"
	cellLocal   = "local"
)

// columns renders a row for the table.
func (r componentStatus) columns(wide bool) []string {
	assigned := cellLocal
	switch {
	case r.AssignmentError != "":
		assigned = cellInvalid
	case r.Assignment != nil:
		assigned = describeSource(r.Assignment, false)
		if r.AssignmentFrom == fromLegacyConfigSource {
			assigned += " (spec.configSource)"
		}
	}
	if r.Status != nil && r.AssignmentError == "" && !sameConfigMap(r.Assignment, r.Status.Assigned) {
		assigned += " (pending)"
	}
	active, lkg, phase, trialEnds := cellNone, cellNone, cellNone, cellNone
	switch {
	case r.StatusError != "":
		active, lkg, phase, trialEnds = cellInvalid, cellInvalid, cellInvalid, cellInvalid
	case r.Status != nil:
		active = describeSource(r.Status.Active, wide)
		lkg = describeSource(r.Status.LastKnownGood, wide)
		phase = string(r.Status.Phase)
		if r.Status.TrialEnds != nil {
			trialEnds = r.Status.TrialEnds.UTC().Format(time.RFC3339)
		}
	}
	condition, reason := cellNone, cellNone
	if r.Condition != nil {
		condition = fmt.Sprintf("%s=%s", r.Condition.Type, r.Condition.Status)
		if r.Condition.Reason != "" {
			reason = r.Condition.Reason
		}
	}
	if wide && r.Status != nil && r.Status.Assigned != nil && r.AssignmentError == "" {
		// The version of the assignment is the one the component resolved.
		assigned = strings.Replace(assigned, describeSource(r.Status.Assigned, false), describeSource(r.Status.Assigned, true), 1)
	}
	cols := []string{r.Node, r.Component, assigned, active, lkg, condition, phase}
	if wide {
		cols = append(cols, trialEnds, reason)
	}
	return cols
}

// describeSource names a config in the table: "local", NAMESPACE/NAME, and
// with withVersion its resourceVersion (NAMESPACE/NAME@RV).
func describeSource(src *corev1.NodeConfigSource, withVersion bool) string {
	switch {
	case src == nil:
		return cellLocal
	case src.ConfigMap == nil:
		return cellInvalid
	}
	s := src.ConfigMap.Namespace + "/" + src.ConfigMap.Name
	if withVersion && src.ConfigMap.ResourceVersion != "" {
		s += "@" + src.ConfigMap.ResourceVersion
	}
	return s
}

// sameConfigMap reports whether the assignment annotation and the assigned
// config a component reports name the same ConfigMap (namespace, name and
// UID; the annotation has no resourceVersion).
func sameConfigMap(annotation, reported *corev1.NodeConfigSource) bool {
	if annotation == nil || reported == nil {
		return annotation == nil && reported == nil
	}
	a, r := annotation.ConfigMap, reported.ConfigMap
	if a == nil || r == nil {
		return a == r
	}
	return a.Namespace == r.Namespace && a.Name == r.Name && (a.UID == "" || a.UID == r.UID)
}
