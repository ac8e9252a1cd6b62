// Command dynconfig-kubelet brings dynconfig's lifecycle to the stock
// kubelet through its drop-in directory (package kubeletdropin). It has two
// roles over one state dir:
//
//	dynconfig-kubelet prestart [flags]   systemd ExecStartPre= of kubelet.service
//	dynconfig-kubelet run [flags]        a host service beside the kubelet
//
// prestart always exits 0 when its flags parse: it is never the reason the
// kubelet does not start (what it could not do is logged). run follows the
// Node's assignment until SIGTERM. deploy/kubelet has the units and RBAC.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/kubeletdropin"
)

const usage = `usage: dynconfig-kubelet prestart|run [flags]   (dynconfig-kubelet ROLE -h lists the flags)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	klog.Flush()
	os.Exit(code)
}

type common struct {
	c             kubeletdropin.Common
	kubeletBinary string
}

func (f *common) register(fs *flag.FlagSet) {
	fs.StringVar(&f.c.StateDir, "state-dir", "/var/lib/dynconfig/kubelet", "dynconfig's state dir for the kubelet (checkpoints, pointers, bad marks, startups)")
	fs.StringVar(&f.c.Files.Config, "kubelet-config", "/var/lib/kubelet/config.yaml", "the kubelet's --config file (empty: none)")
	fs.StringVar(&f.c.Files.ConfigDir, "kubelet-config-dir", "/etc/kubernetes/kubelet.conf.d", "the kubelet's --config-dir")
	fs.StringVar(&f.c.KubeletRootDir, "kubelet-root-dir", kubeletdropin.DefaultKubeletRootDir, "the kubelet's --root-dir, where it keeps the state files a drain-class change resets")
	fs.StringVar(&f.c.Files.Name, "drop-in-name", kubeletdropin.DefaultName, "dynconfig's drop-in file in --kubelet-config-dir")
	fs.StringVar(&f.c.KubeletVersion, "kubelet-version", "", "the kubelet's version, naming the tracking dir (default: asked from --kubelet-binary --version)")
	fs.StringVar(&f.kubeletBinary, "kubelet-binary", "/usr/bin/kubelet", "the kubelet binary, asked for its version when --kubelet-version is empty")
	fs.BoolVar(&f.c.DisableRemoteConfig, "disable-remote-config", false, "run the node's own kubelet config only; resets current and last-known-good to local")
	fs.DurationVar(&f.c.ConfirmWithin, "confirm-within", 0, "mark a config bad and go back to last-known-good when the kubelet's healthz has not answered on it within this time of its first start (0: no deadline; give both roles the same value)")
}

var versionRE = regexp.MustCompile(`v[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*`)

// complete finds the kubelet's version: both roles must name the same
// tracking dir, and a new kubelet must not inherit an old one's verdicts.
func (f *common) complete(ctx context.Context) error {
	if f.c.KubeletVersion != "" {
		return nil
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(vctx, f.kubeletBinary, "--version").Output()
	if err != nil {
		return fmt.Errorf("--kubelet-version is empty and %s --version failed: %w", f.kubeletBinary, err)
	}
	v := versionRE.FindString(string(out))
	if v == "" {
		return fmt.Errorf("--kubelet-version is empty and %s --version printed no version: %q", f.kubeletBinary, strings.TrimSpace(string(out)))
	}
	f.c.KubeletVersion = strings.ReplaceAll(v, "+", "_")
	return nil
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "prestart":
		return prestart(ctx, args[1:])
	case "run":
		if err := follow(ctx, args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "dynconfig-kubelet run: %v\n", err)
			return 1
		}
		return 0
	case "-h", "--help", "help":
		fmt.Println(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "dynconfig-kubelet: unknown role %q\n%s\n", args[0], usage)
	return 2
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("dynconfig-kubelet "+name, flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
}

func prestart(ctx context.Context, args []string) int {
	fs := newFlagSet("prestart")
	var f common
	f.register(fs)
	timeout := fs.Duration("timeout", kubeletdropin.DefaultPreStartTimeout, "the most this role takes (keep it below the unit's TimeoutStartSec)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "dynconfig-kubelet prestart: unexpected arguments %v\n", fs.Args())
		return 2
	}
	logger := klog.Background().WithName("prestart")
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	if err := f.complete(ctx); err != nil {
		// No version, no tracking dir: nothing can be decided safely.
		logger.Error(err, "Cannot decide; the kubelet starts on the drop-in it has")
		return 0
	}
	res, err := kubeletdropin.PreStart(ctx, f.c, *timeout)
	switch {
	case err != nil:
		logger.Error(err, "The kubelet starts anyway", "fallback", res.Fallback, "took", time.Since(start))
	case res.Chosen == nil || res.Chosen.Source == nil:
		logger.Info("The kubelet starts on the node's own config", "dropIn", f.c.Files.Path(), "took", time.Since(start))
	default:
		logger.Info("The kubelet starts on a dynconfig drop-in", "dropIn", f.c.Files.Path(),
			"config", dynconfigSource(res.Chosen), "lastKnownGood", res.Chosen.UsingLastKnownGood, "took", time.Since(start))
	}
	return 0
}

func dynconfigSource(ch *dynconfig.Chosen) string {
	cm := ch.Source.ConfigMap
	return fmt.Sprintf("%s/%s uid=%s resourceVersion=%s", cm.Namespace, cm.Name, cm.UID, cm.ResourceVersion)
}

func follow(ctx context.Context, args []string) error {
	fs := newFlagSet("run")
	var f common
	f.register(fs)
	var o kubeletdropin.RunOptions
	kubeconfig := fs.String("kubeconfig", "/etc/kubernetes/kubelet.conf", "the node's credentials (the kubelet's kubeconfig serves)")
	fs.StringVar(&o.NodeName, "node-name", "", "the kubelet's Node (default: the host name, lower-cased, as the kubelet's default)")
	unit := fs.String("kubelet-unit", "kubelet.service", "the systemd unit to restart over D-Bus")
	restartCommand := fs.String("restart-command", "", "restart the kubelet with /bin/sh -c COMMAND instead of systemd (hosts without systemd)")
	fs.StringVar(&o.HealthzURL, "kubelet-healthz-url", kubeletdropin.DefaultHealthzURL, "the kubelet's healthz")
	fs.DurationVar(&o.PollInterval, "poll-interval", 2*time.Second, "how often to look for a kubelet start and probe its health")
	fs.DurationVar(&o.StartTimeout, "start-timeout", 2*time.Minute, "how long a kubelet restart may take before deciding again")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", time.Minute, "how often to re-read the assignment without a change notification")
	fs.DurationVar(&o.Drain.Timeout, "drain-timeout", kubeletdropin.DefaultDrainTimeout, "the most one drain of the Node may take for a config change that needs one (cordon, evictions honouring PodDisruptionBudgets, the evicted pods gone); a drain that does not finish leaves the node on its config, uncordoned, and reports the new config not applied here (keep it below the rollouts' progress deadline, 10m by default)")
	metricsAddress := fs.String("metrics-address", "127.0.0.1:10267", "serve /metrics here; empty disables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	logger := klog.Background().WithName("run")
	ctx = klog.NewContext(ctx, logger)
	if err := f.complete(ctx); err != nil {
		return err
	}
	o.Common = f.c
	if o.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name: %w", err)
		}
		o.NodeName = strings.ToLower(h)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg = rest.AddUserAgent(cfg, "dynconfig-kubelet")
	if o.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("create API client: %w", err)
	}
	o.Restarter = systemdRestarter{unit: *unit}
	if *restartCommand != "" {
		o.Restarter = commandRestarter{command: *restartCommand}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.Registerer = reg
	if *metricsAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Addr: *metricsAddress, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Serving metrics")
			}
		}()
		defer srv.Close()
	}
	logger.Info("Following the Node's assignment", "node", o.NodeName, "stateDir", o.StateDir, "kubeletVersion", o.KubeletVersion)
	return kubeletdropin.Run(ctx, o)
}
