package demo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/merge"
)

// Main runs the command newCommand builds with the process's arguments
// and standard streams, under a context that SIGINT and SIGTERM cancel,
// and exits the process with the code Execute returns.
func Main(newCommand func() *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, newCommand(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Execute runs cmd with args and returns the process exit code: 0 when the
// command returned nil, 1 on any error, which is written to stderr as one
// line "NAME: error" (NAME is cmd.Name()). It flushes klog first, so the
// error line comes last.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stdout, stderr io.Writer) int {
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	klog.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name(), err)
		return 1
	}
	return 0
}

// NewCommand returns the command of an example component: no arguments,
// flags listed in help in the order they are added, usage and errors left
// to Execute, and run called with the command's context, flags and stdout.
// The caller adds the flags, then AddKlogFlags.
func NewCommand(use, short, long string, run func(ctx context.Context, fs *pflag.FlagSet, stdout io.Writer) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:           use,
		Short:         short,
		Long:          long,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), cmd.Flags(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().SortFlags = false
	return cmd
}

// AddKlogFlags adds klog's flags (-v, --vmodule, ...) to fs, from a flag
// set of their own, so that each command built has its own copy.
func AddKlogFlags(fs *pflag.FlagSet) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
}

// Flags are the command-line options of the example components that are
// not config fields. The components register the ones whose help text is
// theirs (--kubeconfig, --node-name, --disable-remote-config) themselves;
// AddLocalFlags and AddServingFlags register the others.
type Flags struct {
	// ConfigFile is --config, the init config file.
	ConfigFile string
	// ConfigDir is --config-dir, the directory of drop-ins.
	ConfigDir string
	// InstanceConfig is --instance-config, the instance-specific file.
	InstanceConfig string
	// StateDir is --dynamic-config-dir, the Controller's state dir.
	StateDir string
	// Kubeconfig is --kubeconfig.
	Kubeconfig string
	// NodeName is --node-name; see NodeName for its default.
	NodeName string
	// DisableRemote is --disable-remote-config.
	DisableRemote bool
	// SourceDir is --source-dir, a directory source.
	SourceDir string
	// SourcePoll is --source-poll-interval.
	SourcePoll time.Duration
	// Address is --address, the IP address to serve on.
	Address string
	// Port is --port; 0 picks a free one.
	Port int
	// StatusFile is --status-file.
	StatusFile string
}

// AddLocalFlags registers, in this order, --config (whose help names the
// config kind), --config-dir, --instance-config (with instanceHelp) and
// --dynamic-config-dir.
func (f *Flags) AddLocalFlags(fs *pflag.FlagSet, kind, instanceHelp string) {
	fs.StringVar(&f.ConfigFile, "config", "", "The init config file (a "+kind+"). A remote config replaces it.")
	fs.StringVar(&f.ConfigDir, "config-dir", "", "A directory of *.conf drop-ins applied over the base config in lexical order, as JSON merge patches.")
	fs.StringVar(&f.InstanceConfig, "instance-config", "", instanceHelp)
	fs.StringVar(&f.StateDir, "dynamic-config-dir", "", "The state dir: checkpoints, current and last-known-good pointers, tracking files. Required.")
}

// AddServingFlags registers, in this order, --source-dir,
// --source-poll-interval, --address, --port (with defaultPort) and
// --status-file.
func (f *Flags) AddServingFlags(fs *pflag.FlagSet, defaultPort int) {
	fs.StringVar(&f.SourceDir, "source-dir", "", "Read the assignment from a directory source (assignment.yaml and configmaps/) instead of the API server.")
	fs.DurationVar(&f.SourcePoll, "source-poll-interval", time.Second, "How often the directory source looks for changes.")
	fs.StringVar(&f.Address, "address", "127.0.0.1", "The IP address to serve /healthz, /configz and /metrics on.")
	fs.IntVar(&f.Port, "port", defaultPort, "The port to serve on; 0 picks a free one (the bound address is printed).")
	fs.StringVar(&f.StatusFile, "status-file", "", "A file replaced atomically with every ConfigOK report, as JSON.")
}

// LocalLayers returns the local config layers that f names, read through
// p, with the config flags of fs on top: those that bindings maps to field
// paths and that were set on the command line.
func LocalLayers[T any](p *merge.Pipeline[T], f *Flags, fs *pflag.FlagSet, bindings map[string]merge.FlagBinding) (dynconfig.Layers[T], error) {
	overrides, err := p.FlagOverrides(fs, bindings)
	if err != nil {
		return nil, err
	}
	return dynconfig.NewLayers(p, dynconfig.LocalConfig{
		InitFile:     f.ConfigFile,
		DropInDir:    f.ConfigDir,
		InstanceFile: f.InstanceConfig,
		Flags:        overrides,
	})
}

// FeatureGates is the value of a --feature-gates flag: "A=true,B=false",
// which is also how String renders it (merge.Pipeline.FlagOverrides parses
// that form for map fields).
type FeatureGates map[string]bool

// String renders the gates as "A=true,B=false", sorted by name.
func (g FeatureGates) String() string {
	kv := make([]string, 0, len(g))
	for k, v := range g {
		kv = append(kv, k+"="+strconv.FormatBool(v))
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// Set adds the gates of s; it may be given several times, a later value
// of a gate replacing an earlier one.
func (g FeatureGates) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not NAME=true or NAME=false", item)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("gate %s: %q is not a boolean", k, v)
		}
		g[k] = b
	}
	return nil
}

// Type names the value in help text.
func (FeatureGates) Type() string { return "mapStringBool" }

var _ pflag.Value = FeatureGates{}
