package kubeadm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestFileName(t *testing.T) {
	tests := []struct {
		opts    Options
		want    string
		wantErr string
	}{
		{opts: Options{}, want: "kubeletconfiguration.yaml"},
		{opts: Options{PatchType: Strategic}, want: "kubeletconfiguration+strategic.yaml"},
		{opts: Options{PatchType: Merge}, want: "kubeletconfiguration+merge.yaml"},
		{opts: Options{Suffix: "0"}, want: "kubeletconfiguration0.yaml"},
		{opts: Options{Suffix: "-10-eksa", PatchType: Strategic}, want: "kubeletconfiguration-10-eksa+strategic.yaml"},
		{opts: Options{PatchType: "json"}, wantErr: `kubeadm: patch type "json": want "strategic" or "merge"`},
		{opts: Options{Suffix: "a.b"}, wantErr: `kubeadm: patch suffix "a.b": may not contain '.'`},
		{opts: Options{Suffix: "a+b"}, wantErr: `kubeadm: patch suffix "a+b": may not contain '+'`},
		{opts: Options{Suffix: "../x"}, wantErr: `kubeadm: patch suffix "../x": may not contain '.'`},
		{opts: Options{Suffix: "a/b"}, wantErr: `kubeadm: patch suffix "a/b": may not contain '/'`},
		{opts: Options{Suffix: "a\nb"}, wantErr: `kubeadm: patch suffix "a\nb": may not contain '\n'`},
	}
	for _, tt := range tests {
		t.Run(tt.want+tt.wantErr, func(t *testing.T) {
			got, err := FileName(tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("FileName = %q, want %q", got, tt.want)
			}
			// kubeadm must read it as a kubeletconfiguration patch of the
			// intended type.
			m := patchName.FindStringSubmatch(got)
			if m == nil {
				t.Fatalf("%q does not follow kubeadm's naming rule", got)
			}
			if m[2] != tt.opts.Suffix || m[3] != string(tt.opts.PatchType) {
				t.Errorf("kubeadm reads suffix %q type %q, want %q %q", m[2], m[3], tt.opts.Suffix, tt.opts.PatchType)
			}
		})
	}
}

// TestRenderGolden pins the bytes of a few patches.
func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name   string
		render func() (*Patch, error)
	}{{
		name: "design-example",
		render: func() (*Patch, error) {
			return RenderDocument([]byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "192.168.0.8"
port: 20250
serializeImagePulls: false
evictionHard:
    memory.available:  "100Mi"
    nodefs.available:  "10%"
    nodefs.inodesFree: "5%"
    imagefs.available: "15%"
`), Options{})
		},
	}, {
		name: "typed",
		render: func() (*Patch, error) {
			c := &kubeletv1beta1.KubeletConfiguration{
				MaxPods:        64,
				ResolverConfig: ptr.To("/etc/eksa-resolv.conf"),
				SystemReserved: map[string]string{"cpu": "500m"},
			}
			c.Authentication.Anonymous.Enabled = ptr.To(false)
			return Render(c, Options{Suffix: "-user", PatchType: Strategic})
		},
	}, {
		name: "document-with-nulls-and-zeros",
		render: func() (*Patch, error) {
			return RenderDocument([]byte(`{"kind":"KubeletConfiguration","maxPods":null,"rotateCertificates":false,
				"readOnlyPort":0,"authentication":{"x509":{"clientCAFile":null}},"featureGates":{}}`), Options{PatchType: Merge})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.render()
			if err != nil {
				t.Fatal(err)
			}
			got := "# " + p.Name + "\n" + string(p.Content)
			file := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", file, diff)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"unknown field", "kind: KubeletConfiguration\nmaxPod: 3\n", `kubeadm: document: unknown field "maxPod"`},
		{"duplicate field", "maxPods: 3\nmaxPods: 4\n", `kubeadm: document: yaml: unmarshal errors:
  line 2: key "maxPods" already set in map`},
		{"wrong type", "maxPods: many\n", `kubeadm: document: json: cannot unmarshal string into Go struct field KubeletConfiguration.maxPods of type int32`},
		{"wrong kind", "kind: KubeProxyConfiguration\n", `kubeadm: document: kind "KubeProxyConfiguration", want "KubeletConfiguration"`},
		{"wrong apiVersion", "apiVersion: v1\n", `kubeadm: document: apiVersion "v1", want "kubelet.config.k8s.io/v1beta1"`},
		{"a list", "- a\n", "kubeadm: document: not a YAML or JSON object"},
		{"empty", "", "kubeadm: document: not a YAML or JSON object"},
		{"case matters", "MaxPods: 3\n", `kubeadm: document: unknown field "MaxPods"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderDocument([]byte(tt.doc), Options{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v\nwant %s", err, tt.want)
			}
		})
	}
	if _, err := Render(nil, Options{}); err == nil || err.Error() != "kubeadm: no configuration" {
		t.Errorf("Render(nil): error = %v", err)
	}
	if _, err := Render(&kubeletv1beta1.KubeletConfiguration{}, Options{Suffix: "."}); err == nil {
		t.Error("Render with a bad suffix succeeded")
	}
}

// TestRenderDoesNotModify checks that Render leaves its argument alone.
func TestRenderDoesNotModify(t *testing.T) {
	c := &kubeletv1beta1.KubeletConfiguration{MaxPods: 3, EvictionHard: map[string]string{"memory.available": "1Gi"}}
	before := c.DeepCopy()
	if _, err := Render(c, Options{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, c); diff != "" {
		t.Errorf("Render modified its argument (-before +after):\n%s", diff)
	}
}
