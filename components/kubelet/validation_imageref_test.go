package kubelet

import (
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// TestAllowlistPatternProblem pins the exact message for each kind of bad
// preloadedImagesVerificationAllowlist entry, and the entries accepted next
// to them. The cases marked "was accepted" passed the hand-written
// approximation of the reference grammar that this check replaced; upstream
// (reference.Parse in the kubelet's image pull manager) rejects them.
func TestAllowlistPatternProblem(t *testing.T) {
	const badName = "must be a container image name: "
	digest := "sha256:" + strings.Repeat("a", 64)
	cases := []struct{ pattern, want string }{
		// Accepted.
		{"pause", ""},
		{"registry.k8s.io/pause", ""},
		{"registry.k8s.io/*", ""},
		{"localhost:5000/team/app", ""},
		{"Registry.Example.COM/app", ""}, // upper case is allowed in the host
		{"UPPER/app", ""},                // the first component counts as a host
		{"quay.io/org/some_app-2.x", ""},
		{"quay.io/a__b", ""},
		{"[fd00::1]:5000/app", ""},
		{"//*", ""}, // wildcards are plain prefixes upstream
		{"registry.k8s.io/" + strings.Repeat("a", 255), ""},

		// Rejected before parsing.
		{"", "must not be empty"},
		{" registry.k8s.io/pause", "must not have leading or trailing white space"},
		{"registry.k8s.io/pause\t", "must not have leading or trailing white space"},
		{"*", `the only wildcard allowed is a trailing "/*"`},
		{"registry.k8s.io/pa*", `the only wildcard allowed is a trailing "/*"`},
		{"quay.io/*/app", `the only wildcard allowed is a trailing "/*"`},
		{"registry.k8s.io/**", `the only wildcard allowed is a trailing "/*"`},
		{"/*", `a wildcard pattern needs at least a registry host before "/*"`},

		// Rejected by the reference grammar.
		{"registry.k8s.io/pause:3.10", "must be an image name without tag"},
		{"localhost:5000", "must be an image name without tag"},
		{"registry.k8s.io/pause@" + digest, "must be an image name without digest"},
		{"registry.k8s.io/pause:3.10@" + digest, "must be an image name without digest"},
		{"registry.k8s.io/pause@sha256:abc", badName + "invalid reference format"},
		{"registry.k8s.io/pause@sha256:" + strings.Repeat("A", 64), badName + "invalid checksum digest format"},
		{"registry.k8s.io/", badName + "invalid reference format"},
		{"registry.k8s.io//pause", badName + "invalid reference format"},
		{"registry.k8s.io/Pause", badName + "repository name must be lowercase"},
		{"a/b:c:d", badName + "invalid reference format"},
		{"héllo", badName + "invalid reference format"},
		{"registry.k8s.io/" + strings.Repeat("a", 256), badName + "repository name must not be more than 255 characters"},
		{"-host/app", badName + "invalid reference format"},
		// Were accepted by the approximation.
		{"registry.k8s.io/a._b", badName + "invalid reference format"},
		{"registry.k8s.io/a___b", badName + "invalid reference format"},
		{"registry.k8s.io/a.-b", badName + "invalid reference format"},
		{"quay.io/" + strings.Repeat("a", 256), badName + "repository name must not be more than 255 characters"},
	}
	for _, tc := range cases {
		if got := allowlistPatternProblem(tc.pattern); got != tc.want {
			t.Errorf("allowlistPatternProblem(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}

// FuzzAllowlistPattern feeds arbitrary text to the allowlist check (it comes
// from config files and ConfigMaps): it must not panic, and what it accepts
// must be what the kubelet accepts: a plain name that reference.Parse reads
// back unchanged with neither tag nor digest, or a "/*" prefix with no other
// '*'.
func FuzzAllowlistPattern(f *testing.F) {
	for _, seed := range []string{
		"pause", "registry.k8s.io/pause", "registry.k8s.io/*", "localhost:5000", "a/b:c@sha256:" + strings.Repeat("0", 64),
		" x", "*", "/*", "//*", "Registry.Example.COM/app", "a._b", "[::1]:5000/app",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		msg := allowlistPatternProblem(pattern)
		if msg != "" {
			return
		}
		if strings.TrimSpace(pattern) != pattern {
			t.Fatalf("accepted %q with surrounding white space", pattern)
		}
		if name, ok := strings.CutSuffix(pattern, "/*"); ok {
			if name == "" || strings.Contains(name, "*") {
				t.Fatalf("accepted wildcard %q", pattern)
			}
			return
		}
		ref, err := reference.Parse(pattern)
		if err != nil {
			t.Fatalf("accepted %q, which reference.Parse rejects: %v", pattern, err)
		}
		if _, ok := ref.(reference.Tagged); ok {
			t.Fatalf("accepted tagged %q", pattern)
		}
		if _, ok := ref.(reference.Digested); ok {
			t.Fatalf("accepted digested %q", pattern)
		}
		if ref.String() != pattern {
			t.Fatalf("accepted %q, which reads back as %q", pattern, ref.String())
		}
	})
}
