package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func node(name string, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestAssign(t *testing.T) {
	cm := newConfigMap("kube-system", "kubelet-v2", "6f1c-uid", "41", map[string]string{"kubelet": "kind: KubeletConfiguration\n", "proxy": "x"})
	cm.BinaryData = map[string][]byte{"blob": {1}}
	const wantJSON = `{"configMap":{"namespace":"kube-system","name":"kubelet-v2","uid":"6f1c-uid","kubeletConfigKey":"kubelet"}}`
	other := map[string]string{"team": "infra"}
	withAssignment := map[string]string{"team": "infra", configSourceAnnotation: `{"configMap":{"namespace":"kube-system","name":"old","uid":"u0","kubeletConfigKey":"kubelet"}}`}

	tests := []struct {
		name    string
		node    *corev1.Node
		opts    assignOptions
		want    map[string]string // the node's annotations afterwards
		wantOut string
		wantErr string
		patched bool // a patch must have been sent
	}{
		{
			name: "assign", node: node("n1", other),
			opts:    assignOptions{node: "n1", configMap: "kube-system/kubelet-v2", key: "kubelet"},
			want:    map[string]string{"team": "infra", configSourceAnnotation: wantJSON},
			wantOut: "node n1: set annotation dynconfig.io/config-source=" + wantJSON + " (was not set)\n",
			patched: true,
		},
		{
			name: "replace an assignment", node: node("n1", withAssignment),
			opts:    assignOptions{node: "n1", configMap: "kube-system/kubelet-v2", key: "kubelet"},
			want:    map[string]string{"team": "infra", configSourceAnnotation: wantJSON},
			wantOut: "node n1: set annotation dynconfig.io/config-source=" + wantJSON + " (was " + withAssignment[configSourceAnnotation] + ")\n",
			patched: true,
		},
		{
			name: "another key", node: node("n1", nil),
			opts: assignOptions{node: "n1", configMap: "kube-system/kubelet-v2", key: "proxy"},
			want: map[string]string{configSourceAnnotation: `{"configMap":{"namespace":"kube-system","name":"kubelet-v2","uid":"6f1c-uid","kubeletConfigKey":"proxy"}}`},
			wantOut: "node n1: set annotation dynconfig.io/config-source=" +
				`{"configMap":{"namespace":"kube-system","name":"kubelet-v2","uid":"6f1c-uid","kubeletConfigKey":"proxy"}}` + " (was not set)\n",
			patched: true,
		},
		{
			name: "already assigned", node: node("n1", map[string]string{configSourceAnnotation: wantJSON}),
			opts:    assignOptions{node: "n1", configMap: "kube-system/kubelet-v2", key: "kubelet"},
			want:    map[string]string{configSourceAnnotation: wantJSON},
			wantOut: "node n1: annotation dynconfig.io/config-source is already " + wantJSON + "; nothing to change\n",
		},
		{
			name: "missing key", node: node("n1", other),
			opts:    assignOptions{node: "n1", configMap: "kube-system/kubelet-v2", key: "kubelet.yaml"},
			want:    other,
			wantErr: `ConfigMap kube-system/kubelet-v2 has no data key "kubelet.yaml" (keys present: kubelet, proxy); choose one with --key`,
		},
		{
			name: "key only in binaryData", node: node("n1", other),
			opts:    assignOptions{node: "n1", configMap: "kube-system/kubelet-v2", key: "blob"},
			want:    other,
			wantErr: `has no data key "blob" (keys present: kubelet, proxy; "blob" is in binaryData, which is not read)`,
		},
		{
			name: "missing ConfigMap", node: node("n1", other),
			opts:    assignOptions{node: "n1", configMap: "kube-system/nope", key: "kubelet"},
			want:    other,
			wantErr: "ConfigMap kube-system/nope not found",
		},
		{
			name: "missing node", node: node("n1", other),
			opts:    assignOptions{node: "n2", configMap: "kube-system/kubelet-v2", key: "kubelet"},
			want:    other,
			wantErr: "node n2 not found",
		},
		{
			name: "clear", node: node("n1", withAssignment),
			opts:    assignOptions{node: "n1", clear: true},
			want:    other,
			wantOut: "node n1: removed annotation dynconfig.io/config-source (was " + withAssignment[configSourceAnnotation] + "); the node will run its local config\n",
			patched: true,
		},
		{
			name: "clear when not set", node: node("n1", other),
			opts:    assignOptions{node: "n1", clear: true},
			want:    other,
			wantOut: "node n1: annotation dynconfig.io/config-source is not set; nothing to clear\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.node, cm)
			var out bytes.Buffer
			err := runAssign(context.Background(), &out, client, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("assign: %v", err)
			}
			if diff := cmp.Diff(tt.wantOut, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), tt.node.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			var patches []k8stesting.PatchAction
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok {
					patches = append(patches, p)
				}
			}
			if tt.patched != (len(patches) == 1) || len(patches) > 1 {
				t.Fatalf("%d patches sent, want patched = %v", len(patches), tt.patched)
			}
			if tt.patched {
				checkMergePatch(t, patches[0], tt.want[configSourceAnnotation], tt.opts.clear)
			}
		})
	}
}

