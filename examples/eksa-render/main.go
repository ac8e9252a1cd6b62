package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/internal/atomicfile"
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

// Exit codes, as every binary of the project has them.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// output is one file to write, relative to the output directory.
type output struct {
	path string
	data []byte
}

// usageError is an error of the command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// errReported is returned once the errors have been printed, one per line:
// exit code 1 and nothing more to say.
var errReported = errors.New("reported")

// options are the flags of eksa-render.
type options struct {
	out         string
	policy      string
	errorIfBoth bool
	allow       []string
}

// longFlags are the flags' names; the flag package's single-dash spelling
// of them (-out) is refused with a hint.
var longFlags = []string{"out", "policy", "error-if-both", "allow", "help"}

// run is the program: it returns the exit code (0 ok, 1 error, 2 usage).
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand(stdout, stderr)
	cmd.SetArgs(args)
	err := singleDashFlags(args)
	if err == nil {
		err = cmd.Execute()
	}
	var u *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errReported):
		return exitError
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "eksa-render: %v\nRun 'eksa-render --help' for usage.\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "eksa-render: %v\n", err)
		return exitError
	}
}

// singleDashFlags refuses -out and the like, which pflag would read as
// shorthand flags (-o -u -t), with the right spelling.
func singleDashFlags(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if slices.Contains(longFlags, name) {
			return usagef("%s: flags take two dashes: --%s", a, strings.TrimPrefix(a, "-"))
		}
	}
	return nil
}

func newCommand(stdout, stderr io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "eksa-render --out DIR [--policy proposed|alternate] [--error-if-both] [--allow FIELD,...] CLUSTER.yaml",
		Short: "Validate an EKS Anywhere-like cluster spec's kubelet settings and render each node group's files",
		Long: `eksa-render validates the kubeletConfiguration of every node group of
CLUSTER.yaml, a small EKS Anywhere-like cluster spec, under the design's
policy for the fields EKS Anywhere sets or exposes (--policy), and writes
each group's files into --out/<group>/ ("control-plane" for the control
plane):

  ubuntu groups        patches/kubeletconfiguration.yaml (a kubeadm patch) and
                       kubeadm-config.yaml (Init, Join and Upgrade fragments)
  bottlerocket groups  settings.toml (settings.kubernetes and node-labels)

On any problem, in any group, nothing is written: every error is printed to
stderr, one per line, naming the field. Warnings (a user value the platform
replaced) go to stderr too.

Exit status: 0 when every group rendered, 1 when the spec is invalid or a
file cannot be read or written, 2 on a usage error.`,
		Example: `  eksa-render --out /tmp/eksa examples/eksa-render/testdata/vsphere/cluster.yaml
  eksa-render --out /tmp/eksa --policy alternate --allow tlsCipherSuites cluster.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("eksa-render takes 1 argument, CLUSTER.yaml, got %d", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runRender(stdout, stderr, o, args[0])
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	cmd.CompletionOptions.DisableDefaultCmd = true
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "output directory (required)")
	f.StringVar(&o.policy, "policy", "proposed", `the design's solution for fields EKS Anywhere sets or exposes: "proposed" or "alternate"`)
	f.BoolVar(&o.errorIfBoth, "error-if-both", false, "make a setting given both in an explicit cluster field and in kubeletConfiguration an error")
	f.StringSliceVar(&o.allow, "allow", nil, "managed fields users may set after all (e.g. tlsCipherSuites); comma-separated or repeated")
	return cmd
}

// runRender validates the flags, reads the spec, renders it and writes the
// files, or prints every error and writes nothing.
func runRender(stdout, stderr io.Writer, o options, specFile string) error {
	if o.out == "" {
		return usagef("--out is required")
	}
	var preset func(provision.EKSAOptions) (provision.Policy, error)
	switch o.policy {
	case "proposed":
		preset = provision.EKSAProposedPolicy
	case "alternate":
		preset = provision.EKSAAlternatePolicy
	default:
		return usagef("--policy %q: want \"proposed\" or \"alternate\"", o.policy)
	}
	for _, a := range o.allow {
		if a == "" {
			return usagef("--allow %q: a field must not be empty", strings.Join(o.allow, ","))
		}
	}

	data, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	cluster, err := DecodeSpec(data)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return errReported
	}
	outputs, warnings, errs := render(cluster, preset, provision.EKSAOptions{Allow: o.allow, ErrorIfBoth: o.errorIfBoth})
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		return errReported
	}
	for _, out := range outputs {
		p := filepath.Join(o.out, out.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		// Each file is whole, old or new, even if the command is
		// interrupted (a temporary file renamed over it).
		if err := atomicfile.WriteFile(p, out.data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.ToSlash(out.path))
	}
	return nil
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
