package merge

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestDecodeErrors pins the exact text of strict decoding errors: every
// problem of a document at once, each with the document name and path.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string
	}{
		{
			name: "unknown field at the top",
			data: kubeletHeader + "adress: 10.0.0.1\n",
			want: `kubelet.yaml: unknown field "adress"`,
		},
		{
			name: "unknown field at depth",
			data: kubeletHeader + "authentication:\n  x509:\n    clientCAFle: /etc/ca.crt\n",
			want: `kubelet.yaml: authentication.x509: unknown field "clientCAFle"`,
		},
		{
			name: "unknown field in a list element",
			data: kubeletHeader + "registerWithTaints:\n- key: a\n  efect: NoSchedule\n",
			want: `kubelet.yaml: registerWithTaints[0]: unknown field "efect"`,
		},
		{
			name: "field names are case-sensitive",
			data: kubeletHeader + "Port: 10250\n",
			want: `kubelet.yaml: unknown field "Port"`,
		},
		{
			name: "duplicate field",
			data: kubeletHeader + "port: 10250\nport: 10251\n",
			want: `kubelet.yaml: duplicate field "port"`,
		},
		{
			name: "duplicate field at depth",
			data: kubeletHeader + "authentication:\n  webhook:\n    enabled: true\n    enabled: false\n",
			want: `kubelet.yaml: authentication.webhook: duplicate field "enabled"`,
		},
		{
			name: "duplicate map key",
			data: kubeletHeader + "evictionHard:\n  memory.available: 100Mi\n  memory.available: 200Mi\n",
			want: `kubelet.yaml: evictionHard: duplicate field "memory.available"`,
		},
		{
			name: "string for a number",
			data: kubeletHeader + "port: ten\n",
			want: `kubelet.yaml: port: expected int32, got string "ten"`,
		},
		{
			name: "number for a string",
			data: kubeletHeader + "clusterDomain: 42\n",
			want: `kubelet.yaml: clusterDomain: expected string, got number 42 (quote the value to make it a string)`,
		},
		{
			name: "fraction for an integer",
			data: kubeletHeader + "maxPods: 1.5\n",
			want: `kubelet.yaml: maxPods: expected int32, got number 1.5`,
		},
		{
			name: "integer out of range",
			data: kubeletHeader + "port: 99999999999\n",
			want: `kubelet.yaml: port: number 99999999999 overflows int32`,
		},
		{
			name: "wrong type in a list",
			data: kubeletHeader + "tlsCipherSuites:\n- TLS_A\n- TLS_B\n- {name: x}\n",
			want: `kubelet.yaml: tlsCipherSuites[2]: expected string, got object`,
		},
		{
			name: "list for an object",
			data: kubeletHeader + "authentication: [a]\n",
			want: `kubelet.yaml: authentication: expected object, got list`,
		},
		{
			name: "wrong type in a map value",
			data: kubeletHeader + "featureGates:\n  KubeletTracing: maybe\n",
			want: `kubelet.yaml: featureGates[KubeletTracing]: expected bool, got string "maybe"`,
		},
		{
			name: "custom decoder rejects the value",
			data: kubeletHeader + "syncFrequency: 10x\n",
			want: `kubelet.yaml: syncFrequency: cannot decode string "10x" as v1.Duration: time: unknown unit "x" in duration "10x"`,
		},
		{
			name: "wrong kind",
			data: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
			want: `kubelet.yaml: kind: expected "KubeletConfiguration", got "KubeProxyConfiguration"`,
		},
		{
			name: "wrong apiVersion",
			data: "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n",
			want: `kubelet.yaml: apiVersion: expected "kubelet.config.k8s.io/v1beta1", got "kubelet.config.k8s.io/v1"`,
		},
		{
			name: "missing apiVersion and kind",
			data: "port: 10250\n",
			want: "kubelet.yaml: apiVersion: missing, expected \"kubelet.config.k8s.io/v1beta1\"\n" +
				"kubelet.yaml: kind: missing, expected \"KubeletConfiguration\"",
		},
		{
			name: "several errors at once, in document order",
			data: kubeletHeader + "port: ten\nadress: 10.0.0.1\nauthentication:\n  anonymous:\n    enabled: nope\n  x509:\n    clientCAFle: ca\nport: 11\n",
			want: "kubelet.yaml: duplicate field \"port\"\n" +
				"kubelet.yaml: unknown field \"adress\"\n" +
				"kubelet.yaml: authentication.anonymous.enabled: expected bool, got string \"nope\"\n" +
				"kubelet.yaml: authentication.x509: unknown field \"clientCAFle\"",
		},
		{
			name: "empty document",
			data: "# nothing here\n\n",
			want: `kubelet.yaml: document is empty`,
		},
		{
			name: "not a mapping",
			data: "- a\n- b\n",
			want: `kubelet.yaml: document must be a mapping (a YAML or JSON object), not a list`,
		},
		{
			name: "null document",
			data: "null\n",
			want: `kubelet.yaml: document is empty`,
		},
		{
			name: "empty object",
			data: "{}\n",
			want: "kubelet.yaml: apiVersion: missing, expected \"kubelet.config.k8s.io/v1beta1\"\n" +
				"kubelet.yaml: kind: missing, expected \"KubeletConfiguration\"",
		},
		{
			name: "scalar document",
			data: "just text\n",
			want: `kubelet.yaml: document must be a mapping (a YAML or JSON object)`,
		},
		{
			name: "list of mappings",
			data: "# a comment\n- port: 1\n",
			want: `kubelet.yaml: document must be a mapping (a YAML or JSON object), not a list`,
		},
		{
			name: "YAML syntax error",
			data: kubeletHeader + "port: [10250\n",
			want: `kubelet.yaml: line 3: did not find expected ',' or ']'`,
		},
		{
			name: "two YAML documents",
			data: kubeletHeader + "port: 10250\n---\n" + kubeletHeader,
			want: `kubelet.yaml: more than one YAML document: a configuration file holds exactly one`,
		},
		{
			name: "YAML merge key overridden: a duplicate to strict YAML, reported by line",
			data: kubeletHeader + "evictionSoft: &t\n  memory.available: 1Gi\nevictionHard:\n  <<: *t\n  memory.available: 2Gi\n",
			want: `kubelet.yaml: duplicate field: line 7: key "memory.available" already set in map`,
		},
		{
			name: "JSON duplicate and unknown",
			data: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1,"port":2,"nope":true}`,
			want: "kubelet.yaml: duplicate field \"port\"\nkubelet.yaml: unknown field \"nope\"",
		},
		{
			name: "JSON number literal for an int is checked as encoding/json would",
			data: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1e3}`,
			want: `kubelet.yaml: port: expected int32, got number 1e3`,
		},
		{
			name: "directive outside the instance document",
			data: kubeletHeader + "$patch: replace\n",
			want: `kubelet.yaml: unknown field "$patch": strategic merge directives are only allowed in the instance document`,
		},
		{
			name: "NaN",
			data: kubeletHeader + "memoryThrottlingFactor: .nan\n",
			want: `kubelet.yaml: memoryThrottlingFactor: unsupported value NaN: JSON has no NaN or infinity`,
		},
	}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Merge(Layers{Base: doc("kubelet.yaml", tt.data)})
			if err == nil {
				t.Fatalf("Merge succeeded, want error %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Document != "kubelet.yaml" {
				t.Errorf("errors.As(*DecodeError) = %v, document %q", de, docName(de))
			}
		})
	}
}

