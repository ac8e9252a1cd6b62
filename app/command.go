package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	// The json log format, as Kubernetes components have it.
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/nodeapi"
)

// The exit codes of every command built here (and of Execute).
const (
	// ExitOK: the component stopped on a signal or to restart onto a new
	// config, or --help or --version was asked for.
	ExitOK = 0
	// ExitError: the component failed (an invalid local config, a state
	// dir it cannot use, a crash of its Start or Run).
	ExitError = 1
	// ExitUsage: the command line is wrong (an unknown flag, a bad flag
	// value, an argument, a missing required flag, flags that exclude each
	// other, an unknown feature gate, a bad logging flag).
	ExitUsage = 2
)

// Component describes a component binary: its config type T, how the
// command line sets config fields, and what it does with the config the
// Controller chooses. Name and Profile are required; every other field's
// zero value is a documented default.
type Component[T any] struct {
	// Name is the command's name: its use line, the prefix of its error
	// line ("NAME: error") and of its log lines. Required.
	Name string
	// Component is the dynconfig component name (dynconfig.Options.Component):
	// it chooses the Node annotation that assigns its config, its condition
	// type, its ConfigStatus annotation, its Events' source and its metrics'
	// component label. "kubelet" keeps ConfigOK and
	// dynconfig.io/config-source. Default: Name.
	Component string
	// Short and Long are the help texts (cobra.Command.Short and Long).
	// Default Long: Short.
	Short, Long string
	// Version is what --version prints after Name. Default: the main
	// module's version from the build info, else component-base's
	// version.Get().GitVersion (set with -ldflags).
	Version string
	// ComponentVersion names the state dir's tracking dir
	// (dynconfig.Options.ComponentVersion): bad marks and startups recorded
	// by another ComponentVersion are not trusted. Default: Name + "-" +
	// the --version string.
	ComponentVersion string

	// Profile is the config type's profile: the one place the payload key,
	// defaults and validation come from. Required.
	Profile dynconfig.Profile[T]
	// ConfigzKey is the key of the config in /configz ("kubeletconfig" for
	// the kubelet). Default: Name.
	ConfigzKey string
	// DefaultPort is --port's default. Default: 0 (a free port).
	DefaultPort int

	// ConfigFlags, when set, registers the flags that set config fields
	// (config flags, shown in help with --config) and returns their
	// bindings to field paths; a flag set on the command line wins over
	// every config layer.
	ConfigFlags func(fs *pflag.FlagSet) map[string]merge.FlagBinding
	// FeatureGatesPath, when set, makes --feature-gates a config field at
	// that path (the kubelet's "featureGates"), merged by gate over every
	// layer, with component-base's map flag type (cliflag.MapStringBool):
	// the profile validates the gates; those the process knows (the
	// logging gates, such as LoggingAlphaOptions) also set the process's
	// gate. When empty, --feature-gates is the
	// process's component-base feature gate: the logging gates plus
	// Features, unknown gates refused at parse time (exit 2), read by Start
	// and Run through Env.FeatureGates.
	FeatureGatesPath string
	// Features are the component's own feature gates, when
	// FeatureGatesPath is empty.
	Features map[featuregate.Feature]featuregate.FeatureSpec

	// Reporters are called with every condition report after the
	// command's own (the log, /configz, --status-file) and before the
	// Node's (with an API server). Default: none.
	Reporters []dynconfig.Reporter

	// NewClient, when set, returns the API client for the value of
	// --kubeconfig (empty: the in-cluster config), for a program that
	// builds its clients its own way (a user agent, rate limits, a fake in
	// tests). Default: client-go's clientset from the kubeconfig file, or
	// from the in-cluster config when --kubeconfig is empty. Its errors are
	// prefixed with the flag.
	NewClient func(kubeconfig string) (kubernetes.Interface, error)

	// RequireHealthy delays the promotion of a config to last-known-good
	// until the component is healthy on it: by Health when set, else once
	// Start returned and /healthz serves (after each restart), and once
	// Reload applied a config in process. Health, or --confirm-within, set
	// it for you.
	RequireHealthy bool
	// Health, when set, is the component's health gate (HealthGate): the
	// command confirms a config healthy only once it passes for that
	// config, instead of as soon as the component serves. It decides when
	// a config may become last-known-good and, with --confirm-within, when
	// a config on trial is reverted for want of a confirmation. Default:
	// a config is healthy once the component serves it.
	Health HealthGate[T]

	// Start, when set, prepares the component to run cfg, the config
	// Bootstrap chose, before anything is served. An error is a crash at
	// startup: the command exits 1, and the Controller counts the startup
	// against the config's trial.
	Start func(ctx context.Context, cfg *T, env Env) error
	// Run, when set, is the component's work on cfg, the config Bootstrap
	// chose, called once the endpoints serve, next to the Controller's Run
	// (with Reload, the later configs come through Reload). Its context
	// ends on a signal or when a new config needs a restart. An error
	// before that is a crash (exit 1); a nil return before that stops the
	// command (exit 0). Default: wait for the context.
	Run func(ctx context.Context, cfg *T, env Env) error
	// Reload, when set, applies a new config in process instead of a
	// restart (dynconfig.Options.Reload); /configz serves cfg once it
	// returned nil. When nil, a new config ends the command with exit code
	// 0 so that its process manager starts it again on that config.
	Reload func(ctx context.Context, cfg *T) error
}

