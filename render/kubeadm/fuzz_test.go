package kubeadm

import (
	"encoding/json"
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
// strictly, every top-level field the document sets to 0, false or "" must
// be in the patch with that value (an explicit zero is never dropped), and
// rendering the patch again must give the same bytes.
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
		"maxPods: 0\nrotateCertificates: false\nserverTLSBootstrap: false\nstaticPodPath: \"\"\n",
		`{"eventBurst":0,"cpuCFSQuota":false,"podPidsLimit":0,"authentication":{"anonymous":{"enabled":false}},"syncFrequency":"0s"}`,
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
		checkZerosKept(t, doc, pj)
		again, err := RenderDocument(p.Content, Options{})
		if err != nil {
			t.Fatalf("the patch does not render again: %v\n%s", err, p.Content)
		}
		if diff := cmp.Diff(string(p.Content), string(again.Content)); diff != "" {
			t.Fatalf("rendering is not idempotent (-first +second):\n%s", diff)
		}
	})
}

// checkZerosKept checks that every top-level field doc sets to 0, false or
// "" is in the patch (patchJSON) with the same value.
func checkZerosKept(t *testing.T, doc, patchJSON []byte) {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return
	}
	var in, out map[string]any
	if json.Unmarshal(j, &in) != nil || json.Unmarshal(patchJSON, &out) != nil {
		return
	}
	for k, v := range in {
		if k == "apiVersion" || k == "kind" || (v != false && v != float64(0) && v != "") {
			continue
		}
		if got, ok := out[k]; !ok || got != v {
			t.Errorf("%s: %#v in the document, %#v in the patch", k, v, got)
		}
	}
}
