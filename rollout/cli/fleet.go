package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// fleetOptions are start's flags about the ConfigMap and the fleet.
type fleetOptions struct {
	makeImmutable, allowKnownBad bool
	windows                      []string
}

func (fo *fleetOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&fo.makeImmutable, "make-immutable", false,
		"make the ConfigMap immutable first if it is not (a rollout starts on an immutable ConfigMap only; this cannot be undone)")
	f.BoolVar(&fo.allowKnownBad, "allow-known-bad", false,
		"start even though the ConfigMap is known bad (a rollout halted on it, or nodes report it bad): spec.allowKnownBad")
	f.StringArrayVar(&fo.windows, "window", nil,
		`a maintenance window, "[DAYS ]HH:MM-HH:MM[ ZONE]" (e.g. "Sat,Sun 22:00-04:00 Europe/Berlin"; DAYS: Mon..Sun, default every day; ZONE default UTC); repeat for more: new nodes are assigned only inside one`)
}

// apply sets the spec fields of the flags.
func (fo *fleetOptions) apply(spec *v1alpha1.ConfigRolloutSpec) error {
	spec.AllowKnownBad = fo.allowKnownBad
	for _, s := range fo.windows {
		w, err := ParseWindow(s)
		if err != nil {
			return fmt.Errorf("--window %q: %w", s, err)
		}
		spec.Windows = append(spec.Windows, w)
	}
	return nil
}

// ParseWindow parses "[DAYS ]HH:MM-HH:MM[ ZONE]": DAYS a comma-separated
// list of Mon..Sun, ZONE an IANA time zone. It checks what the planner
// checks (plan.Windows).
func ParseWindow(s string) (v1alpha1.MaintenanceWindow, error) {
	var w v1alpha1.MaintenanceWindow
	fields := strings.Fields(s)
	i := slices.IndexFunc(fields, func(f string) bool { return strings.Contains(f, "-") && strings.Contains(f, ":") })
	if i < 0 || i > 1 || len(fields) > i+2 {
		return w, fmt.Errorf(`want "[DAYS ]HH:MM-HH:MM[ ZONE]", e.g. "Sat,Sun 22:00-04:00 Europe/Berlin"`)
	}
	if i == 1 {
		for _, d := range strings.Split(fields[0], ",") {
			w.Days = append(w.Days, v1alpha1.Weekday(d))
		}
	}
	w.Start, w.End, _ = strings.Cut(fields[i], "-")
	if len(fields) == i+2 {
		w.TimeZone = fields[i+1]
	}
	if _, err := plan.Windows([]v1alpha1.MaintenanceWindow{w}, metav1.Now().Time); err != nil {
		return w, fmt.Errorf("%s", strings.Replace(err.Error(), "spec.windows[0].", "", 1))
	}
	return w, nil
}

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// startChecks runs checkConfigMap with the command's clients.
func (c *commands) startChecks(ctx context.Context, ns, name string, fo *fleetOptions) error {
	cl, err := c.o.NewClients(c.flags)
	if err != nil {
		return err
	}
	return c.checkConfigMap(ctx, cl.Dynamic, ns, name, fo)
}

// checkConfigMap looks at the ConfigMap before the rollout is created: a
// mutable one is made immutable with --make-immutable, else refused here
// (the controller would keep the rollout Pending); one that does not exist
// yet, or that this identity may not read, is left to the controller.
func (c *commands) checkConfigMap(ctx context.Context, dyn dynamic.Interface, ns, name string, fo *fleetOptions) error {
	ri := dyn.Resource(configMapsGVR).Namespace(ns)
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := fmt.Fprintf(c.o.ErrOut, "ConfigMap %s/%s does not exist yet: the rollout waits for it (create it with immutable: true)\n", ns, name)
		return err
	case apierrors.IsForbidden(err) && !fo.makeImmutable:
		return nil // the controller says what it finds
	case err != nil:
		return fmt.Errorf("get ConfigMap %s/%s: %w", ns, name, err)
	}
	var cm corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
		return fmt.Errorf("decode ConfigMap %s/%s: %w", ns, name, err)
	}
	if cm.Immutable != nil && *cm.Immutable {
		return nil
	}
	if !fo.makeImmutable {
		return fmt.Errorf("ConfigMap %s/%s is not immutable: a rollout starts on an immutable ConfigMap only, so that nobody can edit the config under it; "+
			"rerun with --make-immutable to make it so (final: a later change needs a new ConfigMap), or `kubectl patch configmap -n %s %s --type merge -p '{\"immutable\":true}'`",
			ns, name, ns, name)
	}
	// On the version read: a change since is a conflict, not overwritten.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": cm.ResourceVersion}, "immutable": true})
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "dynconfigctl"}); err != nil {
		return fmt.Errorf("make ConfigMap %s/%s immutable: %w", ns, name, err)
	}
	_, err = fmt.Fprintf(c.o.ErrOut, "configmap %s/%s made immutable\n", ns, name)
	return err
}