// Env is what the command gives Start and Run besides the config.
type Env struct {
	// FeatureGates are the process's feature gates (--feature-gates unless
	// FeatureGatesPath made it a config field; then their defaults).
	FeatureGates featuregate.FeatureGate
	// NodeName is --node-name, or the host name, lowercased.
	NodeName string
	// Address is the HOST:PORT the command's endpoints (/healthz,
	// /configz, /metrics) are bound to: set for Run and Health, empty in
	// Start (nothing serves yet).
	Address string
}

// usageError marks an error of the command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// UsageError marks err as an error of the command line, so that Execute
// returns ExitUsage for it. A Start or Run may use it for a flag value it
// checks itself. UsageError(nil) is nil.
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// IsUsageError reports whether err, or an error it wraps, was marked by
// UsageError.
func IsUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// Main runs cmd with the process's arguments and standard streams under a
// context that SIGINT and SIGTERM cancel, and exits the process with the
// code Execute returns. The context carries no logger, so the logging
// flags configure klog.
func Main(cmd *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, cmd, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Execute runs cmd with args and returns the exit code: ExitOK when it
// returned nil; ExitUsage for an error of the command line (cobra's own
// checks of flags and arguments, which fail before the command runs, and
// errors marked by UsageError), written as "NAME: error" and a line that
// points to --help; ExitError for any other error, written as one last line
// "NAME: error". klog is flushed first, so the error line comes last.
//
// Execute tells a usage error by its coming before cmd's RunE ran, so it is
// for a command without subcommands, such as those NewCommand builds.
//
// When ctx carries a logger (klog.NewContext; tests use ktesting), commands
// built by NewCommand log through it and only validate the logging flags;
// else they apply them to klog (once per process).
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stdout, stderr io.Writer) int {
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	ran := false
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, a []string) error {
			ran = true
			return run(c, a)
		}
		defer func() { cmd.RunE = run }()
	}
	err := cmd.ExecuteContext(ctx)
	klog.Flush()
	switch {
	case err == nil:
		return ExitOK
	case !ran || IsUsageError(err):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.Name(), err, cmd.Name())
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name(), err)
		return ExitError
	}
}

