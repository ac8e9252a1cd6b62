package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/app"
	"github.com/dynconfig/dynconfig/components/kubelet"
	"github.com/dynconfig/dynconfig/merge"
)

// componentVersion names the state dir's tracking dir: bad marks and
// startups recorded by another version of this program are not trusted.
const componentVersion = "kubelet-like-v1"

// DemoCrashProviderID, as the providerID of the config in use, makes the
// process exit 1 right after Bootstrap: a demo hook for a config that
// crashes the component. (A field the kubelet accepts with any value, so
// only the config's trial can reveal it.)
const DemoCrashProviderID = "demo://crash-at-startup"

// DemoCrashEnv, set to "1", makes the process exit 1 right after Bootstrap
// whatever its config: a demo hook for a crash that is not the config's
// fault.
const DemoCrashEnv = "DYNCONFIG_DEMO_CRASH"

// DemoNeverHealthyProviderID, as the providerID of the config in use,
// keeps the health gate from ever passing on it: a demo hook for a config
// that keeps the component up but not working, which only a confirmation
// deadline (--confirm-within) can revert before its trial would promote it
// (the gate also holds promotion back).
const DemoNeverHealthyProviderID = "demo://never-healthy"

// probeInterval is how often the health gate probes /healthz.
const probeInterval = 200 * time.Millisecond

// health is the component's health gate, as a kubelet's is judged: its own
// /healthz endpoint answers (the built-in HTTP probe), and the demo hook
// does not hold it back.
func health() app.HealthGate[kubeletv1beta1.KubeletConfiguration] {
	return app.AllOf(
		app.HTTPGet(probeInterval, func(_ *kubeletv1beta1.KubeletConfiguration, env app.Env) string {
			return "http://" + env.Address + "/healthz"
		}),
		func(ctx context.Context, cfg *kubeletv1beta1.KubeletConfiguration, _ app.Env) error {
			if cfg.ProviderID == DemoNeverHealthyProviderID {
				<-ctx.Done()
				return fmt.Errorf("demo hook: never healthy with providerID %s: %w", DemoNeverHealthyProviderID, ctx.Err())
			}
			return nil
		},
	)
}

// errDemoCrash is the deliberate startup failure of the demo hooks.
var errDemoCrash = errors.New("demo hook: crashing at startup")

// main runs the command and exits with its code (app.Execute): 0 when it
// stopped on a signal or to restart onto a new config, 1 on any error, 2
// on a wrong command line.
func main() {
	app.Main(newCommand())
}

// configFlags registers the flags that set KubeletConfiguration fields and
// returns their field paths. Only flags set on the command line apply, on
// top of every layer.
func configFlags(fs *pflag.FlagSet) map[string]merge.FlagBinding {
	fs.Int32("max-pods", 0, "Config field maxPods; overrides every config layer when set.")
	fs.Int32("kube-api-qps", 0, "Config field kubeAPIQPS; overrides every config layer when set.")
	return map[string]merge.FlagBinding{
		"max-pods":     {Path: "maxPods"},
		"kube-api-qps": {Path: "kubeAPIQPS"},
	}
}

// start is the demo hooks: a crash right after Bootstrap, before serving.
func start(_ context.Context, cfg *kubeletv1beta1.KubeletConfiguration, _ app.Env) error {
	if cfg.ProviderID == DemoCrashProviderID {
		return fmt.Errorf("%w: the config in use has providerID %s", errDemoCrash, DemoCrashProviderID)
	}
	if os.Getenv(DemoCrashEnv) == "1" {
		return fmt.Errorf("%w: %s=1 in the environment", errDemoCrash, DemoCrashEnv)
	}
	return nil
}

// newCommand builds the cobra command. Each call has its own flag set, so
// tests can run it several times in one process.
func newCommand() *cobra.Command {
	return app.NewCommand(app.Component[kubeletv1beta1.KubeletConfiguration]{
		Name:      "kubelet-like",
		Component: "kubelet",
		Short:     "A kubelet stand-in that takes its KubeletConfiguration from the cluster through dynconfig",
		Long: "kubelet-like serves /healthz, /configz and /metrics with the KubeletConfiguration chosen by\n" +
			"dynconfig from its local layers and the config assigned to its node, and exits 0 to be\n" +
			"restarted when a new config is assigned.",
		ComponentVersion: componentVersion,
		Profile:          kubelet.Profile{},
		ConfigzKey:       "kubeletconfig",
		DefaultPort:      10248,
		ConfigFlags:      configFlags,
		FeatureGatesPath: "featureGates",
		Health:           health(),
		Start:            start,
	})
}
