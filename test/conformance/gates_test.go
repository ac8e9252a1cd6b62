package conformance

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dynconfig/dynconfig/test/conformance/kubeletgates"
	"github.com/dynconfig/dynconfig/test/conformance/kubeproxygates"
)

// TestGeneratedGatesAreCurrent fails when
// components/internal/featuregates/zz_generated_gates.go, the gate table the
// kubelet and kube-proxy profiles share, differs from what the generator
// writes from the upstream code this module depends on now (after a
// k8s.io/kubernetes update, or an edit by hand). Fix it with:
// go generate ./components/internal/featuregates
func TestGeneratedGatesAreCurrent(t *testing.T) {
	want, err := kubeletgates.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../components/internal/featuregates/zz_generated_gates.go")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("components/internal/featuregates/zz_generated_gates.go is stale; run `go generate ./components/internal/featuregates` (-generated +checked in):\n%s", diff)
	}
}

// TestKubeletGateSetMatchesKubelet checks the generator's view of the
// kubelet's gates against what the kubelet does with featureGates maps: a
// name the table has is accepted at its default, one it does not have is
// rejected, a locked gate cannot move.
func TestKubeletGateSetMatchesKubelet(t *testing.T) {
	gates := kubeletgates.Gates()
	if len(gates) < 100 {
		t.Fatalf("only %d gates: the kubelet's gates are not registered", len(gates))
	}
	for _, g := range gates {
		if g.Stage == kubeletgates.PreAlpha {
			if err := gatesAccepted(map[string]bool{g.Name: true}); err == nil {
				t.Errorf("%s: not available in 1.37, but the kubelet accepts it", g.Name)
			}
			continue
		}
		if len(g.DependsOn) == 0 {
			if err := gatesAccepted(map[string]bool{g.Name: g.Default}); err != nil {
				t.Errorf("%s=%t (its default): the kubelet rejects it: %v", g.Name, g.Default, err)
			}
		}
		if g.Locked {
			if err := gatesAccepted(map[string]bool{g.Name: !g.Default}); err == nil {
				t.Errorf("%s is locked, but the kubelet accepts %t", g.Name, !g.Default)
			}
		}
	}
	if err := gatesAccepted(map[string]bool{"NoSuchGate": true}); err == nil {
		t.Error("the kubelet accepts an unknown gate")
	}
}

// TestKubeletGateRegistrations lists the packages linked into the kubelet
// binary (cmd/kubelet, Linux) and finds those that register feature gates on
// the global gate; kubeletgates must reproduce each (kubeletgates.Registrations),
// or the generated table misses gates the kubelet knows.
func TestKubeletGateRegistrations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the kubelet's ~1500 packages")
	}
	found := gateRegistrations(t, "k8s.io/kubernetes/cmd/kubelet")
	var want []string
	for p := range kubeletgates.Registrations {
		want = append(want, p)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, sortedSet(found)); diff != "" {
		t.Errorf("packages of the kubelet binary that register feature gates (-kubeletgates.Registrations +found):\n%s", diff)
	}
}

// gateRegistrations lists the packages linked into the binary of main
// (Linux) and returns those that register feature gates on the global gate.
func gateRegistrations(t *testing.T, main string) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{range .GoFiles}} {{$.Dir}}/{{.}}{{end}}{{end}}`, main)
	// -e: list what it can even if a package outside the gate registrations
	// lacks a go.sum entry; never -mod=mod, which would rewrite go.sum.
	cmd.Args = slices.Insert(cmd.Args, 3, "-e")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// A registration adds specs to the global gate, or passes it to a
	// function that does (AddFlag and AddMetrics are not registrations).
	registers := regexp.MustCompile(`^\s*[^/\s].*(DefaultMutableFeatureGate\.(Add|AddVersioned|AddDependencies)\(|\b(AddFeatureGates|AddVersionedFeaturesToExistingFeatureGates|Setup\w*FeatureGates)\(.*DefaultMutableFeatureGate)`)
	found := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, file := range fields[1:] {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(src), "\n") {
				if registers.MatchString(l) {
					found[fields[0]] = true
				}
			}
		}
	}
	return found
}

// TestKubeProxyGateRegistrations lists the packages linked into the
// kube-proxy binary (cmd/kube-proxy, Linux) that register feature gates:
// they must be kubeproxygates.Registrations, and every registration the
// generator reproduces (kubeletgates.Registrations) must be one of
// kube-proxy's or one kubeproxygates.KubeletOnly says kube-proxy repeats.
// Together that says kube-proxy's gate set is the shared table's
// (components/internal/featuregates); when it fails, the table misses gates
// kube-proxy knows or holds gates it does not, and the kubelet and
// kube-proxy profiles need separate tables.
func TestKubeProxyGateRegistrations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over kube-proxy's ~1200 packages")
	}
	const separate = "kube-proxy no longer registers the kubelet's gates: the kubelet and kube-proxy profiles need separate gate tables (components/internal/featuregates holds one for both)"
	found := gateRegistrations(t, "k8s.io/kubernetes/cmd/kube-proxy")
	var want []string
	for p := range kubeproxygates.Registrations {
		want = append(want, p)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, sortedSet(found)); diff != "" {
		t.Errorf("packages of the kube-proxy binary that register feature gates (-kubeproxygates.Registrations +found):\n%s\nIf a package listed as found registers gates the kubelet's binary registers too, add it to kubeproxygates.Registrations; else %s", diff, separate)
	}
	for p := range kubeletgates.Registrations {
		if found[p] {
			continue
		}
		if by, ok := kubeproxygates.KubeletOnly[p]; !ok || !found[by] {
			t.Errorf("%s registers gates for the kubelet that kube-proxy may not know: if kube-proxy registers the same ones elsewhere, list it in kubeproxygates.KubeletOnly with that package; else %s", p, separate)
		}
	}
}
