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
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
// startups recorded by another build of the kubelet are not trusted.
const componentVersion = "hollow-kubelet-v1.37.0"

// flags are the command line: where things are, not config fields, except
// --port.
type flags struct {
	kubeconfig, nodeName, stateDir, rootDir string
	configFile, configDir                   string
}

func main() {
	if err := run(); err != nil {
		klog.ErrorS(err, "hollow-kubelet failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run() error {
	var f flags
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
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if f.kubeconfig == "" || f.nodeName == "" || f.stateDir == "" {
		return errors.New("--kubeconfig, --node-name and --dynamic-config-dir are required")
	}
	if f.rootDir == "" {
		f.rootDir = filepath.Join(filepath.Dir(filepath.Clean(f.stateDir)), "kubelet-root")
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

	c, err := newController(&f, fs, client)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg, err := c.Bootstrap(ctx) // the config to run: local, assigned or last-known-good
	if err != nil {
		return err
	}
	kc, err := kubeletfork.ToInternal(cfg) // the kubelet's own conversion
	if err != nil {
		return err
	}
	// As the kubelet does at startup: its config's gates are the process's.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kc.FeatureGates); err != nil {
		return fmt.Errorf("featureGates: %w", err)
	}
	started := time.Now()
	if err := startHollowKubelet(ctx, &f, restConfig, kc); err != nil {
		return err
	}
	go markHealthyWhenReady(ctx, client, f.nodeName, started, c)
	return c.Run(ctx) // follows the assignment; exits 0 (Restart) to run another config
}

// newController wires the dynconfig Controller: the kubelet's own profile,
// the local layers (--config, --config-dir, then the hollow node's fixed
// settings and the flags on top), and the Node (Options.Cluster: its
// assignment annotation, the ConfigOK condition and ConfigStatus, Events).
// A restart is an exit 0.
func newController(f *flags, fs *pflag.FlagSet, client clientset.Interface) (*dynconfig.Controller[kubeletv1beta1.KubeletConfiguration], error) {
	profile := kubeletfork.Profile{} // the kubelet's defaulting and ValidateKubeletConfiguration
	pipeline, err := merge.New[kubeletv1beta1.KubeletConfiguration](profile, merge.Options{})
	if err != nil {
		return nil, err
	}
	flagLayer, err := pipeline.FlagOverrides(fs, map[string]merge.FlagBinding{"port": {Path: "port"}})
	if err != nil {
		return nil, err
	}
	layers, err := dynconfig.NewLayers(pipeline, dynconfig.LocalConfig{
		InitFile: f.configFile, DropInDir: f.configDir,
		Flags: append(hollowNodeSettings(f.rootDir), flagLayer...),
	})
	if err != nil {
		return nil, err
	}
	return dynconfig.New(dynconfig.Options[kubeletv1beta1.KubeletConfiguration]{
		Profile: profile, Layers: layers,
		StateDir: f.stateDir, ComponentVersion: componentVersion,
		Cluster:        &dynconfig.Cluster{Client: client, NodeName: f.nodeName},
		RequireHealthy: true, // promoted only once the kubelet posted Ready
		Restart: func() {
			klog.Background().Info("Exiting with code 0 to restart onto the new config")
			klog.Flush()
			os.Exit(0)
		},
	})
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

// startHollowKubelet starts the real kubelet on kc with kubemark's fakes,
// as cmd/kubemark does for --morph=kubelet. The kubelet runs in the
// background until the process exits; an error of the kubelet's after
// this returns ends the process with a non-zero code (klog.Fatal or
// os.Exit in the kubelet's code).
func startHollowKubelet(ctx context.Context, f *flags, restConfig *restclient.Config, kc *kubeletconfig.KubeletConfiguration) error {
	// The kubelet's client takes its rate limit and content type from the
	// config, as the kubelet's buildKubeletClientConfig does.
	kubeletRest := restclient.CopyConfig(restConfig)
	kubeletRest.UserAgent = "hollow-kubelet"
	kubeletRest.QPS, kubeletRest.Burst, kubeletRest.ContentType = float32(kc.KubeAPIQPS), int(kc.KubeAPIBurst), kc.ContentType
	client, err := clientset.NewForConfig(kubeletRest)
	if err != nil {
		return err
	}
	heartbeatRest := restclient.CopyConfig(kubeletRest)
	heartbeatRest.Timeout = min(kc.NodeStatusUpdateFrequency.Duration, time.Duration(kc.NodeLeaseDurationSeconds)*time.Second)
	heartbeatRest.QPS = -1
	heartbeatClient, err := clientset.NewForConfig(heartbeatRest)
	if err != nil {
		return err
	}

	endpoint, err := fakeremote.GenerateEndpoint()
	if err != nil {
		return fmt.Errorf("fake CRI endpoint: %w", err)
	}
	fakeRuntime := fakeremote.NewFakeRemoteRuntime()
	if err := fakeRuntime.Start(endpoint); err != nil {
		return fmt.Errorf("fake CRI runtime: %w", err)
	}
	runtimeService, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).
		WithConnectionTimeout(15 * time.Second).Build(ctx)
	if err != nil {
		return fmt.Errorf("fake CRI runtime service: %w", err)
	}

	kf := options.NewKubeletFlags()
	kf.RootDirectory = f.rootDir
	kf.HostnameOverride = f.nodeName
	kf.MinimumGCAge = metav1.Duration{Duration: time.Minute}
	kf.MaxContainerCount = 100
	kf.MaxPerPodContainerCount = 2
	if err := os.MkdirAll(f.rootDir, 0o750); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}

	hk := kubemark.NewHollowKubelet(kf, kc, client, heartbeatClient,
		&cadvisortest.Fake{NodeName: f.nodeName}, fakeRuntime.ImageService, runtimeService,
		cm.NewStubContainerManager())
	go hk.Run(ctx) // never returns; klog.Fatal when the kubelet cannot start
	return nil
}

// markHealthyWhenReady tells the Controller that the kubelet is healthy
// once this process's kubelet has posted the Node Ready: a Ready condition
// whose heartbeat is not older than started (at the API server's one-second
// precision). Until then a new config is not promoted.
func markHealthyWhenReady(ctx context.Context, client clientset.Interface, nodeName string, started time.Time,
	c *dynconfig.Controller[kubeletv1beta1.KubeletConfiguration]) {
	since := started.Truncate(time.Second)
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
