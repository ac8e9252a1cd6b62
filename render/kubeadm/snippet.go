package kubeadm

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/yaml"
)

// APIVersion is the kubeadm configuration API the snippet is written in,
// the current one in Kubernetes 1.37.
const APIVersion = "kubeadm.k8s.io/v1beta4"

// Arg is one kubelet command-line flag in kubeadm's
// nodeRegistration.kubeletExtraArgs: the flag name without dashes and its
// value.
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SnippetOptions choose what Snippet writes.
type SnippetOptions struct {
	// Directory is the patches directory on the machine, an absolute path.
	// Empty means DefaultDirectory.
	Directory string
	// Init, Join and Upgrade choose the documents: InitConfiguration (the
	// first control plane machine), JoinConfiguration (every other machine)
	// and UpgradeConfiguration (kubeadm upgrade apply and node, which
	// rewrite the kubelet's configuration file and drop the patch unless
	// they are given the directory too). None set means Init and Join.
	Init, Join, Upgrade bool
	// KubeletExtraArgs go into nodeRegistration.kubeletExtraArgs of the
	// init and join documents, for kubelet settings that are flags, such as
	// node-labels. Names are without leading dashes.
	KubeletExtraArgs []Arg
}

// Snippet returns kubeadm configuration documents (YAML, separated by
// "---") that point kubeadm at the patches directory: patches.directory in
// InitConfiguration and JoinConfiguration, and in the apply and node
// sections of UpgradeConfiguration. They are fragments to merge into a
// tool's full kubeadm configuration (a JoinConfiguration also needs its
// discovery settings), or, with Cluster API, the values of KubeadmConfigSpec's
// initConfiguration and joinConfiguration.
func Snippet(opts SnippetOptions) ([]byte, error) {
	dir := opts.Directory
	if dir == "" {
		dir = DefaultDirectory
	}
	if !path.IsAbs(dir) || path.Clean(dir) != dir || strings.ContainsAny(dir, "\n\x00") {
		return nil, fmt.Errorf("kubeadm: patches directory %q: want a clean absolute path", dir)
	}
	for i, a := range opts.KubeletExtraArgs {
		if a.Name == "" || strings.HasPrefix(a.Name, "-") || strings.ContainsAny(a.Name, "= \t\n") {
			return nil, fmt.Errorf("kubeadm: kubeletExtraArgs[%d]: flag name %q: want a name without dashes, \"=\" or spaces", i, a.Name)
		}
	}
	if !opts.Init && !opts.Join && !opts.Upgrade {
		opts.Init, opts.Join = true, true
	}
	patches := map[string]any{"directory": dir}
	var nodeReg map[string]any
	if len(opts.KubeletExtraArgs) > 0 {
		nodeReg = map[string]any{"kubeletExtraArgs": opts.KubeletExtraArgs}
	}
	var docs []map[string]any
	for _, d := range []struct {
		want bool
		kind string
	}{{opts.Init, "InitConfiguration"}, {opts.Join, "JoinConfiguration"}} {
		if !d.want {
			continue
		}
		doc := map[string]any{"apiVersion": APIVersion, "kind": d.kind, "patches": patches}
		if nodeReg != nil {
			doc["nodeRegistration"] = nodeReg
		}
		docs = append(docs, doc)
	}
	if opts.Upgrade {
		docs = append(docs, map[string]any{
			"apiVersion": APIVersion,
			"kind":       "UpgradeConfiguration",
			"apply":      map[string]any{"patches": patches},
			"node":       map[string]any{"patches": patches},
		})
	}
	var out bytes.Buffer
	for i, doc := range docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		y, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("kubeadm: writing the snippet: %w", err)
		}
		out.Write(y)
	}
	return out.Bytes(), nil
}
