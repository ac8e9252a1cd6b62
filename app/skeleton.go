package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
)

// Skeleton is the command line every dynconfig binary shares with the
// components NewCommand builds, for a binary that is not a component (the
// rollout controller): a cobra command whose flags are named flag sets
// shown in help by section, "_" accepted for "-" in flag names, and, after
// the binary's own sets, "feature gate" (--feature-gates, with the logging
// gates), "logging" (component-base's: --logging-format=json, -v,
// --vmodule, ...) and "global" (--help, --version, --version=raw).
//
// Use: NewSkeleton, add flags to Flags.FlagSet(section), Finish, set
// Cmd.RunE and call SetUp first in it; run the command with Execute or
// Main for the exit codes.
type Skeleton struct {
	// Cmd is the command; set its RunE.
	Cmd *cobra.Command
	// Flags are its flag sets, in the order help shows them.
	Flags cliflag.NamedFlagSets

	gates     featuregate.MutableFeatureGate
	logging   *logsapi.LoggingConfiguration
	finishers []func()
}

// NewSkeleton returns the command name (no arguments) with --version
// printing "name VERSION" (version empty: the build's, as for NewCommand)
// and the gates features besides the logging ones. It panics on a
// duplicate feature: a mistake of the program.
func NewSkeleton(name, short string, version string, features map[featuregate.Feature]featuregate.FeatureSpec) *Skeleton {
	fg := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(fg); err != nil {
		panic("app.NewSkeleton: " + err.Error())
	}
	if err := fg.Add(features); err != nil {
		panic("app.NewSkeleton: " + err.Error())
	}
	info := versionInfo(version)
	cmd := &cobra.Command{
		Use:     name + " [flags]",
		Short:   short,
		Long:    short,
		Version: info.GitVersion,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%s takes no arguments, got %q", name, args)
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	s := &Skeleton{Cmd: cmd, Flags: cliflag.NamedFlagSets{NormalizeNameFunc: cliflag.WordSepNormalizeFunc},
		gates: fg, logging: logsapi.NewLoggingConfiguration()}
	global := &versionFlag{cmd: cmd, info: info}
	s.finishers = append(s.finishers, func() {
		fg.AddFlag(s.Flags.FlagSet("feature gate"))
		logsapi.AddFlags(s.logging, s.Flags.FlagSet("logging"))
		g := s.Flags.FlagSet("global")
		g.BoolP("help", "h", false, "Show this help and exit.")
		g.Var(global, "version", "Print the version (\""+name+" VERSION\") and exit; --version=raw prints component-base's version.Info.")
		g.Lookup("version").NoOptDefVal = "true"
	})
	return s
}

// Finish adds the shared flag sets after the binary's own and installs
// the sectioned help. Call it once, after the binary added its flags.
func (s *Skeleton) Finish() {
	for _, f := range s.finishers {
		f()
	}
	s.finishers = nil
	fs := s.Cmd.Flags()
	fs.SortFlags = false
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	for _, name := range s.Flags.Order {
		s.Flags.FlagSets[name].SortFlags = false
		fs.AddFlagSet(s.Flags.FlagSets[name])
	}
	cols, _, _ := term.TerminalSize(s.Cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(s.Cmd, s.Flags, cols)
}

// FeatureGate is the binary's feature gate (set by --feature-gates).
func (s *Skeleton) FeatureGate() featuregate.FeatureGate { return s.gates }

// SetUp validates the logging flags (a usage error when they are wrong)
// and, unless ctx already carries a logger (a test's), applies them to
// klog; it returns ctx with the logger to use.
func (s *Skeleton) SetUp(ctx context.Context) (context.Context, error) {
	o := &options{logging: s.logging}
	return o.setUpLogging(ctx, s.gates, s.Cmd.OutOrStdout(), s.Cmd.ErrOrStderr())
}

// Version is what --version prints after a binary's name: v when set,
// else the main module's version from the build info, else
// component-base's version.Get().GitVersion (set with -ldflags), else
// "v0.0.0-dev". For binaries built on neither NewCommand nor NewSkeleton
// (dynconfigctl).
func Version(v string) string { return versionInfo(v).GitVersion }
