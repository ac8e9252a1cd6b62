// Command hollow-kubelet is a kubelet fork on dynconfig: the real kubelet
// code, run as k8s.io/kubernetes/pkg/kubemark's HollowKubelet (a fake CRI
// runtime and image service, a fake cAdvisor and a stub container manager,
// as cmd/kubemark --morph=kubelet does), whose KubeletConfiguration is the
// one a dynconfig Controller chooses: the local layers (--config,
// --config-dir, flags) or the config assigned to its Node, with the
// kubelet's own defaulting and validation (package kubeletfork).
//
// It exits 0 when the Controller needs a restart onto another config, so a
// supervisor (systemd's Restart=always) starts it again; a kubelet that
// fails after it started exits non-zero, and the Controller counts those
// starts to detect a crash loop and roll back. It needs no container
// runtime and no root filesystem of its own: everything the kubelet writes
// goes under --root-dir.
//
// Usage:
//
//	hollow-kubelet --kubeconfig=K --node-name=N --dynamic-config-dir=D [--root-dir=R]
//	  [--config=F] [--config-dir=DIR] [--port=P]
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"

	"github.com/dynconfig/dynconfig"
	"github.com/dynconfig/dynconfig/merge"
	"github.com/dynconfig/dynconfig/test/kubeletfork"
)

// componentVersion names the Controller's tracking dir: bad marks and
// startups recorded by another kubelet version are not trusted. It is the
// version ensure-bins.sh stamps (component-base's gitVersion), with any
// character that does not belong in a directory name replaced.
var componentVersion = "hollow-kubelet-" + strings.Map(func(r rune) rune {
	if r < 0x80 && (r == '.' || r == '-' || r == '_' || r == '+' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return r
	}
	return '_'
}, version.Get().GitVersion)

// flags are the command line: where things are, not config fields, except
// --port.
type flags struct {
	kubeconfig, nodeName, stateDir, rootDir string
	configFile, configDir                   string
}

// flagBindings are the flags that set config fields, over every layer (as
// the kubelet's flags do).
var flagBindings = map[string]merge.FlagBinding{"port": {Path: "port"}}

func main() {
	if err := run(); err != nil {
		klog.ErrorS(err, "hollow-kubelet failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// run is the fork: the Controller chooses the config, the kubelet runs it.
// The part between the markers is README.md's "Embedding in a kubelet fork"
// (TestREADME keeps the two the same).
func run() error {
	f, fs, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("hollow-kubelet"))
	restConfig, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
	}
	client, err := clientset.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
	}
	configFile, configDir, rootDir, stateDir, nodeName := f.configFile, f.configDir, f.rootDir, f.stateDir, f.nodeName

	// README begin
	profile := kubeletfork.Profile{} // the kubelet's defaulting and ValidateKubeletConfiguration
	pipeline, err := merge.New[kubeletv1beta1.KubeletConfiguration](profile, merge.Options{})
	if err != nil {
		return err
	}
	flagOverrides, err := pipeline.FlagOverrides(fs, flagBindings) // --port
	if err != nil {
		return err
	}
	layers, err := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{
		InitFile: configFile, DropInDir: configDir, // --config, --config-dir
		Flags: append(hollowNodeSettings(rootDir), flagOverrides...), // fixed by the hollow node, then flags
	})
	if err != nil {
		return err
	}
	c, err := dynconfig.New(dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Profile: profile, Layers: layers, StateDir: stateDir, ComponentVersion: componentVersion,
		Cluster:        &dynconfig.Cluster{Client: client, NodeName: nodeName}, // assignment, ConfigOK, Events
		RequireHealthy: true,                                                   // promote after c.MarkHealthy()
		Restart:        func() { klog.Flush(); os.Exit(0) },                    // the supervisor restarts us
	})
	if err != nil {
		return err
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx) // v1beta1: local, assigned or last-known-good
	if err != nil {
		return err
	}
	kc, err := kubeletfork.ToInternal(cfg) // the kubelet's scheme and conversion
	if err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kc.FeatureGates); err != nil { // as the kubelet does
		return err
	}
	d, err := newHollowDeps(ctx, f, restConfig, kc) // clients (kubeAPIQPS...), fake CRI and cAdvisor
	if err != nil {
		return err
	}
	hk := kubemark.NewHollowKubelet(d.kubeletFlags, kc, d.kubeClient, d.heartbeatClient,
		d.cadvisor, d.fakeRuntime.ImageService, d.runtimeService, cm.NewStubContainerManager())
	go hk.Run(ctx)                                    // a kubelet that fails after it started exits non-zero
	go markHealthyWhenReady(ctx, client, nodeName, c) // c.MarkHealthy() once this kubelet posted Ready
	return c.Run(ctx)                                 // follow the assignment; exit 0 (Restart) onto another config
	// README end
}

