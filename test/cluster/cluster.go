package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Names of the binaries in the bin directory, as envtest looks them up.
const (
	APIServerBinary = "kube-apiserver"
	EtcdBinary      = "etcd"
)

// testModulePath is the module whose parent directory holds bin/.
const testModulePath = "github.com/dynconfig/dynconfig/test"

// EnsureBinsHint is the command that builds the binaries; it is part of the
// failure message when they are missing.
const EnsureBinsHint = "run test/hack/ensure-bins.sh"

// logTailLines is how many lines of each component's log a failed test shows.
const logTailLines = 40

// Options tunes StartWithOptions. The zero value is what Start uses.
type Options struct {
	// BinDir is the directory holding kube-apiserver and etcd. Default: the
	// bin/ directory of the repository, found by walking up from the working
	// directory to test/go.mod.
	BinDir string

	// StartTimeout bounds each start of etcd and of the API server, and the
	// wait for /readyz after a restart. Default: 60s (the machine may be busy
	// compiling; envtest's own default of 20s is too short there).
	StartTimeout time.Duration

	// StopTimeout bounds each stop before the process is killed. Default: 20s.
	StopTimeout time.Duration

	// APIServerFlags are extra kube-apiserver flags, by name without the
	// leading dashes; they replace envtest's value for the same flag, and
	// the flags NodeAuthorization sets.
	APIServerFlags map[string][]string

	// NodeAuthorization authorizes requests as a production cluster does:
	// --authorization-mode=Node,RBAC (envtest's default is RBAC alone) and
	// --enable-admission-plugins=NodeRestriction, so a client certificate of
	// system:node:<name> in group system:nodes (NodeConfig) gets what the
	// Node authorizer gives a kubelet and may change only its own Node.
	// ValidatingAdmissionPolicy is on by default; no flag is needed for it.
	NodeAuthorization bool

	// ControlPlane also starts kube-controller-manager (every default
	// controller plus bootstrapsigner and tokencleaner, each with its own
	// ServiceAccount's credentials: --use-service-account-credentials) and
	// kube-scheduler, with the flags kubeadm runs them with, and
	// StartWithOptions returns once both serve /healthz and hold their
	// leader-election Lease. Deployments then get ReplicaSets and Pods,
	// Pods get scheduled, PodDisruptionBudgets get a status, volumes get
	// attached. It needs bin/kube-controller-manager and
	// bin/kube-scheduler (ensure-bins.sh) and costs a few CPU-seconds per
	// start, so it is off by default.
	ControlPlane bool

	// ControllerManagerFlags and SchedulerFlags are extra flags of the two
	// components (with ControlPlane), by name without the leading dashes;
	// they replace the default value of the same flag.
	ControllerManagerFlags map[string][]string
	SchedulerFlags         map[string][]string
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Config connects to the API server as an admin (group system:masters).
	// Each use should copy it (rest.CopyConfig) before changing it.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// KubeConfig is Config as a kubeconfig file's content, for processes
	// started by a test (write it under t.TempDir()).
	KubeConfig []byte

	tb          testing.TB
	timeout     time.Duration
	stopTimeout time.Duration
	logDir      string

	mu   sync.Mutex
	env  *envtest.Environment
	logs []*os.File
	// components are the control-plane processes Options.ControlPlane
	// started, in start order.
	components []*component
	apiDown    bool
	stopped    bool
	stopErrs   []error
}

// Start starts etcd and kube-apiserver with the default Options and stops
// them when the test ends. It fails the test if they cannot start.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	return StartWithOptions(tb, Options{})
}

// StartWithOptions is Start with explicit Options.
func StartWithOptions(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 20 * time.Second
	}
	if o.BinDir == "" {
		dir, err := DefaultBinDir()
		if err != nil {
			tb.Fatalf("cluster: %v", err)
		}
		o.BinDir = dir
	}
	apiPath, etcdPath, err := findBinaries(o.BinDir)
	if err != nil {
		tb.Fatalf("cluster: %v", err)
	}

	// envtest logs through controller-runtime's logger; without one set it
	// prints a warning with a stack trace 30s into the process. klog shows
	// its errors and hides its V(1) chatter. The first call wins.
	ctrllog.SetLogger(klog.Background())

	work := tb.TempDir()
	c := &Cluster{tb: tb, timeout: o.StartTimeout, stopTimeout: o.StopTimeout, logDir: filepath.Join(work, "logs")}
	certDir := filepath.Join(work, "apiserver")
	for _, d := range []string{c.logDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatalf("cluster: %v", err)
		}
	}
	apiLog, err := c.openLog(APIServerBinary + ".log")
	if err != nil {
		tb.Fatalf("cluster: %v", err)
	}
	etcdLog, err := c.openLog(EtcdBinary + ".log")
	if err != nil {
		c.closeLogs()
		tb.Fatalf("cluster: %v", err)
	}

	apiServer := &envtest.APIServer{
		Path: apiPath,
		// A directory we own instead of a random one that envtest removes
		// on Stop: a restart then reuses the serving certificate and the
		// client CA, so Config stays valid.
		CertDir: certDir,
		Out:     apiLog,
		Err:     apiLog,
	}
	if o.NodeAuthorization {
		apiServer.Configure().Set("authorization-mode", "Node,RBAC")
		apiServer.Configure().Set("enable-admission-plugins", "NodeRestriction")
	}
	for name, values := range o.APIServerFlags {
		apiServer.Configure().Set(name, values...)
	}
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: apiServer,
			Etcd:      &envtest.Etcd{Path: etcdPath, Out: etcdLog, Err: etcdLog},
		},
		BinaryAssetsDirectory:    o.BinDir,
		ControlPlaneStartTimeout: o.StartTimeout,
		ControlPlaneStopTimeout:  o.StopTimeout,
	}
	// Registered before Start so a half-started control plane is stopped
	// and the logs of a failed start are shown.
	tb.Cleanup(func() {
		c.Stop()
		if tb.Failed() {
			c.logTails()
		}
	})

	cfg, err := c.env.Start()
	if err != nil {
		tb.Fatalf("cluster: starting etcd and kube-apiserver from %s: %v", o.BinDir, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatalf("cluster: building a clientset: %v", err)
	}
	c.Config = cfg
	c.Client = client
	c.KubeConfig = c.env.KubeConfig
	if o.ControlPlane {
		if err := c.startControlPlane(o, work, certDir); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// DefaultBinDir returns the bin/ directory beside test/: the parent of the
// nearest directory, walking up from the working directory, whose go.mod
// declares the test module.
func DefaultBinDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the bin directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isTestModule(filepath.Join(dir, "go.mod")) {
			return filepath.Join(filepath.Dir(dir), "bin"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("finding the bin directory: no go.mod of module %s above %s", testModulePath, wd)
		}
	}
}

func isTestModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == testModulePath
		}
	}
	return false
}

