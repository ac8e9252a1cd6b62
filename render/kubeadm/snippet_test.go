package kubeadm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSnippetGolden(t *testing.T) {
	tests := []struct {
		name string
		opts SnippetOptions
	}{
		{"snippet-default", SnippetOptions{}},
		{"snippet-control-plane", SnippetOptions{Init: true, Join: true, Upgrade: true, KubeletExtraArgs: []Arg{{Name: "node-labels", Value: "example.com/tier=web,team=a"}}}},
		{"snippet-worker", SnippetOptions{Directory: "/var/lib/eksa/patches", Join: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Snippet(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", file, diff)
			}
		})
	}
}

func TestSnippetErrors(t *testing.T) {
	tests := []struct {
		name string
		opts SnippetOptions
		want string
	}{
		{"relative directory", SnippetOptions{Directory: "patches"}, `kubeadm: patches directory "patches": want a clean absolute path`},
		{"unclean directory", SnippetOptions{Directory: "/etc/kubernetes/../patches"}, `kubeadm: patches directory "/etc/kubernetes/../patches": want a clean absolute path`},
		{"dashed flag", SnippetOptions{KubeletExtraArgs: []Arg{{Name: "node-ip", Value: "1.2.3.4"}, {Name: "--node-labels", Value: "a=b"}}},
			`kubeadm: kubeletExtraArgs[1]: flag name "--node-labels": want a name without dashes, "=" or spaces`},
		{"empty flag", SnippetOptions{KubeletExtraArgs: []Arg{{Value: "x"}}}, `kubeadm: kubeletExtraArgs[0]: flag name "": want a name without dashes, "=" or spaces`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Snippet(tt.opts)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}
