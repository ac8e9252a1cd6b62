package nodeapi

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxUIDLength bounds the uid of an assigned ConfigMap. The API server
// gives every object a UUID (36 bytes); 128 leaves room for any other
// generator and keeps every message that names the config short.
const MaxUIDLength = 128

// MaxResourceVersionLength bounds an assignment's resourceVersion: the API
// server's are decimal integers of at most 20 digits.
const MaxResourceVersionLength = 64

// maxEcho bounds how much of an input value a message repeats: an
// annotation holds up to 256 KiB, and a message goes into the Node
// condition of every component that reads it and into CLI errors.
const maxEcho = 64

// maxDecodeError bounds the decoder's own message, which can repeat a
// field name of the input.
const maxDecodeError = 256

// echo quotes s for a message (%q: control characters escaped), cut to
// maxEcho bytes with its length said: "\"kube-sys\"... (300000 bytes)".
// Every message of this package that repeats input goes through it.
func echo(s string) string {
	if len(s) <= maxEcho {
		return fmt.Sprintf("%q", s)
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:cut], len(s))
}

// boundMessage cuts a message to max bytes (at a rune boundary), saying so.
func boundMessage(msg string, max int) string {
	if len(msg) <= max {
		return msg
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes, cut)", msg[:cut], len(msg))
}

// boundedError is an error whose message is cut to maxDecodeError bytes
// (boundMessage), for decoder errors that can repeat the input; it unwraps
// to the whole error.
type boundedError struct{ err error }

func (e boundedError) Error() string { return boundMessage(e.err.Error(), maxDecodeError) }
func (e boundedError) Unwrap() error { return e.err }

// bound returns err with its message bounded (boundedError).
func bound(err error) error { return boundedError{err} }

// validateFields checks each field of a ConfigMap reference as the API
// server validates the object it names: the name a DNS subdomain (at most
// 253 bytes, as every ConfigMap name), the namespace a DNS label (at most
// 63), the uid at most MaxUIDLength letters, digits, '-', '_' or '.' (a
// UUID in practice), the resourceVersion, when set, at most
// MaxResourceVersionLength of the same, and the kubeletConfigKey, when
// set, a valid ConfigMap data key. Every value the message repeats is
// bounded (echo).
func validateFields(ref *corev1.ConfigMapNodeConfigSource) error {
	var problems []string
	add := func(field, value string, errs []string) {
		if len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s %s: %s", field, echo(value), strings.Join(errs, "; ")))
		}
	}
	add("name", ref.Name, validation.IsDNS1123Subdomain(ref.Name))
	add("namespace", ref.Namespace, validation.IsDNS1123Label(ref.Namespace))
	add("uid", string(ref.UID), isToken(string(ref.UID), MaxUIDLength))
	if ref.ResourceVersion != "" {
		add("resourceVersion", ref.ResourceVersion, isToken(ref.ResourceVersion, MaxResourceVersionLength))
	}
	if ref.KubeletConfigKey != "" {
		add("kubeletConfigKey", ref.KubeletConfigKey, validation.IsConfigMapKey(ref.KubeletConfigKey))
	}
	if len(problems) > 0 {
		return Invalid("invalid NodeConfigSource.ConfigMap, %s", strings.Join(problems, ", "))
	}
	return nil
}

// isToken checks a uid or resourceVersion: 1 to max bytes of letters,
// digits, '-', '_' and '.', and not "." or "..".
func isToken(s string, max int) []string {
	var errs []string
	if len(s) > max {
		errs = append(errs, fmt.Sprintf("must be no more than %d bytes", max))
	}
	if s == "." || s == ".." {
		errs = append(errs, `must not be "." or ".."`)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			errs = append(errs, "must consist of letters, digits, '-', '_' or '.'")
			break
		}
	}
	return errs
}