// parseFlags parses the command line.
func parseFlags(args []string) (*flags, *pflag.FlagSet, error) {
	f := &flags{}
	fs := pflag.NewFlagSet("hollow-kubelet", pflag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "The kubeconfig of the kubelet's client (required).")
	fs.StringVar(&f.nodeName, "node-name", "", "The Node this kubelet registers and runs as (required).")
	fs.StringVar(&f.stateDir, "dynamic-config-dir", "", "The dynconfig state dir: checkpoints, pointers, tracking (required).")
	fs.StringVar(&f.rootDir, "root-dir", "", "The kubelet's root directory. Default: <dynamic-config-dir>/../kubelet-root.")
	fs.StringVar(&f.configFile, "config", "", "The local KubeletConfiguration file (the init config); an assigned config replaces it.")
	fs.StringVar(&f.configDir, "config-dir", "", "A directory of *.conf KubeletConfiguration drop-ins, applied over the init or assigned config.")
	fs.Int32("port", 0, "Config field port; overrides every config layer when set.")
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if f.kubeconfig == "" || f.nodeName == "" || f.stateDir == "" {
		return nil, nil, errors.New("--kubeconfig, --node-name and --dynamic-config-dir are required")
	}
	if f.rootDir == "" {
		f.rootDir = filepath.Join(filepath.Dir(filepath.Clean(f.stateDir)), "kubelet-root")
	}
	return f, fs, nil
}

// hollowNodeSettings are the fields a hollow node fixes whatever the
// config, because its host is not the machine it runs on: it has no
// cgroups (the container manager is a stub), so the cgroup v1 refusal does
// not apply; pod logs go under its root dir. They apply over every
// config layer, below the flags.
func hollowNodeSettings(rootDir string) []merge.Override {
	const src = "hollow node"
	return []merge.Override{
		{Path: "failCgroupV1", Value: false, Source: src},
		{Path: "podLogsDir", Value: filepath.Join(rootDir, "pod-logs"), Source: src},
	}
}

// hollowDeps are what kubemark.NewHollowKubelet takes besides the config:
// the kubelet's flags and clients, and the fakes of cmd/kubemark
// --morph=kubelet (CRI runtime and image service, cAdvisor).
type hollowDeps struct {
	kubeletFlags                *options.KubeletFlags
	kubeClient, heartbeatClient *clientset.Clientset
	cadvisor                    *cadvisortest.Fake
	fakeRuntime                 *fakeremote.RemoteRuntime
	runtimeService              internalapi.RuntimeService
}

// newHollowDeps builds the hollow kubelet's dependencies for config kc: its
// clients take their rate limit and content type from kc, as the kubelet's
// buildKubeletClientConfig does, and the heartbeat client times out as the
// kubelet's does. The fake runtime serves until the process exits.
func newHollowDeps(ctx context.Context, f *flags, restConfig *restclient.Config, kc *kubeletconfig.KubeletConfiguration) (*hollowDeps, error) {
	d := &hollowDeps{cadvisor: &cadvisortest.Fake{NodeName: f.nodeName}}
	kubeletRest := restclient.CopyConfig(restConfig)
	kubeletRest.UserAgent = "hollow-kubelet"
	kubeletRest.QPS, kubeletRest.Burst, kubeletRest.ContentType = float32(kc.KubeAPIQPS), int(kc.KubeAPIBurst), kc.ContentType
	var err error
	if d.kubeClient, err = clientset.NewForConfig(kubeletRest); err != nil {
		return nil, err
	}
	heartbeatRest := restclient.CopyConfig(kubeletRest)
	heartbeatRest.Timeout = min(kc.NodeStatusUpdateFrequency.Duration, time.Duration(kc.NodeLeaseDurationSeconds)*time.Second)
	heartbeatRest.QPS = -1
	if d.heartbeatClient, err = clientset.NewForConfig(heartbeatRest); err != nil {
		return nil, err
	}

	// The fake runtime's socket lives in the root dir (not in /tmp, as
	// fakeremote.GenerateEndpoint would put it), replacing the one a
	// previous process left.
	if err := os.MkdirAll(f.rootDir, 0o750); err != nil {
		return nil, fmt.Errorf("--root-dir: %w", err)
	}
	socket := filepath.Join(f.rootDir, "fake-cri.sock")
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fake CRI socket: %w", err)
	}
	endpoint := "unix://" + socket
	d.fakeRuntime = fakeremote.NewFakeRemoteRuntime()
	if err := d.fakeRuntime.Start(endpoint); err != nil {
		return nil, fmt.Errorf("fake CRI runtime: %w", err)
	}
	d.runtimeService, err = remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).
		WithConnectionTimeout(15 * time.Second).Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("fake CRI runtime service: %w", err)
	}

	d.kubeletFlags = options.NewKubeletFlags()
	d.kubeletFlags.RootDirectory = f.rootDir
	d.kubeletFlags.HostnameOverride = f.nodeName
	// As kubemark sets them.
	d.kubeletFlags.MinimumGCAge = metav1.Duration{Duration: time.Minute}
	d.kubeletFlags.MaxContainerCount = 100
	d.kubeletFlags.MaxPerPodContainerCount = 2
	return d, nil
}

// markHealthyWhenReady tells the Controller that the kubelet is healthy
// once this process's kubelet has posted the Node Ready: a Ready condition
// whose heartbeat is not older than the call (at the API server's
// one-second precision; it is called as the kubelet starts). Until then a
// new config is not promoted.
func markHealthyWhenReady(ctx context.Context, client clientset.Interface, nodeName string,
	c *dynconfig.Controller[kubeletv1beta1.KubeletConfiguration]) {
	since := time.Now().Truncate(time.Second)
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && !cond.LastHeartbeatTime.Time.Before(since) {
				return true, nil
			}
		}
		return false, nil
	})
	if err == nil {
		klog.FromContext(ctx).Info("The kubelet posted its Node Ready: marking the config healthy")
		c.MarkHealthy()
	}
}
