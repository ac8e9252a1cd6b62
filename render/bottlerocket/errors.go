package bottlerocket

import (
	"fmt"
	"strings"
)

// UnsupportedFieldsError reports the KubeletConfiguration fields that are set
// but have no Bottlerocket setting. Render finds all of them in one pass, so
// a user fixes the whole list at once instead of one field per attempt.
type UnsupportedFieldsError struct {
	// Fields holds the top-level JSON names of the offending fields, sorted.
	Fields []string
}

// Error lists the fields, e.g. "unsupported KubeletConfiguration fields for
// Bottlerocket: readOnlyPort, staticPodPath".
func (e *UnsupportedFieldsError) Error() string {
	return "unsupported KubeletConfiguration fields for Bottlerocket: " + strings.Join(e.Fields, ", ")
}

// InvalidValueError reports a field that Bottlerocket does support but whose
// value has no Bottlerocket spelling: a key or value outside what the
// Bottlerocket API accepts for that setting, such as an eviction signal it
// does not know or a negative duration. The Bottlerocket API would refuse such
// a value at boot, which is the worst moment to find out.
type InvalidValueError struct {
	// Field is the JSON path of the value, e.g. "evictionHard[memory.available]".
	Field string
	// Setting is the full Bottlerocket setting, e.g. "settings.kubernetes.eviction-hard".
	Setting string
	// Value is the offending value (or map key) as the user wrote it.
	Value string
	// Reason says what Bottlerocket accepts instead.
	Reason string
}

// Error names the field, the setting and the reason.
func (e *InvalidValueError) Error() string {
	return fmt.Sprintf("%s: cannot be expressed as Bottlerocket %s: %s", e.Field, e.Setting, e.Reason)
}
