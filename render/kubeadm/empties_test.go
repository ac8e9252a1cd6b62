package kubeadm

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// TestRenderKeepsExplicitEmpties checks that Render writes a non-nil empty
// map or list: evictionHard: {} is "no hard eviction" to the kubelet, and
// left out of the patch the kubelet's default thresholds would apply.
func TestRenderKeepsExplicitEmpties(t *testing.T) {
	cfg := &kubeletv1beta1.KubeletConfiguration{
		MaxPods:         50,
		EvictionHard:    map[string]string{},
		FeatureGates:    map[string]bool{},
		ClusterDNS:      []string{},
		TLSCipherSuites: []string{},
	}
	cfg.Logging.VModule = logsapi.VModuleConfiguration{}
	p, err := Render(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDNS: []
evictionHard: {}
featureGates: {}
logging:
  vmodule: []
maxPods: 50
tlsCipherSuites: []
`
	if diff := cmp.Diff(want, string(p.Content)); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}

// TestExplicitEmptiesRoundTrip applies patches with explicit empties over
// kubeadm's generated configuration, with both renderers and both patch
// types: the kubelet must get the empty map or list, not kubeadm's value
// and not nothing (which would give it its defaults).
func TestExplicitEmptiesRoundTrip(t *testing.T) {
	base, err := os.ReadFile(defaultsFixture)
	if err != nil {
		t.Fatal(err)
	}
	doc := "evictionHard: {}\nclusterDNS: []\nevictionSoft: {}\n"
	typed := &kubeletv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{},
		ClusterDNS:   []string{},
		EvictionSoft: map[string]string{},
	}
	for _, opts := range []Options{{}, {PatchType: Strategic}, {Suffix: "0-user", PatchType: Merge}} {
		fromDoc, err := RenderDocument([]byte(doc), opts)
		if err != nil {
			t.Fatal(err)
		}
		fromTyped, err := Render(typed, opts)
		if err != nil {
			t.Fatal(err)
		}
		for what, p := range map[string]*Patch{"RenderDocument": fromDoc, "Render": fromTyped} {
			got := applyLikeKubeadm(t, base, p)
			if got.EvictionHard == nil || len(got.EvictionHard) != 0 {
				t.Errorf("%s %s: evictionHard = %#v, want {}\n%s", what, p.Name, got.EvictionHard, p.Content)
			}
			if got.EvictionSoft == nil || len(got.EvictionSoft) != 0 {
				t.Errorf("%s %s: evictionSoft = %#v, want {}\n%s", what, p.Name, got.EvictionSoft, p.Content)
			}
			if got.ClusterDNS == nil || len(got.ClusterDNS) != 0 {
				t.Errorf("%s %s: clusterDNS = %#v, want [] (not kubeadm's 10.96.0.10)\n%s", what, p.Name, got.ClusterDNS, p.Content)
			}
		}
	}
}

// TestRenderDocumentNullEntries checks that null as a map value or a list
// element is an error naming its path: dropping it would turn
// evictionHard: {memory.available: null} into evictionHard: {}, or leave
// the map out, and neither is what the document says.
func TestRenderDocumentNullEntries(t *testing.T) {
	tests := []struct {
		doc  string
		want string
	}{
		{"evictionHard:\n  memory.available: null\n",
			"kubeadm: document: evictionHard[memory.available]: null is not a value: remove the key to leave it out (an empty map is {})"},
		{"evictionHard: {memory.available: null, nodefs.available: 5%}\nfeatureGates: {A: ~}\n",
			"kubeadm: document: evictionHard[memory.available]: null is not a value: remove the key to leave it out (an empty map is {})\n" +
				"kubeadm: document: featureGates[A]: null is not a value: remove the key to leave it out (an empty map is {})"},
		{"clusterDNS: [null]\n",
			"kubeadm: document: clusterDNS[0]: null is not a value: remove the element (an empty list is [])"},
		{"staticPodURLHeader: {X-Token: [a, null]}\n",
			"kubeadm: document: staticPodURLHeader[X-Token][1]: null is not a value: remove the element (an empty list is [])"},
	}
	for _, tt := range tests {
		p, err := RenderDocument([]byte(tt.doc), Options{})
		if err == nil {
			t.Errorf("RenderDocument(%q) succeeded, want an error; patch:\n%s", tt.doc, p.Content)
			continue
		}
		if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
			t.Errorf("RenderDocument(%q) error (-want +got):\n%s", tt.doc, diff)
		}
	}

	// null as a field's whole value still means "not set".
	p, err := RenderDocument([]byte("evictionHard: null\nauthentication: {x509: null}\nmaxPods: 5\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 5\n"
	if diff := cmp.Diff(want, string(p.Content)); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}