// checkMergePatch checks that the patch is a JSON merge patch that touches
// only the annotation.
func checkMergePatch(t *testing.T, p k8stesting.PatchAction, value string, clear bool) {
	t.Helper()
	if p.GetPatchType() != "application/merge-patch+json" {
		t.Errorf("patch type %q, want a JSON merge patch", p.GetPatchType())
	}
	var got map[string]any
	if err := json.Unmarshal(p.GetPatch(), &got); err != nil {
		t.Fatalf("patch %s: %v", p.GetPatch(), err)
	}
	var v any = value
	if clear {
		v = nil
	}
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{configSourceAnnotation: v}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}

func TestAssignFlags(t *testing.T) {
	tests := []struct {
		name       string
		opts       assignOptions
		keyChanged bool
		wantErr    string // "" = valid
	}{
		{name: "assign", opts: assignOptions{node: "n", configMap: "ns/name", key: "kubelet", timeout: 1}},
		{name: "clear", opts: assignOptions{node: "n", clear: true, key: "kubelet", timeout: 1}},
		{name: "no node", opts: assignOptions{configMap: "ns/name", key: "kubelet", timeout: 1}, wantErr: "--node is required"},
		{name: "neither", opts: assignOptions{node: "n", key: "kubelet", timeout: 1}, wantErr: "one of --configmap or --clear is required"},
		{name: "both", opts: assignOptions{node: "n", configMap: "ns/name", clear: true, timeout: 1}, wantErr: "mutually exclusive"},
		{name: "key with clear", opts: assignOptions{node: "n", clear: true, key: "x", timeout: 1}, keyChanged: true, wantErr: "--key does not go with --clear"},
		{name: "no namespace", opts: assignOptions{node: "n", configMap: "name", key: "kubelet", timeout: 1}},
		{name: "empty name", opts: assignOptions{node: "n", configMap: "ns/", key: "kubelet", timeout: 1}, wantErr: `--configmap "ns/": want NAMESPACE/NAME or NAME`},
		{name: "empty namespace", opts: assignOptions{node: "n", configMap: "/name", key: "kubelet", timeout: 1}, wantErr: `--configmap "/name": want NAMESPACE/NAME or NAME`},
		{name: "extra slash", opts: assignOptions{node: "n", configMap: "ns/a/b", key: "kubelet", timeout: 1}, wantErr: `--configmap "ns/a/b": want NAMESPACE/NAME or NAME`},
		{name: "bad namespace", opts: assignOptions{node: "n", configMap: "Kube_System/name", key: "kubelet", timeout: 1}, wantErr: `--configmap "Kube_System/name": namespace "Kube_System": a lowercase RFC 1123 label must consist of`},
		{name: "bad name", opts: assignOptions{node: "n", configMap: "ns/Name!", key: "kubelet", timeout: 1}, wantErr: `--configmap "ns/Name!": name "Name!": a lowercase RFC 1123 subdomain must consist of`},
		{name: "bad component", opts: assignOptions{node: "n", configMap: "ns/name", key: "kubelet", component: "Kube_Proxy", timeout: 1}, wantErr: `--component: component name "Kube_Proxy": a lowercase RFC 1123 label must consist of`},
		{name: "empty key", opts: assignOptions{node: "n", configMap: "ns/name", timeout: 1}, keyChanged: true, wantErr: "--key must not be empty"},
		{name: "zero timeout", opts: assignOptions{node: "n", configMap: "ns/name", key: "kubelet"}, wantErr: "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.validate(tt.keyChanged)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if _, ok := err.(*usageError); !ok {
				t.Errorf("err is a %T, want a usage error", err)
			}
		})
	}
}

