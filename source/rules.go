package source

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The proposal's wording for an assignment with no subfield set.
const allNilMessage = "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"

// InvalidError is an assignment that breaks the NodeConfigSource rules, or
// that cannot be resolved to a ConfigMap with the payload. Its message is
// the cause reported in the ConfigOK condition.
type InvalidError struct {
	// Message says what is wrong, in the proposal's words where it has them.
	Message string
}

// Error returns the message.
func (e *InvalidError) Error() string { return e.Message }

func invalid(format string, args ...any) error {
	return &InvalidError{Message: fmt.Sprintf(format, args...)}
}

// IsEmpty reports whether src is the empty assignment (nil): run the local
// config.
func IsEmpty(src *corev1.NodeConfigSource) bool { return src == nil }

// Validate checks the rules that need no API server: exactly one subfield
// is set (today there is one, ConfigMap), and the ConfigMap reference's
// uid, namespace and name are non-empty. A nil src is the empty assignment
// and is valid. The returned error is an *InvalidError.
func Validate(src *corev1.NodeConfigSource) error {
	if src == nil {
		return nil
	}
	if src.ConfigMap == nil {
		return invalid(allNilMessage)
	}
	var missing []string
	if src.ConfigMap.UID == "" {
		missing = append(missing, "uid")
	}
	if src.ConfigMap.Namespace == "" {
		missing = append(missing, "namespace")
	}
	if src.ConfigMap.Name == "" {
		missing = append(missing, "name")
	}
	if len(missing) > 0 {
		return invalid("invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: %s",
			strings.Join(missing, ", "))
	}
	return nil
}

// PayloadKey is the ConfigMap data key that holds the config: the
// assignment's kubeletConfigKey when set, else defaultKey (the profile's).
func PayloadKey(src *corev1.NodeConfigSource, defaultKey string) string {
	if src != nil && src.ConfigMap != nil && src.ConfigMap.KubeletConfigKey != "" {
		return src.ConfigMap.KubeletConfigKey
	}
	return defaultKey
}

// Resolve checks the rules that need the fetched object — the uid and the
// namespace/name refer to the same ConfigMap, and the payload key exists —
// and returns the assignment completed with the object's resourceVersion and
// the payload key. src must have passed Validate; cm is what namespace/name
// resolved to (nil: it does not exist).
func Resolve(src *corev1.NodeConfigSource, cm *corev1.ConfigMap, defaultKey string) (*corev1.NodeConfigSource, error) {
	if err := Validate(src); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, nil
	}
	ref := src.ConfigMap
	if cm == nil {
		return nil, invalid("ConfigMap %s/%s does not exist", ref.Namespace, ref.Name)
	}
	if cm.Namespace != ref.Namespace || cm.Name != ref.Name {
		return nil, invalid("ConfigMap %s/%s resolved to %s/%s", ref.Namespace, ref.Name, cm.Namespace, cm.Name)
	}
	if cm.UID != ref.UID {
		return nil, invalid("invalid NodeConfigSource.ConfigMap, uid %s and %s/%s do not refer to the same object (its uid is %s)",
			ref.UID, ref.Namespace, ref.Name, cm.UID)
	}
	key := PayloadKey(src, defaultKey)
	if _, ok := cm.Data[key]; !ok {
		return nil, invalid("ConfigMap %s/%s (UID: %s) has no key %q", ref.Namespace, ref.Name, ref.UID, key)
	}
	out := src.DeepCopy()
	out.ConfigMap.ResourceVersion = cm.ResourceVersion
	out.ConfigMap.KubeletConfigKey = key
	return out, nil
}
