package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dynconfig/dynconfig/app"
	rolloutcli "github.com/dynconfig/dynconfig/rollout/cli"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, defaultDeps())
	stop()
	os.Exit(code)
}

// deps is what the commands take from the outside world, so that tests can
// replace it: the clock stamps pointers written by reset, the logger receives
// what package checkpoint reports, and newClient builds the API client of
// the commands that talk to the API server from the kubectl client flags.
type deps struct {
	clock     clock.PassiveClock
	logger    klog.Logger
	newClient func(*genericclioptions.ConfigFlags) (apiClient, error)
	// stdin is what validate reads for the FILE "-".
	stdin io.Reader
	// arg0 is the name the binary was run as (plugin.go); "" is dynconfigctl.
	arg0 string
}

func defaultDeps() deps {
	return deps{clock: clock.RealClock{}, logger: klog.Background(), newClient: newClientFromFlags, stdin: os.Stdin, arg0: os.Args[0]}
}

// usageError is a malformed command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// run executes the command line args and returns the exit code. Errors go to
// stderr, results to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	root := newRootCommand(stdout, stderr, d)
	root.SetArgs(args)
	ran := markRun(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", invokedAs(d.arg0), err)
	var u *usageError
	var ru *rolloutcli.UsageError
	// An error before the command ran is cobra's check of its flags or
	// arguments (commands built elsewhere, such as rollout's, use
	// cobra.ExactArgs): a usage error too.
	if errors.As(err, &u) || errors.As(err, &ru) || !*ran {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	return exitError
}

func newRootCommand(stdout, stderr io.Writer, d deps) *cobra.Command {
	root := &cobra.Command{
		Use:   "dynconfigctl",
		Short: "Inspect and repair a node's dynconfig state, and assign configs to nodes",
		Long: `dynconfigctl is the operator's tool for components that use dynconfig.

On a node, offline, on a component's state dir (checkpoints, current and
last-known-good pointers, bad marks, startups):
  inspect      show what the state dir holds, and whether it is at a dead end
  forget-bad   forget a bad mark, so that the config gets a fresh trial
  reset        point current and last-known-good at the local config

On config files (render --node also reads the node's assignment):
  validate     check config files as the component would, every error at once
  render       show the config a node would run, with the layer of each field

Against the API server (the kubectl client flags --kubeconfig, --context,
--namespace, ... select the cluster):
  assign       assign a ConfigMap to a node's component, or clear it
  status       the fleet's configs in one table: assigned, active, LKG, phase
  rollout      roll a ConfigMap out to nodes in steps (ConfigRollout), steer it

Exit status of every command: 0 on success, 1 on an error, 2 on a usage error
(unknown command or flag, wrong number of arguments, malformed argument).`,
		// --version prints "dynconfigctl VERSION", as every dynconfig binary.
		Version:       app.Version(""),
		SilenceUsage:  true,
		SilenceErrors: true,
		// A root command with Args set reports unknown subcommands through
		// Args, so that they are usage errors like every other.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Help()
			return usagef("no command given")
		},
	}
	root.SetVersionTemplate("dynconfigctl {{.Version}}\n")
	setDisplayName(root, invokedAs(d.arg0))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		newInspectCommand(stdout, d),
		newForgetBadCommand(stdout, d),
		newResetCommand(stdout, d),
		newAssignCommand(stdout, d),
		newValidateCommand(d.stdin, stdout, stderr),
		newStatusCommand(stdout, stderr, d),
		newRenderCommand(stdout, d),
		rolloutcli.NewCommand(rolloutcli.Options{Out: stdout, ErrOut: stderr}),
	)
	return root
}

// markRun wraps the RunE of every command under root so that the returned
// flag says whether one of them was called.
func markRun(root *cobra.Command) *bool {
	ran := new(bool)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				*ran = true
				return run(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return ran
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == len(names):
		case len(names) == 0:
			return usagef("%s takes no arguments, got %q", cmd.Name(), args)
		default:
			return usagef("%s takes %d argument(s), %s, got %d", cmd.Name(), len(names), strings.Join(names, " "), len(args))
		}
		return nil
	}
}