// Defect 11: --clear must leave the node on its local config. A node that
// still has the legacy spec.configSource would fall back to it when only
// the annotation goes, so --clear removes both, and says so.
func TestAssignClearAlsoClearsLegacyConfigSource(t *testing.T) {
	legacy := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: "kube-system", Name: "old", UID: "uid-old", KubeletConfigKey: "kubelet"}}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		wantOut     string
	}{
		{"annotation and spec.configSource", map[string]string{configSourceAnnotation: `{"configMap":{"namespace":"kube-system","name":"x","uid":"u","kubeletConfigKey":"kubelet"}}`},
			"node n1: removed annotation dynconfig.io/config-source (was {\"configMap\":{\"namespace\":\"kube-system\",\"name\":\"x\",\"uid\":\"u\",\"kubeletConfigKey\":\"kubelet\"}}) and the legacy spec.configSource (was ConfigMap kube-system/old, UID uid-old); the node will run its local config\n"},
		{"spec.configSource only", nil,
			"node n1: removed the legacy spec.configSource (was ConfigMap kube-system/old, UID uid-old); the node will run its local config\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tc.annotations}, Spec: corev1.NodeSpec{ConfigSource: legacy.DeepCopy()}}
			client := fake.NewClientset(n)
			var out bytes.Buffer
			if err := runAssign(context.Background(), &out, client, assignOptions{node: "n1", clear: true}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Annotations[configSourceAnnotation]; ok || got.Spec.ConfigSource != nil {
				t.Fatalf("after --clear: annotation %q, spec.configSource %+v; want neither", got.Annotations[configSourceAnnotation], got.Spec.ConfigSource)
			}
		})
	}
}

// Only the kubelet reads spec.configSource: clearing another component's
// assignment leaves it, and the kubelet's annotation, alone.
func TestAssignClearOtherComponent(t *testing.T) {
	legacy := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "old", UID: "uid-old", KubeletConfigKey: "kubelet"}}
	kubeletValue := `{"configMap":{"namespace":"kube-system","name":"k","uid":"uk","kubeletConfigKey":"kubelet"}}`
	proxyValue := `{"configMap":{"namespace":"kube-system","name":"p","uid":"up","kubeletConfigKey":"config.conf"}}`
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{configSourceAnnotation: kubeletValue, configSourceAnnotation + ".kube-proxy": proxyValue}},
		Spec:       corev1.NodeSpec{ConfigSource: legacy.DeepCopy()},
	}
	client := fake.NewClientset(n)
	var out bytes.Buffer
	if err := runAssign(context.Background(), &out, client, assignOptions{node: "n1", clear: true, component: "kube-proxy"}); err != nil {
		t.Fatal(err)
	}
	want := "node n1: removed annotation dynconfig.io/config-source.kube-proxy (was " + proxyValue + "); the node will run its local config\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{configSourceAnnotation: kubeletValue}, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if got.Spec.ConfigSource == nil {
		t.Error("clearing kube-proxy's assignment removed the kubelet's spec.configSource")
	}
	// Nothing to clear for kube-proxy now, though the kubelet has both.
	out.Reset()
	if err := runAssign(context.Background(), &out, client, assignOptions{node: "n1", clear: true, component: "kube-proxy"}); err != nil {
		t.Fatal(err)
	}
	if want := "node n1: annotation dynconfig.io/config-source.kube-proxy is not set; nothing to clear\n"; out.String() != want {
		t.Errorf("second clear: %q, want %q", out.String(), want)
	}
}
