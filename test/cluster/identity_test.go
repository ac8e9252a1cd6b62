package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeConfigFor(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *rest.Config
		wantErr string
	}{
		{name: "client certificate", cfg: &rest.Config{Host: "https://127.0.0.1:6443",
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}},
		{name: "bearer token", cfg: &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "token",
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}},
		{name: "host without scheme", cfg: &rest.Config{Host: "127.0.0.1:6443", BearerToken: "token"}},
		{name: "no credentials", cfg: &rest.Config{Host: "https://127.0.0.1:6443"},
			wantErr: "cluster: KubeConfigFor: the config has neither client certificate data nor a bearer token"},
		{name: "bad host", cfg: &rest.Config{Host: "https://[::1", BearerToken: "token"},
			wantErr: `cluster: KubeConfigFor: host "https://[::1": parse "https://[::1": missing ']' in host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := KubeConfigFor(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("KubeConfigFor() error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := clientcmd.RESTConfigFromKubeConfig(data)
			if err != nil {
				t.Fatalf("reading the kubeconfig back: %v", err)
			}
			want := tt.cfg
			if !strings.Contains(want.Host, "://") {
				want = rest.CopyConfig(want)
				want.Host = "https://" + want.Host
			}
			type creds struct {
				Host          string
				CA, Cert, Key []byte
				Token         string
			}
			if diff := cmp.Diff(creds{want.Host, want.CAData, want.CertData, want.KeyData, want.BearerToken},
				creds{got.Host, got.CAData, got.CertData, got.KeyData, got.BearerToken}); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "# comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: b\n  namespace: a\n")
	got, err := ReadManifests(good)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Object.GetKind()+"/"+m.Object.GetName()+"@"+filepath.Base(m.File))
	}
	if diff := cmp.Diff([]string{"Namespace/a@good.yaml", "ServiceAccount/b@good.yaml"}, names); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}

	missing := filepath.Join(dir, "missing.yaml")
	noKind := write("nokind.yaml", "apiVersion: v1\nmetadata:\n  name: a\n")
	noName := write("noname.yaml", "apiVersion: v1\nkind: Namespace\n---\napiVersion: v1\nkind: Namespace\nmetadata: {}\n")
	broken := write("broken.yaml", "apiVersion: v1\nkind: [\n")
	for _, tt := range []struct {
		path, want string
	}{
		{missing, "cluster: reading manifest: open " + missing + ": no such file or directory"},
		{noKind, "cluster: manifest " + noKind + ", document 0: apiVersion and kind are required"},
		{noName, "cluster: manifest " + noName + ", document 0 (Namespace): metadata.name is required"},
		{broken, "cluster: manifest " + broken + ", document 0: "},
	} {
		_, err := ReadManifests(good, tt.path)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ReadManifests(%s) error %v, want %q", filepath.Base(tt.path), err, tt.want)
		}
	}
}