// findBinaries returns the paths of kube-apiserver and etcd in dir, or an
// error that says how to build them.
func findBinaries(dir string) (apiServer, etcd string, err error) {
	paths, err := findExecutables(dir, APIServerBinary, EtcdBinary)
	if err != nil {
		return "", "", err
	}
	return paths[0], paths[1], nil
}

// findExecutables returns the paths of the named executables in dir, in
// order, or an error that names the missing ones and says how to build
// them.
func findExecutables(dir string, names ...string) ([]string, error) {
	var paths, missing []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
		paths = append(paths, path)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s missing or not executable in %s: %s first",
			strings.Join(missing, " and "), dir, EnsureBinsHint)
	}
	return paths, nil
}

// StopAPIServer stops the API server and leaves etcd running. Clients then
// get connection errors until RestartAPIServer. It may be called from any
// goroutine; stopping a stopped server does nothing.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("cluster: StopAPIServer after Stop")
	}
	if c.apiDown {
		return nil
	}
	if err := c.env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("cluster: stopping kube-apiserver: %w", err)
	}
	c.apiDown = true
	return nil
}

// RestartAPIServer stops the API server if it runs, starts it again on the
// same etcd, address and certificates, and returns once /readyz answers ok.
// It may be called from any goroutine.
func (c *Cluster) RestartAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("cluster: RestartAPIServer after Stop")
	}
	api := c.env.ControlPlane.APIServer
	if !c.apiDown {
		if err := api.Stop(); err != nil {
			return fmt.Errorf("cluster: stopping kube-apiserver: %w", err)
		}
		c.apiDown = true
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("cluster: starting kube-apiserver again: %w", err)
	}
	c.apiDown = false
	return c.waitReady()
}

// waitReady polls /readyz: /healthz, which envtest waits for, can pass
// before the server has synced its caches from etcd.
func (c *Cluster) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return bytes.Equal(bytes.TrimSpace(body), []byte("ok")), nil
	})
	if err != nil {
		return fmt.Errorf("cluster: kube-apiserver not ready within %v after restart (last error: %v): %w", c.timeout, last, err)
	}
	return nil
}

// Stop stops the API server and etcd and closes the logs. The test's
// cleanup calls it; calling it earlier, or twice, is fine. Errors are
// reported on the test.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	// The components first: stopped after the API server they would log
	// connection errors until killed.
	for _, err := range c.stopComponents(c.stopTimeout) {
		c.tb.Errorf("%v", err)
	}
	if err := c.env.Stop(); err != nil {
		c.tb.Errorf("cluster: stopping the control plane: %v", err)
	}
	c.closeLogs()
}

// LogDir is the directory holding kube-apiserver.log and etcd.log. It is
// removed when the test ends.
func (c *Cluster) LogDir() string { return c.logDir }

func (c *Cluster) openLog(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.logDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log %s: %w", name, err)
	}
	c.logs = append(c.logs, f)
	return f, nil
}

func (c *Cluster) closeLogs() {
	for _, f := range c.logs {
		if err := f.Close(); err != nil {
			c.tb.Errorf("cluster: closing %s: %v", f.Name(), err)
		}
	}
	c.logs = nil
}

// logTails adds the last lines of each log to the test output.
func (c *Cluster) logTails() {
	for _, name := range []string{EtcdBinary + ".log", APIServerBinary + ".log", ControllerManagerBinary + ".log", SchedulerBinary + ".log"} {
		path := filepath.Join(c.logDir, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) && (name == ControllerManagerBinary+".log" || name == SchedulerBinary+".log") {
			continue // not started
		}
		if err != nil {
			c.tb.Logf("cluster: reading %s: %v", path, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > logTailLines {
			lines = lines[len(lines)-logTailLines:]
		}
		c.tb.Logf("cluster: last %d lines of %s:\n%s", len(lines), name, strings.Join(lines, "\n"))
	}
}
