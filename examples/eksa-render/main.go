package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/provision"
	"github.com/dynconfig/dynconfig/render/bottlerocket"
	"github.com/dynconfig/dynconfig/render/kubeadm"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// File names written per node group.
const (
	patchesDir   = "patches"
	snippetFile  = "kubeadm-config.yaml"
	settingsFile = "settings.toml"
)

// output is one file to write, relative to the output directory.
type output struct {
	path string
	data []byte
}

// run is the program: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eksa-render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policyName := fs.String("policy", "proposed", `the design's solution for fields EKS Anywhere sets or exposes: "proposed" or "alternate"`)
	errorIfBoth := fs.Bool("error-if-both", false, "make a setting given both in an explicit cluster field and in kubeletConfiguration an error")
	allow := fs.String("allow", "", "comma-separated managed fields users may set after all (e.g. tlsCipherSuites)")
	outDir := fs.String("out", "", "output directory (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: eksa-render -out DIR [-policy proposed|alternate] [-error-if-both] [-allow FIELD,...] CLUSTER.yaml")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *outDir == "" || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	var preset func(provision.EKSAOptions) (provision.Policy, error)
	switch *policyName {
	case "proposed":
		preset = provision.EKSAProposedPolicy
	case "alternate":
		preset = provision.EKSAAlternatePolicy
	default:
		fmt.Fprintf(stderr, "eksa-render: -policy %q: want \"proposed\" or \"alternate\"\n", *policyName)
		return 2
	}
	var allowed []string
	if *allow != "" {
		allowed = strings.Split(*allow, ",")
	}

	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "eksa-render: %v\n", err)
		return 1
	}
	cluster, err := DecodeSpec(data)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	outputs, warnings, errs := render(cluster, preset, provision.EKSAOptions{Allow: allowed, ErrorIfBoth: *errorIfBoth})
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	for _, o := range outputs {
		p := filepath.Join(*outDir, o.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintf(stderr, "eksa-render: %v\n", err)
			return 1
		}
		if err := os.WriteFile(p, o.data, 0o644); err != nil {
			fmt.Fprintf(stderr, "eksa-render: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.ToSlash(o.path))
	}
	return 0
}

// render validates every node group and renders its files. It returns every
// problem of every group, one line each, and the files only when there is
// none.
func render(c *Cluster, preset func(provision.EKSAOptions) (provision.Policy, error), opts provision.EKSAOptions) ([]output, []string, []string) {
	prov, _ := provider(c.Spec.DatacenterRef.Kind) // checked by DecodeSpec
	managed, err := provision.EKSAManagedFields(prov)
	if err != nil {
		return nil, nil, []string{err.Error()}
	}
	opts.Managed = managed
	if rc := c.resolvConf(); rc != nil {
		opts.ResolvConf = rc.Path
	}
	var outputs []output
	var warnings, errs []string
	for _, g := range c.groups() {
		name := g.path.Child("kubeletConfiguration").String()
		gopts := opts
		gopts.Labels = provision.NodeLabels(g.Labels)
		policy, err := preset(gopts)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		v, err := provision.NewValidator(policy)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		kc := g.KubeletConfiguration
		if kc == nil {
			// No user settings: the platform's values alone.
			kc = map[string]any{"apiVersion": kubeletv1beta1.SchemeGroupVersion.String(), "kind": "KubeletConfiguration"}
		}
		res, err := v.ValidateMap(kc, name)
		if err != nil {
			errs = append(errs, lines(err)...)
			continue
		}
		warnings = append(warnings, res.Warnings...)
		// The spec has node labels only in the explicit labels field (the
		// platform side of the policy); a tool that also takes labels from
		// the user elsewhere (kubelet extra args) passes them here.
		labels, labelWarnings, err := policy.NodeLabels.Merge(nil, g.path.Child("labels").String())
		if err != nil {
			errs = append(errs, lines(err)...)
			continue
		}
		warnings = append(warnings, labelWarnings...)

		switch g.OSFamily {
		case Ubuntu:
			patch, err := kubeadm.RenderDocument(res.Document, kubeadm.Options{})
			if err != nil {
				errs = append(errs, name+": "+err.Error())
				continue
			}
			var args []kubeadm.Arg
			if len(labels) > 0 {
				args = append(args, kubeadm.Arg{Name: provision.NodeLabelsFlag, Value: labels.String()})
			}
			snippet, err := kubeadm.Snippet(kubeadm.SnippetOptions{Init: g.controlPlane, Join: true, Upgrade: true, KubeletExtraArgs: args})
			if err != nil {
				errs = append(errs, name+": "+err.Error())
				continue
			}
			outputs = append(outputs,
				output{path: filepath.Join(g.dir, patchesDir, patch.Name), data: patch.Content},
				output{path: filepath.Join(g.dir, snippetFile), data: snippet})
		case Bottlerocket:
			// The platform's values are Bottlerocket's business; render what
			// the user set, from the document so that zero values the user
			// wrote (serverTLSBootstrap: false, maxPods: 0) are rendered or
			// refused, never dropped.
			toml, err := bottlerocket.RenderDocument(res.UserDocument)
			if err != nil {
				for _, l := range lines(err) {
					errs = append(errs, name+": "+l)
				}
				continue
			}
			outputs = append(outputs, output{path: filepath.Join(g.dir, settingsFile), data: appendLabels(toml, labels)})
		}
	}
	if len(errs) > 0 {
		return nil, warnings, errs
	}
	return outputs, warnings, nil
}

// appendLabels adds Bottlerocket's settings.kubernetes.node-labels table.
// Valid label keys and values are printable ASCII without quotes or
// backslashes, so Go quoting is TOML basic-string quoting for them.
func appendLabels(toml []byte, labels provision.NodeLabels) []byte {
	if len(labels) == 0 {
		return toml
	}
	toml = append(toml, "\n[settings.kubernetes.node-labels]\n"...)
	for _, k := range sortedKeys(labels) {
		toml = append(toml, strconv.Quote(k)+" = "+strconv.Quote(labels[k])+"\n"...)
	}
	return toml
}

// lines splits an error's message into its lines.
func lines(err error) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
