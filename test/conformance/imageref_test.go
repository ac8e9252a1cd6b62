package conformance

import (
	"math/rand"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/images/pullmanager"

	"github.com/dynconfig/dynconfig/components/kubelet"
)

// allowlistCases is how many generated cases TestKubeletAllowlistPatterns
// runs (a tenth with -short); each checks allowlistPatternsPerCase entries.
const (
	allowlistCases           = 2000
	allowlistPatternsPerCase = 4
)

// TestKubeletAllowlistPatterns: on generated preloadedImagesVerificationAllowlist
// entries, near the image reference grammar on both sides, kubelet.Validate
// rejects an entry exactly when the kubelet's image pull manager does
// (pullmanager.ValidateAllowlistImagesPatterns, which the kubelet's
// ValidateKubeletConfiguration calls). Each entry is checked alone, since the
// kubelet stops at the first bad one.
func TestKubeletAllowlistPatterns(t *testing.T) {
	var accepted, rejected int
	forEachCase(t, 3_000_000, allowlistCases, func(t *testing.T, seed int64, r *rand.Rand) {
		for range allowlistPatternsPerCase {
			p := allowlistPattern(r)
			kc := &kubeletv1beta1.KubeletConfiguration{}
			kubelet.Default(kc)
			kc.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.NeverVerifyAllowlistedImages
			kc.PreloadedImagesVerificationAllowlist = []string{p}
			var ours []string
			for _, e := range kubelet.Validate(kc) {
				ours = append(ours, e.Error())
			}
			upstream := pullmanager.ValidateAllowlistImagesPatterns([]string{p})
			switch {
			case upstream == nil && len(ours) > 0:
				t.Errorf("seed %d: pattern %q: the kubelet accepts it, we reject it: %v", seed, p, ours)
			case upstream != nil && len(ours) == 0:
				t.Errorf("seed %d: pattern %q: the kubelet rejects it (%v), we accept it", seed, p, upstream)
			case upstream != nil && (len(ours) != 1 || !strings.HasPrefix(ours[0], "preloadedImagesVerificationAllowlist[0]: ")):
				t.Errorf("seed %d: pattern %q: want one error on preloadedImagesVerificationAllowlist[0], got %v", seed, p, ours)
			case upstream == nil:
				accepted++
			default:
				rejected++
			}
		}
	})
	t.Logf("%d patterns accepted, %d rejected by both", accepted, rejected)
	if n := accepted + rejected; n > 100 && (accepted < n/5 || rejected < n/5) {
		t.Errorf("generator out of balance: %d accepted, %d rejected", accepted, rejected)
	}
}

// allowlistPattern makes an entry close to the image reference grammar: a
// host or not, path components from an alphabet that includes the separators
// and characters the grammar refuses, sometimes a tag, a digest, a trailing
// "/*", white space or a stray '*'.
func allowlistPattern(r *rand.Rand) string {
	g := &gen{r: r}
	var b strings.Builder
	if g.chance(0.6) {
		b.WriteString(pick(g, "registry.k8s.io", "localhost", "localhost:5000", "Quay.IO", "[fd00::1]:5000",
			"my-host", "-bad", "host_name", "a.b.c:99999", "UPPER", "x", ""))
		b.WriteString("/")
	}
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		if i > 0 {
			b.WriteString("/")
		}
		b.WriteString(component(g))
	}
	if g.chance(0.1) {
		b.WriteString(pick(g, ":v1.2", ":latest", ":", ":-x", ":"+strings.Repeat("t", 129)))
	}
	if g.chance(0.08) {
		b.WriteString(pick(g, "@sha256:"+strings.Repeat("ab", 32), "@sha256:abc", "@md5:"+strings.Repeat("0", 32),
			"@sha256:"+strings.Repeat("AB", 32)))
	}
	if g.chance(0.2) {
		b.WriteString(pick(g, "/*", "/*", "*", "/**"))
	}
	s := b.String()
	if g.chance(0.03) {
		s = pick(g, " ", "\t") + s
	}
	if g.chance(0.03) {
		s += " "
	}
	if g.chance(0.01) {
		s = strings.Repeat("a", 250+r.Intn(10))
	}
	return s
}

// component is one path component: mostly grammar-conforming lower-case
// runs joined by the allowed separators, sometimes with a character or
// separator the grammar refuses.
func component(g *gen) string {
	var b strings.Builder
	for i, n := 0, 1+g.r.Intn(3); i < n; i++ {
		if i > 0 {
			b.WriteString(pick(g, ".", "_", "__", "-", "--", "___", "._", "/"))
		}
		b.WriteString(pick(g, "a", "pause", "team", "x9", "0"))
	}
	if g.chance(0.15) {
		s := []byte(b.String())
		s[g.r.Intn(len(s))] = pick[byte](g, 'A', 'Z', '-', '.', '_', '*', '@', ':', ' ', 0xc3)
		return string(s)
	}
	return b.String()
}
