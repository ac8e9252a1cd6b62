package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dynconfig/dynconfig/source"
)

// configSourceAnnotation is the Node annotation that assigns a config: a JSON
// NodeConfigSource, as the Node source reads it.
const configSourceAnnotation = source.AnnotationKey

// defaultPayloadKey is the kubelet profile's payload key, the default of
// --key.
const defaultPayloadKey = "kubelet"

// assignOptions are the arguments of assign.
type assignOptions struct {
	node       string
	configMap  string // NS/NAME
	key        string
	kubeconfig string
	clear      bool
	timeout    time.Duration
}

func newAssignCommand(stdout io.Writer, d deps) *cobra.Command {
	o := assignOptions{key: defaultPayloadKey}
	cmd := &cobra.Command{
		Use:   "assign --node N (--configmap NS/NAME [--key K] | --clear)",
		Short: "Assign a ConfigMap to a node, or clear its assignment",
		Long: `assign looks up the ConfigMap NS/NAME, checks that it holds the payload key,
and sets the node's ` + configSourceAnnotation + ` annotation to the
NodeConfigSource that names it by namespace, name and UID. The component on the
node checkpoints it, restarts on it, and reports the outcome in its ConfigOK
condition.

Roll out a change as a new ConfigMap and assign it; do not edit an assigned
ConfigMap in place. --clear removes the annotation (and a legacy
spec.configSource, which the node would otherwise fall back to): the node goes back to its
local config.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(cmd.Flags().Changed("key")); err != nil {
				return err
			}
			client, err := d.newClient(o.kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			return runAssign(ctx, stdout, client, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.node, "node", "", "the node to assign to (required)")
	f.StringVar(&o.configMap, "configmap", "", "the ConfigMap to assign, as NAMESPACE/NAME")
	f.StringVar(&o.key, "key", o.key, "the ConfigMap data key that holds the config")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.BoolVar(&o.clear, "clear", false, "remove the node's assignment (the node runs its local config)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the API server")
	return cmd
}

// validate checks the flags; keyChanged is whether --key was given.
func (o assignOptions) validate(keyChanged bool) error {
	if o.node == "" {
		return usagef("--node is required")
	}
	switch {
	case o.clear && o.configMap != "":
		return usagef("--clear and --configmap are mutually exclusive")
	case o.clear && keyChanged:
		return usagef("--key does not go with --clear")
	case !o.clear && o.configMap == "":
		return usagef("one of --configmap or --clear is required")
	}
	if !o.clear {
		if _, _, err := parseNamespacedName(o.configMap); err != nil {
			return err
		}
		if o.key == "" {
			return usagef("--key must not be empty")
		}
	}
	if o.timeout <= 0 {
		return usagef("--timeout must be positive, got %v", o.timeout)
	}
	return nil
}

// parseNamespacedName parses NAMESPACE/NAME.
func parseNamespacedName(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", usagef("--configmap %q: want NAMESPACE/NAME", s)
	}
	return namespace, name, nil
}

// newClientFromKubeconfig builds a clientset with clientcmd's loading rules:
// an explicit path if given, else $KUBECONFIG, ~/.kube/config, or the
// in-cluster config.
func newClientFromKubeconfig(kubeconfig string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if kubeconfig != "" {
			return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
		}
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg = rest.AddUserAgent(cfg, "dynconfigctl")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create API client: %w", err)
	}
	return client, nil
}

// assignmentJSON is the annotation value for src.
func assignmentJSON(src *corev1.NodeConfigSource) (string, error) {
	b, err := json.Marshal(src)
	if err != nil {
		return "", fmt.Errorf("encode NodeConfigSource: %w", err)
	}
	return string(b), nil
}

// annotationPatch is a JSON merge patch that sets the annotation to value,
// or removes it when value is nil.
func annotationPatch(value *string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"annotations": map[string]*string{configSourceAnnotation: value},
		},
	})
}

// runAssign sets or clears the node's assignment and says what changed on w.
// The flags must have passed validate.
func runAssign(ctx context.Context, w io.Writer, client kubernetes.Interface, o assignOptions) error {
	node, err := client.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s not found", o.node)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", o.node, err)
	}
	previous, had := node.Annotations[configSourceAnnotation]
	was := "not set"
	if had {
		was = previous
	}

	if o.clear {
		// A node that still carries the legacy spec.configSource (clusters
		// before 1.24) would fall back to it once the annotation is gone:
		// clearing means both.
		legacy := node.Spec.ConfigSource
		if !had && legacy == nil {
			_, err := fmt.Fprintf(w, "node %s: annotation %s is not set; nothing to clear\n", o.node, configSourceAnnotation)
			return err
		}
		if err := patchClear(ctx, client, o.node, had, legacy != nil); err != nil {
			return err
		}
		var removed []string
		if had {
			removed = append(removed, fmt.Sprintf("annotation %s (was %s)", configSourceAnnotation, was))
		}
		if legacy != nil {
			removed = append(removed, fmt.Sprintf("the legacy spec.configSource (was %s)", describeLegacy(legacy)))
		}
		_, err := fmt.Fprintf(w, "node %s: removed %s; the node will run its local config\n", o.node, strings.Join(removed, " and "))
		return err
	}

	namespace, name, err := parseNamespacedName(o.configMap)
	if err != nil {
		return err
	}
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("ConfigMap %s/%s not found", namespace, name)
	}
	if err != nil {
		return fmt.Errorf("get ConfigMap %s/%s: %w", namespace, name, err)
	}
	if _, ok := cm.Data[o.key]; !ok {
		return missingKeyError(cm, o.key)
	}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: namespace, Name: name, UID: cm.UID, KubeletConfigKey: o.key,
	}}
	// The rules the component applies to what it reads: refuse to write an
	// assignment it would reject.
	if _, err := source.Resolve(src, cm, o.key); err != nil {
		return fmt.Errorf("assignment of ConfigMap %s/%s would be invalid: %w", namespace, name, err)
	}
	value, err := assignmentJSON(src)
	if err != nil {
		return err
	}
	if had && previous == value {
		_, err := fmt.Fprintf(w, "node %s: annotation %s is already %s; nothing to change\n", o.node, configSourceAnnotation, value)
		return err
	}
	if err := patchAnnotation(ctx, client, o.node, &value); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "node %s: set annotation %s=%s (was %s)\n", o.node, configSourceAnnotation, value, was)
	return err
}

func patchAnnotation(ctx context.Context, client kubernetes.Interface, node string, value *string) error {
	patch, err := annotationPatch(value)
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch annotation %s of node %s: %w", configSourceAnnotation, node, err)
	}
	return nil
}

// patchClear removes the annotation and, when set, spec.configSource, in one
// JSON merge patch.
func patchClear(ctx context.Context, client kubernetes.Interface, node string, annotation, legacy bool) error {
	p := map[string]any{}
	if annotation {
		p["metadata"] = map[string]any{"annotations": map[string]*string{configSourceAnnotation: nil}}
	}
	if legacy {
		p["spec"] = map[string]any{"configSource": nil}
	}
	patch, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("clear the assignment of node %s: %w", node, err)
	}
	return nil
}

// describeLegacy names a spec.configSource in messages.
func describeLegacy(src *corev1.NodeConfigSource) string {
	if src.ConfigMap == nil {
		return "a source without a ConfigMap"
	}
	return fmt.Sprintf("ConfigMap %s/%s, UID %s", src.ConfigMap.Namespace, src.ConfigMap.Name, src.ConfigMap.UID)
}

// missingKeyError names the key and lists the keys the ConfigMap has.
func missingKeyError(cm *corev1.ConfigMap, key string) error {
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	present := "it has no data keys"
	if len(keys) > 0 {
		present = "keys present: " + strings.Join(keys, ", ")
	}
	if _, ok := cm.BinaryData[key]; ok {
		present += fmt.Sprintf("; %q is in binaryData, which is not read", key)
	}
	return fmt.Errorf("ConfigMap %s/%s has no data key %q (%s); choose one with --key", cm.Namespace, cm.Name, key, present)
}
