package nodeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The proposal's wording for an assignment with no subfield set.
const allNilMessage = "invalid NodeConfigSource, exactly one subfield must be non-nil, but all were nil"

// InvalidError is an assignment that breaks the NodeConfigSource rules, or
// that cannot be resolved to a ConfigMap with the payload. Its message is
// the cause a node reports in its condition.
type InvalidError struct {
	// Message says what is wrong, in the proposal's words where it has them.
	Message string
}

// Error returns the message.
func (e *InvalidError) Error() string { return e.Message }

// Invalid returns an *InvalidError with a formatted message.
func Invalid(format string, args ...any) error {
	return &InvalidError{Message: fmt.Sprintf(format, args...)}
}

// DecodeAssignment strictly decodes an assignment annotation value: a JSON
// NodeConfigSource with no unknown or duplicate fields, case-sensitive
// names and nothing after the object. A value that is blank (only white
// space) or the JSON literal null is "no assignment": nil and no error. The
// result is not validated (Validate); ParseAssignment does both.
func DecodeAssignment(value string) (*corev1.NodeConfigSource, error) {
	data := bytes.TrimSpace([]byte(value))
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var src corev1.NodeConfigSource
	if err := decodeStrict(data, &src); err != nil {
		return nil, err
	}
	return &src, nil
}

// Validate checks the rules that need no API server: exactly one subfield
// is set (today there is one, ConfigMap), the ConfigMap reference's uid,
// namespace and name are non-empty, and each field has the form the API
// server gives it (the name a DNS subdomain, the namespace a DNS label, the
// uid and resourceVersion short tokens, the kubeletConfigKey a ConfigMap
// key; see validateFields), so that no value of any length or content is
// copied into a condition or a path. A nil src is the empty assignment and
// is valid. The returned error is an *InvalidError whose message repeats
// at most a bounded prefix of each value.
func Validate(src *corev1.NodeConfigSource) error {
	if src == nil {
		return nil
	}
	if src.ConfigMap == nil {
		return Invalid(allNilMessage)
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
		return Invalid("invalid NodeConfigSource.ConfigMap, all of uid, namespace and name must be non-empty, missing: %s",
			strings.Join(missing, ", "))
	}
	return validateFields(src.ConfigMap)
}

// ParseAssignment decodes (DecodeAssignment) and validates (Validate) an
// assignment annotation value: what a node would act on. nil and no error
// mean "no assignment". Every error is an *InvalidError.
func ParseAssignment(value string) (*corev1.NodeConfigSource, error) {
	src, err := DecodeAssignment(value)
	if err != nil {
		return nil, Invalid("invalid NodeConfigSource: %s", boundMessage(err.Error(), maxDecodeError))
	}
	if err := Validate(src); err != nil {
		return nil, err
	}
	return src, nil
}

// ReadAssignment returns the assignment a Node carries in the annotation
// key (AssignmentAnnotationFor of a component), decoded and validated as
// ParseAssignment does; when the annotation is absent and key is the
// kubelet's, the legacy spec.configSource (the removed feature's field,
// which named the kubelet's config); else nil. A blank or "null" annotation
// is an explicit "no assignment" and hides spec.configSource. set is false
// when neither is present. Every error is an *InvalidError; a decoding
// error names the annotation and the Node.
func ReadAssignment(node *corev1.Node, key string) (src *corev1.NodeConfigSource, set bool, err error) {
	if v, ok := node.Annotations[key]; ok {
		src, err := DecodeAssignment(v)
		if err != nil {
			return nil, true, Invalid("invalid NodeConfigSource in annotation %s of Node %s: %s", key, node.Name, boundMessage(err.Error(), maxDecodeError))
		}
		if err := Validate(src); err != nil {
			return nil, true, err
		}
		return src, true, nil
	}
	if key != AssignmentAnnotation || node.Spec.ConfigSource == nil {
		return nil, false, nil
	}
	src = node.Spec.ConfigSource.DeepCopy()
	return src, true, Validate(src)
}

// EncodeAssignment encodes a valid assignment as an annotation value. A nil
// src has no value: the annotation is removed to assign nothing.
func EncodeAssignment(src *corev1.NodeConfigSource) (string, error) {
	if src == nil {
		return "", Invalid("no assignment to encode: remove the annotation instead")
	}
	if err := Validate(src); err != nil {
		return "", err
	}
	b, err := json.Marshal(src)
	if err != nil {
		return "", fmt.Errorf("encoding the NodeConfigSource: %w", err)
	}
	return string(b), nil
}

// DescribeSource names a config for a message: "local" for nil (or a source
// without a ConfigMap), else "ConfigMap <namespace>/<name> (UID: <uid>,
// resourceVersion: <rv>)", leaving out an empty resourceVersion.
func DescribeSource(src *corev1.NodeConfigSource) string {
	if src == nil || src.ConfigMap == nil {
		return "local"
	}
	cm := src.ConfigMap
	if cm.ResourceVersion == "" {
		return fmt.Sprintf("ConfigMap %s/%s (UID: %s)", cm.Namespace, cm.Name, cm.UID)
	}
	return fmt.Sprintf("ConfigMap %s/%s (UID: %s, resourceVersion: %s)", cm.Namespace, cm.Name, cm.UID, cm.ResourceVersion)
}