func docName(de *DecodeError) string {
	if de == nil {
		return ""
	}
	return de.Document
}

// TestDecodeProblemFields checks the structured form callers branch on.
func TestDecodeProblemFields(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	_, err := p.Merge(Layers{Base: doc("k.yaml", kubeletHeader+"evictionHard:\n  memory.available: 1\nauthentication:\n  x509:\n    bogus: 1\n")})
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("got %v, want a *DecodeError", err)
	}
	want := []Problem{
		{Type: ProblemWrongType, Path: "evictionHard[memory.available]", Detail: "expected string, got number 1 (quote the value to make it a string)"},
		{Type: ProblemUnknownField, Path: "authentication.x509", Field: "bogus"},
	}
	if diff := cmp.Diff(want, de.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestDecodeSemantics checks that documents decode as the kubelet decodes
// them (sigs.k8s.io/yaml then a case-sensitive JSON decoder).
func TestDecodeSemantics(t *testing.T) {
	tests := []struct {
		name string
		data string
		want kubeletConfig
	}{
		{
			name: "YAML 1.1 booleans and integral floats",
			data: kubeletHeader + "serializeImagePulls: no\nfailSwapOn: yes\nmaxPods: 1e2\n",
			want: kubeletConfig{SerializeImagePulls: ptr.To(false), FailSwapOn: ptr.To(true), MaxPods: 100},
		},
		{
			name: "JSON document",
			data: `{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "port": 10251, "clusterDNS": ["10.0.0.10"]}`,
			want: kubeletConfig{Port: 10251, ClusterDNS: []string{"10.0.0.10"}},
		},
		{
			name: "YAML flow mapping that is not JSON",
			data: `{apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration, port: 10251}`,
			want: kubeletConfig{Port: 10251},
		},
		{
			name: "null means not set in a complete document",
			data: kubeletHeader + "syncFrequency: null\nfeatureGates: ~\nport: 1\n",
			want: kubeletConfig{Port: 1},
		},
		{
			name: "custom decoders: durations, quantities, time-or-duration",
			data: kubeletHeader + "syncFrequency: 90s\nlogging:\n  flushFrequency: 5000000000\n  options:\n    text:\n      infoBufferSize: 1Mi\n",
			want: func() kubeletConfig {
				var c kubeletConfig
				c.SyncFrequency = metav1.Duration{Duration: 90 * time.Second}
				c.Logging.FlushFrequency.Duration.Duration = 5 * time.Second
				c.Logging.Options.Text.InfoBufferSize.Quantity = mustQuantity(t, "1Mi")
				return c
			}(),
		},
		{
			name: "YAML merge keys",
			data: kubeletHeader + "evictionSoft: &t\n  memory.available: 1Gi\nevictionMinimumReclaim:\n  <<: *t\n",
			want: kubeletConfig{EvictionSoft: map[string]string{"memory.available": "1Gi"}, EvictionMinimumReclaim: map[string]string{"memory.available": "1Gi"}},
		},
		{
			name: "non-string YAML keys become strings",
			data: kubeletHeader + "staticPodURLHeader:\n  1: [a]\n  true: [b]\n",
			want: kubeletConfig{StaticPodURLHeader: map[string][]string{"1": {"a"}, "true": {"b"}}},
		},
	}
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.Merge(Layers{Base: doc("k.yaml", tt.data)})
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			want := tt.want
			want.TypeMeta = metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"}
			if diff := cmp.Diff(want, *res.Object); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLenient(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{Lenient: true})
	data := kubeletHeader + "port: 1\nport: 2\nadress: x\nauthentication:\n  x509:\n    clientCAFle: ca\n"
	res, err := p.Merge(Layers{Base: doc("k.yaml", data)})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	wantWarnings := []string{
		`k.yaml: duplicate field "port"`,
		`k.yaml: unknown field "adress"`,
		`k.yaml: authentication.x509: unknown field "clientCAFle"`,
	}
	if diff := cmp.Diff(wantWarnings, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if res.Object.Port != 2 {
		t.Errorf("port = %d, want 2 (the later duplicate wins)", res.Object.Port)
	}

	// Type errors stay errors.
	_, err = p.Merge(Layers{Base: doc("k.yaml", kubeletHeader+"port: ten\nbogus: 1\n")})
	if err == nil || err.Error() != `k.yaml: port: expected int32, got string "ten"` {
		t.Errorf("lenient type error = %v", err)
	}
}

func TestProxyProfile(t *testing.T) {
	p := newPipeline(t, Profile[proxyConfig](proxyTestProfile{}), Options{})
	shared := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nclusterCIDR: 10.244.0.0/16\n"
	instance := "kind: KubeProxyConfiguration\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nhostnameOverride: node-1\n"
	res, err := p.Merge(Layers{Base: doc("kube-proxy.yaml", shared), Instance: doc("kube-proxy-instance.yaml", instance)})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	got := res.Object
	if got.Mode != "ipvs" || got.HostnameOverride != "node-1" || got.ClusterCIDR != "10.244.0.0/16" || got.BindAddress != "0.0.0.0" {
		t.Errorf("merged kube-proxy config = %+v", got)
	}
	_, err = p.Merge(Layers{Base: doc("kube-proxy.yaml", shared), Instance: doc("i.yaml", kubeletHeader)})
	want := "i.yaml: apiVersion: expected \"kubeproxy.config.k8s.io/v1alpha1\" (the same as the shared document kube-proxy.yaml), got \"kubelet.config.k8s.io/v1beta1\"\n" +
		"i.yaml: kind: expected \"KubeProxyConfiguration\" (the same as the shared document kube-proxy.yaml), got \"KubeletConfiguration\""
	if err == nil || err.Error() != want {
		t.Errorf("instance of another kind: got %v\nwant %s", err, want)
	}
}

// TestDecodeMatchesKubernetesDecoder is a property test: over generated
// documents, our decode equals the Kubernetes strict decode of the same YAML
// (sigs.k8s.io/yaml to JSON, then a strict case-sensitive JSON decode).
func TestDecodeMatchesKubernetesDecoder(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	gvk := [2]string{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"}
	for seed := int64(1); seed <= 300; seed++ {
		g := &gen{r: rand.New(rand.NewSource(seed)), fieldProb: 0.3}
		data := g.document(t, p.root, gvk)
		res, err := p.Merge(Layers{Base: &Document{Name: "k.yaml", Data: data}})
		if err != nil {
			t.Fatalf("seed %d: Merge: %v\n%s", seed, err, data)
		}
		js, err := sigsyaml.YAMLToJSONStrict(data)
		if err != nil {
			t.Fatal(err)
		}
		var want kubeletConfig
		if strict, err := kjson.UnmarshalStrict(js, &want); err != nil || len(strict) > 0 {
			t.Fatalf("seed %d: %v %v", seed, err, strict)
		}
		if diff := cmp.Diff(want, *res.Object); diff != "" {
			t.Fatalf("seed %d: ours differs from the Kubernetes decoder (-k8s +ours):\n%s\n%s", seed, diff, data)
		}
	}
}

// plainConfig has no TypeMeta: documents still carry apiVersion and kind.
type plainConfig struct {
	Name  string            `json:"name"`
	Items map[string]string `json:"items,omitempty"`
}

func TestTypeWithoutTypeMeta(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Plain"}
	p := newPipeline(t, Profile[plainConfig](nopProfile[plainConfig]{gvk: gvk}), Options{})
	header := "apiVersion: example.com/v1\nkind: Plain\n"
	res, err := p.Merge(Layers{
		Base:     doc("a.yaml", header+"name: a\nitems: {x: '1'}\n"),
		Instance: doc("b.yaml", header+"items: {z: '2'}\n"),
	})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	want := plainConfig{Name: "a", Items: map[string]string{"x": "1", "z": "2"}}
	if diff := cmp.Diff(want, *res.Object); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	if got := string(res.MergedJSON()); got != `{"name":"a","items":{"x":"1","z":"2"}}` {
		t.Errorf("MergedJSON = %s", got)
	}
	_, err = p.Merge(Layers{Base: doc("a.yaml", "name: a\n")})
	if err == nil || !strings.Contains(err.Error(), `a.yaml: apiVersion: missing, expected "example.com/v1"`) {
		t.Errorf("missing apiVersion: %v", err)
	}
}

func TestTrailingDocumentMarker(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](nopKubelet()), Options{})
	if _, err := p.Merge(Layers{Base: doc("k.yaml", "---\n"+kubeletHeader+"port: 1\n---\n")}); err != nil {
		t.Errorf("a document with --- markers around it: %v", err)
	}
}

// TestConcurrentMerge: one Pipeline serves several goroutines (run with -race).
func TestConcurrentMerge(t *testing.T) {
	p := newPipeline(t, Profile[kubeletConfig](kubeletTestProfile{}), Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := p.Merge(Layers{
				Base:     doc("k.yaml", kubeletHeader+"maxPods: 10\nsyncFrequency: 30s\n"),
				Instance: doc("i.yaml", kubeletHeader+fmt.Sprintf("port: %d\n", 10000+i)),
			})
			if err == nil && (res.Object.Port != int32(10000+i) || res.Object.MaxPods != 10) {
				err = fmt.Errorf("goroutine %d: port %d maxPods %d", i, res.Object.Port, res.Object.MaxPods)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
