package conformance

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/components/kubelet"
)

// defaultsCases is how many configurations TestKubeletDefaults generates
// per run (a tenth with -short).
const defaultsCases = 3000

// TestKubeletDefaults: on generated configurations, kubelet.Default equals
// the kubelet's own defaulting (upstreamDefault: the v1beta1 defaults of the
// kubelet's scheme and the Linux eviction defaults applied when the config
// file is loaded), field for field. The generator sets each field, nested
// ones included, with probability 0.3 and otherwise leaves it unset; the
// featureGates map is one the kubelet accepts (upstream defaulting panics on
// any other).
//
// No difference is allowed: none of the kubelet's defaults depend on the host
// (the Linux values are the ones compared). See components/kubelet/doc.go.
func TestKubeletDefaults(t *testing.T) {
	forEachCase(t, 1_000_000, defaultsCases, func(t *testing.T, seed int64, r *rand.Rand) {
		g := newKubeletGen(r, 0.3, 0.2)
		in := &kubeletv1beta1.KubeletConfiguration{}
		g.fill(in)
		in.FeatureGates = g.validGates()

		want := in.DeepCopy()
		upstreamDefault(want)
		got := in.DeepCopy()
		kubelet.Default(got)

		if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
			t.Errorf("seed %d: kubelet.Default differs from the kubelet's defaulting (-kubelet +ours):\n%s\ninput:\n%s", seed, diff, dump(in))
		}
	})
}
