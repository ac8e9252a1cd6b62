package kubeadm

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// FuzzRenderDocument feeds arbitrary documents to RenderDocument. It must
// not panic; an accepted document must give a patch that kubeadm's strategic
// merge applies over its generated configuration, whose result decodes
// strictly, and rendering the patch again must give the same bytes.
func FuzzRenderDocument(f *testing.F) {
	for _, seed := range []string{
		"{}",
		"maxPods: 50\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nrotateCertificates: false\n",
		"evictionHard:\n  memory.available: 100Mi\nclusterDNS: [10.0.0.10]\n",
		"authentication:\n  webhook:\n    cacheTTL: 5m\n  x509: null\n",
		`{"featureGates":{"A":true},"systemReserved":{},"maxPods":null}`,
		"staticPodURLHeader:\n  a: [b, c]\n",
		"maxPod: 1\n",
		"evictionHard: {}\nclusterDNS: []\nlogging: {vmodule: []}\n",
		"evictionHard: {memory.available: null}\nregisterWithTaints: [{key: a, effect: NoSchedule, value: null}]\n",
		"staticPodURLHeader: {a: [null]}\nfeatureGates: {}\n",
		"- 1\n",
	} {
		f.Add([]byte(seed))
	}
	base, err := os.ReadFile(defaultsFixture)
	if err != nil {
		f.Fatal(err)
	}
	baseJSON, err := yaml.YAMLToJSON(base)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := RenderDocument(doc, Options{})
		if err != nil {
			return
		}
		pj, err := yaml.YAMLToJSON(p.Content)
		if err != nil {
			t.Fatalf("patch is not YAML: %v\n%s", err, p.Content)
		}
		out, err := strategicpatch.StrategicMergePatch(baseJSON, pj, kubeletv1beta1.KubeletConfiguration{})
		if err != nil {
			t.Fatalf("kubeadm could not apply the patch: %v\n%s", err, p.Content)
		}
		var cfg kubeletv1beta1.KubeletConfiguration
		if err := yaml.UnmarshalStrict(out, &cfg); err != nil {
			t.Fatalf("patched configuration does not decode strictly: %v\n%s", err, out)
		}
		again, err := RenderDocument(p.Content, Options{})
		if err != nil {
			t.Fatalf("the patch does not render again: %v\n%s", err, p.Content)
		}
		if diff := cmp.Diff(string(p.Content), string(again.Content)); diff != "" {
			t.Fatalf("rendering is not idempotent (-first +second):\n%s", diff)
		}
	})
}