// NewCommand returns the command of component c. Each call has its own
// flags, so a test can build and run it several times in one process. It
// panics when c lacks Name or Profile: mistakes of the program, not of
// its user.
func NewCommand[T any](c Component[T]) *cobra.Command {
	if c.Name == "" || c.Profile == nil {
		panic("app.NewCommand: Component.Name and Component.Profile are required")
	}
	if c.Component == "" {
		c.Component = c.Name
	}
	if err := nodeapi.ValidateComponentName(c.Component); err != nil {
		panic("app.NewCommand: Component.Component: " + err.Error())
	}
	if c.Long == "" {
		c.Long = c.Short
	}
	if c.ConfigzKey == "" {
		c.ConfigzKey = c.Name
	}
	info := versionInfo(c.Version)
	if c.ComponentVersion == "" {
		c.ComponentVersion = c.Name + "-" + info.GitVersion
	}

	o := newOptions(c.DefaultPort)
	fg := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(fg); err != nil {
		panic("app.NewCommand: " + err.Error())
	}
	if len(c.Features) > 0 {
		if c.FeatureGatesPath != "" {
			panic("app.NewCommand: Component.Features cannot be used with Component.FeatureGatesPath")
		}
		if err := fg.Add(c.Features); err != nil {
			panic("app.NewCommand: Component.Features: " + err.Error())
		}
	}
	cmd := &cobra.Command{
		Use:     c.Name + " --dynamic-config-dir=DIR [flags]",
		Short:   c.Short,
		Long:    c.Long,
		Version: info.GitVersion,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%s takes no arguments, got %q", c.Name, args)
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")

	// Like Kubernetes components, accept "_" for "-" in flag names
	// (--dynamic_config_dir); help lists the "-" form only.
	nfs := cliflag.NamedFlagSets{NormalizeNameFunc: cliflag.WordSepNormalizeFunc}
	configFS := nfs.FlagSet("config")
	o.addConfigFlags(configFS, c.Profile.GroupVersionKind().Kind)
	var bindings map[string]merge.FlagBinding
	if c.ConfigFlags != nil {
		bindings = c.ConfigFlags(configFS)
	}
	if c.FeatureGatesPath != "" {
		if bindings == nil {
			bindings = map[string]merge.FlagBinding{}
		}
		configFS.Var(cliflag.NewMapStringBool(&o.configGates), "feature-gates",
			"Config field "+c.FeatureGatesPath+": a set of NAME=true|false pairs, merged by gate over every config layer when set.")
		bindings["feature-gates"] = merge.FlagBinding{Path: c.FeatureGatesPath, Merge: true}
	} else {
		fg.AddFlag(nfs.FlagSet("feature gate"))
	}
	o.addRemoteFlags(nfs.FlagSet("remote config"), c.Component)
	o.addServingFlags(nfs.FlagSet("serving"))
	logsapi.AddFlags(o.logging, nfs.FlagSet("logging"))
	global := nfs.FlagSet("global")
	global.BoolP("help", "h", false, "Show this help and exit.")
	global.Var(&versionFlag{cmd: cmd, info: info}, "version", "Print the version (\"NAME VERSION\") and exit; --version=raw prints component-base's version.Info.")
	global.Lookup("version").NoOptDefVal = "true"

	fs := cmd.Flags()
	fs.SortFlags = false
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	for _, name := range nfs.Order {
		nfs.FlagSets[name].SortFlags = false
		fs.AddFlagSet(nfs.FlagSets[name])
	}
	// Help wraps at the terminal's width, as Kubernetes components do; 0
	// (no wrapping) when stdout is not a terminal.
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, nfs, cols)
	_ = cmd.MarkFlagRequired("dynamic-config-dir")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "source-dir")
	cmd.MarkFlagsMutuallyExclusive("configmap", "source-dir")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.setProcessGates(fg); err != nil {
			return UsageError(err)
		}
		ctx, err := o.setUpLogging(cmd.Context(), fg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		logger := klog.FromContext(ctx).WithName(c.Name)
		ctx = klog.NewContext(ctx, logger)
		if v := logger.V(1); v.Enabled() {
			fs.VisitAll(func(f *pflag.Flag) { v.Info("Flag", "name", "--"+f.Name, "value", f.Value.String()) })
		}
		if err := o.validate(); err != nil {
			return UsageError(err)
		}
		err = run(ctx, &c, o, fg, fs, bindings, cmd.OutOrStdout())
		if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
			// Stopped by a signal while starting: not a failure.
			logger.Info("Stopped while starting", "cause", err)
			return nil
		}
		return err
	}
	return cmd
}

// setProcessGates sets, when --feature-gates is a config field, the
// process's gates it names (the logging ones) from it too, as the kubelet
// applies its config's gates to its own: the config field keeps them all.
func (o *options) setProcessGates(fg featuregate.MutableFeatureGate) error {
	known := fg.GetAll()
	process := map[string]bool{}
	for name, on := range o.configGates {
		if _, ok := known[featuregate.Feature(name)]; ok {
			process[name] = on
		}
	}
	if len(process) == 0 {
		return nil
	}
	if err := fg.SetFromMap(process); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	return nil
}

// setUpLogging validates the logging flags (a usage error when they are
// wrong) and, unless ctx already carries a logger, applies them to klog
// (logs on stderr; info messages on stdout with --log-*-split-stream) and
// returns ctx with klog's logger.
func (o *options) setUpLogging(ctx context.Context, fg featuregate.FeatureGate, stdout, stderr io.Writer) (context.Context, error) {
	if errs := logsapi.Validate(o.logging, fg, nil); len(errs) > 0 {
		return ctx, UsageError(errs.ToAggregate())
	}
	if _, err := logr.FromContext(ctx); err == nil {
		return ctx, nil
	}
	if err := logsapi.ValidateAndApplyWithOptions(o.logging, &logsapi.LoggingOptions{ErrorStream: stderr, InfoStream: stdout}, fg); err != nil {
		return ctx, err
	}
	return klog.NewContext(ctx, klog.Background()), nil
}
