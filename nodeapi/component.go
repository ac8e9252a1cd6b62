package nodeapi

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultComponent is the component a name-less option or flag means, and
// the one that keeps the proposal's names: the condition ConfigOK, the
// annotations dynconfig.io/config-source and dynconfig.io/config-status.
const DefaultComponent = "kubelet"

// MaxComponentNameLength bounds a component name so that the annotations
// and the condition type built from it stay valid.
const MaxComponentNameLength = 49

// ComponentOrDefault returns component, or DefaultComponent when it is
// empty.
func ComponentOrDefault(component string) string {
	if component == "" {
		return DefaultComponent
	}
	return component
}

// ValidateComponentName checks that a component name is a DNS label (lower
// case letters, digits and '-') of at most MaxComponentNameLength
// characters.
func ValidateComponentName(component string) error {
	if msgs := validation.IsDNS1123Label(component); len(msgs) > 0 {
		return fmt.Errorf("component name %s: %s", echo(component), strings.Join(msgs, "; "))
	}
	if len(component) > MaxComponentNameLength {
		return fmt.Errorf("component name %s: at most %d characters, got %d", echo(component), MaxComponentNameLength, len(component))
	}
	return nil
}

// AssignmentAnnotation is the kubelet's assignment annotation: a
// NodeConfigSource in JSON.
const AssignmentAnnotation = "dynconfig.io/config-source"

// StatusAnnotation is the annotation in which the kubelet publishes its
// ConfigStatus.
const StatusAnnotation = "dynconfig.io/config-status"

// ConditionType is the kubelet's condition type, the proposal's ConfigOK.
const ConditionType corev1.NodeConditionType = "ConfigOK"

// AssignmentAnnotationFor returns a component's assignment annotation:
// AssignmentAnnotation for the kubelet (or an empty name), else
// AssignmentAnnotation + "." + component, so that each component on a Node
// has its own.
func AssignmentAnnotationFor(component string) string {
	return perComponent(AssignmentAnnotation, component)
}

// StatusAnnotationFor returns the annotation that carries a component's
// ConfigStatus: StatusAnnotation for the kubelet (or an empty name), else
// StatusAnnotation + "." + component.
func StatusAnnotationFor(component string) string {
	return perComponent(StatusAnnotation, component)
}

func perComponent(base, component string) string {
	if component == "" || component == DefaultComponent {
		return base
	}
	return base + "." + component
}

// ConditionTypeFor returns a component's condition type: ConfigOK for the
// kubelet (or an empty name), else the component's name in CamelCase
// followed by ConfigOK ("kube-proxy" reports KubeProxyConfigOK).
func ConditionTypeFor(component string) corev1.NodeConditionType {
	if component == "" || component == DefaultComponent {
		return ConditionType
	}
	var b strings.Builder
	upper := true
	for _, r := range component {
		if r == '-' {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return corev1.NodeConditionType(b.String() + string(ConditionType))
}

// defaultPayloadKeys are the ConfigMap data keys of the components whose
// key is known: the kubelet's is "kubelet" (the proposal's), kube-proxy's
// "config.conf" (what kubeadm's kube-proxy ConfigMap uses).
var defaultPayloadKeys = map[string]string{
	DefaultComponent: "kubelet",
	"kube-proxy":     "config.conf",
}

// DefaultPayloadKey returns the default payload key of a component (an
// empty name is DefaultComponent); ok is false for a component whose key is
// not known, which must then be given explicitly.
func DefaultPayloadKey(component string) (key string, ok bool) {
	key, ok = defaultPayloadKeys[ComponentOrDefault(component)]
	return key, ok
}

// KnownComponents lists the components with a default payload key, sorted,
// for messages ("kube-proxy, kubelet").
func KnownComponents() string {
	names := make([]string, 0, len(defaultPayloadKeys))
	for c := range defaultPayloadKeys {
		names = append(names, c)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// PayloadKeyOf returns the payload key an assignment names: its
// kubeletConfigKey when set, else defaultKey.
func PayloadKeyOf(src *corev1.NodeConfigSource, defaultKey string) string {
	if src != nil && src.ConfigMap != nil && src.ConfigMap.KubeletConfigKey != "" {
		return src.ConfigMap.KubeletConfigKey
	}
	return defaultKey
}
