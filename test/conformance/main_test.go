package conformance

import (
	"flag"
	"fmt"
	"github.com/dynconfig/dynconfig/test/kubeletfork"
	"math/rand"
	"os"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/klog/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/test/conformance/kubeletgates"

	// The kubelet binary registers the json log format.
	_ "k8s.io/component-base/logs/json/register"
)

var (
	seedFlag  = flag.Int64("conformance.seed", 0, "run only the generated case with this seed (a failure prints it)")
	casesFlag = flag.Int("conformance.cases", 0, "generated cases per test (0: each test's own count; a tenth of it with -short)")
	goOnFlag  = flag.Bool("conformance.keep-going", false, "run every case instead of stopping at the first that fails")
)

func TestMain(m *testing.M) {
	// The upstream defaulting and validation called here consult the global
	// feature gate: give it the gates the kubelet binary registers.
	kubeletgates.Register()
	// Upstream code logs warnings (setting a GA gate, ...): not test output.
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// forEachCase runs fn once per generated case, each with its own seed
// (base, base+1, ...), or only for -conformance.seed. fn reports a
// difference with t.Errorf; after the first failing case forEachCase stops
// and says how to reproduce it.
func forEachCase(t *testing.T, base int64, n int, fn func(t *testing.T, seed int64, r *rand.Rand)) {
	t.Helper()
	if *casesFlag > 0 {
		n = *casesFlag
	} else if testing.Short() {
		n /= 10
	}
	seeds := make([]int64, n)
	for i := range seeds {
		seeds[i] = base + int64(i)
	}
	if *seedFlag != 0 {
		seeds = []int64{*seedFlag}
	}
	failed := 0
	for _, seed := range seeds {
		ok := t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fn(t, seed, rand.New(rand.NewSource(seed)))
		})
		if !ok {
			failed++
			t.Logf("case seed %d failed; reproduce with: go test ./conformance -run '^%s$' -conformance.seed=%d -v", seed, t.Name(), seed)
			if !*goOnFlag || failed >= 20 {
				t.FailNow()
			}
		}
	}
}

// dump renders a configuration for a failure message.
func dump(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

var scheme = func() *runtime.Scheme {
	s, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		panic(err)
	}
	return s
}()

// upstreamDefault defaults obj as the kubelet does when it loads its config
// file: the scheme's defaulting for v1beta1 (SetObjectDefaults: the v1beta1
// defaults and the resource-list defaults of reservedMemory), then, as
// cmd/kubelet/app loadConfigFile does after decoding, the Linux eviction
// defaults: DefaultEvictionHard when evictionHard is unset, else merged
// under it when mergeDefaultEvictionSettings is true.
func upstreamDefault(obj *kubeletv1beta1.KubeletConfiguration) {
	// The hollow-kubelet fork's profile is exactly that defaulting.
	kubeletfork.Profile{}.Default(obj)
}

// toInternal converts a v1beta1 configuration to the kubelet's internal type
// through the kubelet's scheme, as the kubelet does after decoding.
func toInternal(t *testing.T, obj *kubeletv1beta1.KubeletConfiguration) *kubeletconfig.KubeletConfiguration {
	t.Helper()
	out := &kubeletconfig.KubeletConfiguration{}
	if err := scheme.Convert(obj.DeepCopy(), out, nil); err != nil {
		t.Fatalf("converting to the internal type: %v", err)
	}
	return out
}

// gateNames are the gates the generators draw from: every gate the kubelet
// knows, with the ones kubelet defaulting and validation consult listed
// again so that they come up often.
var (
	knownGates = kubeletgates.Gates()
	gateByName = func() map[string]kubeletgates.Gate {
		m := map[string]kubeletgates.Gate{}
		for _, g := range knownGates {
			m[g.Name] = g
		}
		return m
	}()
	consultedGates = []string{
		"KubeletCrashLoopBackOffMax", "KubeletEnsureSecretPulledImages", "CustomCPUCFSQuotaPeriod",
		"GracefulNodeShutdown", "GracefulNodeShutdownBasedOnPodPriority", "MemoryQoS", "NodeLogQuery",
		"RotateKubeletServerCertificate", "LoggingAlphaOptions", "LoggingBetaOptions", "DefaultPodSysctls",
		"NodeSwap", "ImageMaximumGCAge", kubeletgates.AllAlpha, kubeletgates.AllBeta,
	}
)

// featureGates returns a random featureGates map. With invalid, it may name
// gates the kubelet rejects: unknown names, locked gates moved, gates not
// available in 1.37.
func (g *gen) featureGates(invalid bool) map[string]bool {
	if !g.chance(0.6) {
		return nil
	}
	m := map[string]bool{}
	for n := 1 + g.r.Intn(4); n > 0; n-- {
		var name string
		if g.chance(0.7) {
			name = pick(g, consultedGates...)
		} else {
			name = knownGates[g.r.Intn(len(knownGates))].Name
		}
		m[name] = g.chance(0.5)
	}
	if invalid && g.chance(0.5) {
		switch g.r.Intn(3) {
		case 0:
			m[pick(g, "NoSuchGate", "kubeletCrashLoopBackOffMax", "Logging-Beta-Options")] = true
		case 1:
			var locked []kubeletgates.Gate
			for _, k := range knownGates {
				if k.Locked {
					locked = append(locked, k)
				}
			}
			l := pick(g, locked...)
			m[l.Name] = !l.Default
		case 2:
			var pre []string
			for _, k := range knownGates {
				if k.Stage == kubeletgates.PreAlpha {
					pre = append(pre, k.Name)
				}
			}
			if len(pre) > 0 {
				m[pick(g, pre...)] = true
			}
		}
	}
	return m
}

// gatesAccepted reports whether the kubelet accepts m as its featureGates.
func gatesAccepted(m map[string]bool) error {
	return utilfeature.DefaultMutableFeatureGate.DeepCopy().SetFromMap(m)
}

// validGates draws featureGates maps until the kubelet accepts one (upstream
// defaulting panics on a map it rejects); it gives up with nil.
func (g *gen) validGates() map[string]bool {
	for range 20 {
		m := g.featureGates(false)
		if gatesAccepted(m) == nil {
			return m
		}
	}
	return nil
}

// validGatesFrom draws featureGates maps from the named gates only, until
// the kubelet accepts one; it gives up with nil.
func (g *gen) validGatesFrom(names []string) map[string]bool {
	for range 20 {
		var m map[string]bool
		if g.chance(0.6) {
			m = map[string]bool{}
			for n := 1 + g.r.Intn(4); n > 0; n-- {
				m[pick(g, names...)] = g.chance(0.5)
			}
		}
		if gatesAccepted(m) == nil {
			return m
		}
	}
	return nil
}

// newKubeletGen returns a generator of KubeletConfigurations.
func newKubeletGen(r *rand.Rand, pSet, pBad float64) *gen {
	return &gen{r: r, pSet: pSet, pBad: pBad, pools: kubeletPools(), skip: map[string]bool{"featureGates": true}}
}

// quantityEqual compares quantities by value (cmp cannot see into them).
func quantityEqual(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }

func sortedSet(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cmpOpts compare configurations field for field: quantities by value, NaN
// equal to NaN.
var cmpOpts = []cmp.Option{cmp.Comparer(quantityEqual), cmpopts.EquateNaNs()}