// KnownBadConfig is a config the fleet knows bad: the rollouts that halted
// on it (plan.HaltMarksBad) and the nodes whose component reports it bad
// (plan.BadReportOf).
type KnownBadConfig struct {
	// Namespace and Name of the ConfigMap, as far as known.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// UID and ResourceVersion identify the config.
	UID             types.UID `json:"uid"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	// Rollouts are the ConfigRollouts halted on it ("ns/name: reason").
	Rollouts []string `json:"rollouts,omitempty"`
	// Nodes are the nodes whose component reports it bad ("node
	// (component Phase)").
	Nodes []string `json:"nodes,omitempty"`
}

// KnownBad lists the configs the fleet knows bad, from the Nodes and the
// ConfigRollouts: by UID, then resourceVersion.
func KnownBad(nodes []*corev1.Node, rollouts []v1alpha1.ConfigRollout) []KnownBadConfig {
	type key struct {
		uid types.UID
		rv  string
	}
	byKey := map[key]*KnownBadConfig{}
	get := func(k key, ns, name string) *KnownBadConfig {
		c := byKey[k]
		if c == nil {
			c = &KnownBadConfig{UID: k.uid, ResourceVersion: k.rv}
			byKey[k] = c
		}
		if c.Name == "" {
			c.Namespace, c.Name = ns, name
		}
		return c
	}
	for i := range rollouts {
		ro := &rollouts[i]
		if ro.Status.ConfigMap == nil {
			continue
		}
		cond := meta.FindStatusCondition(ro.Status.Conditions, v1alpha1.ConditionHalted)
		if cond == nil || cond.Status != metav1.ConditionTrue || !plan.HaltMarksBad(cond.Reason) {
			continue
		}
		c := get(key{ro.Status.ConfigMap.UID, ro.Status.ConfigMap.ResourceVersion}, ro.Namespace, ro.Spec.ConfigMapName)
		c.Rollouts = append(c.Rollouts, fmt.Sprintf("%s/%s: %s", ro.Namespace, ro.Name, cond.Reason))
	}
	for _, n := range nodes {
		for ann := range n.Annotations {
			component, ok := componentOfStatus(ann)
			if !ok {
				continue
			}
			st, err := nodeapi.ReadConfigStatus(n, component)
			if err != nil {
				continue
			}
			b := plan.BadReportOf(n.Name, st)
			if b == nil {
				continue
			}
			cm := st.Assigned.ConfigMap
			c := get(key{b.UID, b.ResourceVersion}, cm.Namespace, cm.Name)
			c.Nodes = append(c.Nodes, fmt.Sprintf("%s (%s %s)", n.Name, component, b.Phase))
		}
	}
	out := make([]KnownBadConfig, 0, len(byKey))
	for _, c := range byKey {
		slices.Sort(c.Rollouts)
		slices.Sort(c.Nodes)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b KnownBadConfig) int {
		if a.UID != b.UID {
			return strings.Compare(string(a.UID), string(b.UID))
		}
		return strings.Compare(a.ResourceVersion, b.ResourceVersion)
	})
	return out
}

// componentOfStatus returns the component whose status annotation key is
// (nodeapi.StatusAnnotationFor).
func componentOfStatus(key string) (string, bool) {
	if key == nodeapi.StatusAnnotation {
		return nodeapi.DefaultComponent, true
	}
	c, ok := strings.CutPrefix(key, nodeapi.StatusAnnotation+".")
	if !ok || nodeapi.ValidateComponentName(c) != nil || nodeapi.StatusAnnotationFor(c) != key {
		return "", false
	}
	return c, true
}

// RenderKnownBad is the "Known-bad configs" section of dynconfigctl
// status: one line per config, "" when there is none.
func RenderKnownBad(configs []KnownBadConfig) string {
	if len(configs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nKnown-bad configs (a new rollout of one is refused unless spec.allowKnownBad / --allow-known-bad):\n")
	for _, c := range configs {
		name := "ConfigMap " + c.Namespace + "/" + c.Name
		if c.Name == "" {
			name = "ConfigMap (name unknown)"
		}
		fmt.Fprintf(&b, "  %s uid %s resourceVersion %s:", name, c.UID, orAll(c.ResourceVersion, "?"))
		var what []string
		if len(c.Rollouts) > 0 {
			what = append(what, "halted "+strings.Join(c.Rollouts, ", "))
		}
		if len(c.Nodes) > 0 {
			nodes := c.Nodes
			more := ""
			if len(nodes) > 5 {
				more = fmt.Sprintf(" and %d more", len(nodes)-5)
				nodes = nodes[:5]
			}
			what = append(what, fmt.Sprintf("%d nodes report it bad: %s%s", len(c.Nodes), strings.Join(nodes, ", "), more))
		}
		b.WriteString(" " + strings.Join(what, "; ") + "\n")
	}
	return b.String()
}
