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
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
)

// configSourceAnnotation is the Node annotation that assigns a config: a JSON
// NodeConfigSource, as the Node source reads it.
const configSourceAnnotation = nodeapi.AssignmentAnnotation

// assignOptions are the arguments of assign.
type assignOptions struct {
	node string
	// configMap is NAMESPACE/NAME, or NAME in the namespace of the client
	// flags (resolveConfigMap).
	configMap string
	key       string
	// component names the assignment annotation (nodeapi.AssignmentAnnotationFor);
	// "" is the kubelet.
	component string
	clear     bool
	timeout   time.Duration
}

// annotation is the Node annotation that assigns the component's config.
func (o assignOptions) annotation() string { return nodeapi.AssignmentAnnotationFor(o.component) }

func newAssignCommand(stdout io.Writer, d deps) *cobra.Command {
	o := assignOptions{component: nodeapi.DefaultComponent}
	var clientFlags *genericclioptions.ConfigFlags
	cmd := &cobra.Command{
		Use:   "assign --node N (--configmap [NAMESPACE/]NAME [--key K] | --clear) [--component C]",
		Short: "Assign a ConfigMap to a node, or clear its assignment",
		Long: `assign looks up the ConfigMap, checks that it holds the payload key and that
the component would accept the assignment, and sets the node's assignment
annotation for the component (` + configSourceAnnotation + ` for the kubelet,
` + configSourceAnnotation + `.<component> for any other) to the
NodeConfigSource that names it by namespace, name and UID. The component on
the node checkpoints it, restarts on it, and reports the outcome in its
condition (ConfigOK for the kubelet; see 'dynconfigctl status').

A --configmap without a namespace is looked up in the namespace of the client
flags (--namespace, else the kubeconfig context's). --key defaults to the
component's payload key ("kubelet" for the kubelet, "config.conf" for
kube-proxy); any other component needs --key.

Roll out a change as a new ConfigMap and assign it; do not edit an assigned
ConfigMap in place. --clear removes the annotation (and, for the kubelet, a
legacy spec.configSource, which the node would otherwise fall back to): the
node goes back to its local config.

Exit status: 0 when the node is assigned (or already was), 1 on an error
(node or ConfigMap not found, missing key, API error), 2 on a usage error.`,
		Example: `  # Assign the kubelet of node-1 the ConfigMap kube-system/kubelet-v2.
  dynconfigctl assign --node node-1 --configmap kube-system/kubelet-v2

  # Assign kube-proxy on node-1, in the namespace of the current context.
  dynconfigctl assign --node node-1 --component kube-proxy --configmap kube-proxy-v2

  # Go back to the local config, with another kubeconfig context.
  dynconfigctl assign --node node-1 --clear --context prod`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.complete(cmd.Flags().Changed("key")); err != nil {
				return err
			}
			if err := o.validate(cmd.Flags().Changed("key")); err != nil {
				return err
			}
			c, err := d.newClient(clientFlags)
			if err != nil {
				return err
			}
			if !o.clear {
				o.configMap = resolveConfigMap(o.configMap, c.namespace)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			return runAssign(ctx, stdout, c.client, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.node, "node", "", "the node to assign to (required)")
	f.StringVar(&o.configMap, "configmap", "", "the ConfigMap to assign, as NAMESPACE/NAME, or NAME in the namespace of --namespace")
	f.StringVar(&o.key, "key", "", "the ConfigMap data key that holds the config (default: the component's payload key)")
	f.StringVar(&o.component, "component", o.component, "the component whose assignment to set (kubelet, kube-proxy, or a third-party component's name)")
	f.BoolVar(&o.clear, "clear", false, "remove the node's assignment (the node runs its local config)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the API server")
	clientFlags = addClientFlags(cmd)
	return cmd
}

// complete fills in the default of --key from --component; keyChanged is
// whether --key was given.
func (o *assignOptions) complete(keyChanged bool) error {
	if keyChanged || o.clear {
		return nil
	}
	if key, ok := nodeapi.DefaultPayloadKey(o.component); ok {
		o.key = key
		return nil
	}
	if err := nodeapi.ValidateComponentName(o.component); err != nil {
		return &usageError{err: fmt.Errorf("--component: %w", err)}
	}
	return usagef("--key is required for component %q: only %s have a default payload key", o.component, nodeapi.KnownComponents())
}

// validate checks the flags; keyChanged is whether --key was given.
func (o assignOptions) validate(keyChanged bool) error {
	if o.node == "" {
		return usagef("--node is required")
	}
	if o.component != "" {
		if err := nodeapi.ValidateComponentName(o.component); err != nil {
			return &usageError{err: fmt.Errorf("--component: %w", err)}
		}
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
		if err := validateConfigMapFlag(o.configMap); err != nil {
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
		return "", "", usagef("--configmap %q: want NAMESPACE/NAME or NAME", s)
	}
	return namespace, name, nil
}

// validateConfigMapFlag checks --configmap: NAME or NAMESPACE/NAME, the
// namespace a DNS label and the name a DNS subdomain, as the API server
// requires.
func validateConfigMapFlag(s string) error {
	namespace, name := "", s
	if strings.Contains(s, "/") {
		var err error
		if namespace, name, err = parseNamespacedName(s); err != nil {
			return err
		}
	}
	if name == "" {
		return usagef("--configmap must not be empty")
	}
	if namespace != "" {
		if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
			return usagef("--configmap %q: namespace %q: %s", s, namespace, strings.Join(msgs, "; "))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return usagef("--configmap %q: name %q: %s", s, name, strings.Join(msgs, "; "))
	}
	return nil
}

// resolveConfigMap qualifies a --configmap NAME with the client's namespace.
func resolveConfigMap(s, namespace string) string {
	if strings.Contains(s, "/") {
		return s
	}
	return namespace + "/" + s
}

// annotationPatch is a JSON merge patch that sets the annotation to value,
// or removes it when value is nil.
func annotationPatch(key string, value *string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"annotations": map[string]*string{key: value},
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
	annotation := o.annotation()
	previous, had := node.Annotations[annotation]
	was := "not set"
	if had {
		was = previous
	}

	if o.clear {
		// A node that still carries the legacy spec.configSource (clusters
		// before 1.24) would fall back to it once the annotation is gone:
		// clearing means both.
		// spec.configSource was the kubelet's alone.
		var legacy *corev1.NodeConfigSource
		if annotation == configSourceAnnotation {
			legacy = node.Spec.ConfigSource
		}
		if !had && legacy == nil {
			_, err := fmt.Fprintf(w, "node %s: annotation %s is not set; nothing to clear\n", o.node, annotation)
			return err
		}
		if err := patchClear(ctx, client, o.node, annotation, had, legacy != nil); err != nil {
			return err
		}
		var removed []string
		if had {
			removed = append(removed, fmt.Sprintf("annotation %s (was %s)", annotation, was))
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
		return missingKeyError(cm, o.key, "; choose one with --key")
	}
	src := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: namespace, Name: name, UID: cm.UID, KubeletConfigKey: o.key,
	}}
	// The rules the component applies to what it reads: refuse to write an
	// assignment it would reject.
	if _, err := source.Resolve(src, cm, o.key); err != nil {
		return fmt.Errorf("assignment of ConfigMap %s/%s would be invalid: %w", namespace, name, err)
	}
	value, err := nodeapi.EncodeAssignment(src)
	if err != nil {
		return err
	}
	if had && previous == value {
		_, err := fmt.Fprintf(w, "node %s: annotation %s is already %s; nothing to change\n", o.node, annotation, value)
		return err
	}
	if err := patchAnnotation(ctx, client, o.node, annotation, &value); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "node %s: set annotation %s=%s (was %s)\n", o.node, annotation, value, was)
	return err
}

func patchAnnotation(ctx context.Context, client kubernetes.Interface, node, key string, value *string) error {
	patch, err := annotationPatch(key, value)
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch annotation %s of node %s: %w", key, node, err)
	}
	return nil
}

// patchClear removes the annotation and, when set, spec.configSource, in one
// JSON merge patch.
func patchClear(ctx context.Context, client kubernetes.Interface, node, key string, annotation, legacy bool) error {
	p := map[string]any{}
	if annotation {
		p["metadata"] = map[string]any{"annotations": map[string]*string{key: nil}}
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

// missingKeyError names the key and lists the keys the ConfigMap has; hint
// ends the message.
func missingKeyError(cm *corev1.ConfigMap, key, hint string) error {
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
	return fmt.Errorf("ConfigMap %s/%s has no data key %q (%s)%s", cm.Namespace, cm.Name, key, present, hint)
}
