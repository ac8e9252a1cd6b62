package checkpoint

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// maxComponentLen bounds a directory name (a UID, a component version):
	// 253 bytes, the longest Kubernetes object name, below NAME_MAX (255).
	maxComponentLen = 253
	// maxFileNameLen bounds a file name (a resourceVersion) so that the
	// temporary file atomicfile.WriteFile creates beside it,
	// TempPrefix + name + "-" + up to 10 random digits, still fits in
	// NAME_MAX: 255 - 5 - 1 - 10 = 239 bytes. Real resourceVersions are
	// decimal integers of at most 20 digits.
	maxFileNameLen = 255 - len(atomicfile.TempPrefix) - 1 - 10
)

// Key identifies a checkpoint: the UID and resourceVersion of a ConfigMap. An
// in-place edit of a ConfigMap changes its resourceVersion, so it is a new
// checkpoint.
type Key struct {
	UID             types.UID
	ResourceVersion string
}

// String returns "<uid>/<resourceVersion>", the form used in bad-config marks.
func (k Key) String() string {
	return string(k.UID) + "/" + k.ResourceVersion
}

// ValidateKey reports whether each of k.UID and k.ResourceVersion is one safe
// path component: not empty, not "." or "..", no "/", "\\", NUL or other
// control character, valid UTF-8, not starting with the temporary-file prefix
// of atomicfile, and at most 253 bytes for the UID (a directory name) and 239
// bytes for the resourceVersion (a file name, which needs room for the name of
// its temporary file). The error names the offending part.
func ValidateKey(k Key) error {
	if err := validateComponent(string(k.UID), maxComponentLen); err != nil {
		return fmt.Errorf("invalid checkpoint key %q: uid: %w", k.String(), err)
	}
	if err := validateComponent(k.ResourceVersion, maxFileNameLen); err != nil {
		return fmt.Errorf("invalid checkpoint key %q: resourceVersion: %w", k.String(), err)
	}
	return nil
}

// validateComponent checks that s can be used as a single file or directory
// name inside a directory we own, without escaping it or colliding with the
// temporary files of atomicfile.
func validateComponent(s string, maxLen int) error {
	switch {
	case s == "":
		return fmt.Errorf("must not be empty")
	case s == "." || s == "..":
		return fmt.Errorf("must not be %q", s)
	case len(s) > maxLen:
		return fmt.Errorf("must be at most %d bytes, got %d", maxLen, len(s))
	case strings.HasPrefix(s, atomicfile.TempPrefix):
		return fmt.Errorf("must not start with the temporary-file prefix %q", atomicfile.TempPrefix)
	case !utf8.ValidString(s):
		return fmt.Errorf("must be valid UTF-8")
	}
	for i, r := range s {
		switch {
		case r == '/' || r == '\\':
			return fmt.Errorf("must not contain %q (byte %d)", r, i)
		case r == 0:
			return fmt.Errorf("must not contain NUL (byte %d)", i)
		case unicode.IsControl(r):
			return fmt.Errorf("must not contain control character %U (byte %d)", r, i)
		}
	}
	return nil
}

// KeyOf returns the key of cm. It does not validate it.
func KeyOf(cm *corev1.ConfigMap) Key {
	return Key{UID: cm.UID, ResourceVersion: cm.ResourceVersion}
}

// KeyFromSource returns the key of the ConfigMap that src references, and
// false if src is nil or references no ConfigMap (the local config). It does
// not validate the key.
func KeyFromSource(src *corev1.NodeConfigSource) (Key, bool) {
	if src == nil || src.ConfigMap == nil {
		return Key{}, false
	}
	return Key{UID: src.ConfigMap.UID, ResourceVersion: src.ConfigMap.ResourceVersion}, true
}
